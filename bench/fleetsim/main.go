// Command fleetsim estimates the wall time of one shared probe run of a
// large estate over several replicas from measured costs, without probing
// anything: a discrete-event simulation of the replicas' workers (each
// claims a shard, probes it, writes it back, and claims the next) and of
// the one PostgreSQL server they share, which serves claims and
// write-backs one after another.
//
// Inputs, all flags: the estate (-endpoints, -shard), the fleet
// (-replicas, -slots: shards a replica probes at once, -cores per
// replica), the probe cost (-per-core: handshakes a second one core
// completes), and the database (-db: shards a second it takes, claim and
// write-back together, from BenchmarkShardClaims; -close: bytes a second
// the leader reads back when it closes the sweep, -result: bytes written
// back per endpoint).
//
// Usage: fleetsim [-endpoints 1000000] [-replicas 10] [-per-core 200] [-db 300]
package main

import (
	"container/heap"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	endpoints := flag.Int("endpoints", 1_000_000, "endpoints in the estate")
	shard := flag.Int("shard", 100, "targets per shard (daemon.shard_size)")
	replicas := flag.Int("replicas", 10, "replicas probing")
	slots := flag.Int("slots", 2, "shards one replica probes at once (the worker's slots)")
	cores := flag.Float64("cores", 1, "cores per replica")
	perCore := flag.Float64("per-core", 200, "handshakes a second one core completes")
	db := flag.Float64("db", 300, "shards a second the database takes (a claim and a write-back each)")
	result := flag.Float64("result", 2048, "bytes written back per endpoint")
	closeRate := flag.Float64("close", 60e6, "bytes a second the leader reads back when closing the sweep")
	flag.Parse()
	if *endpoints < 1 || *shard < 1 || *replicas < 1 || *slots < 1 || *cores <= 0 || *perCore <= 0 || *db <= 0 || *closeRate <= 0 {
		fmt.Fprintln(os.Stderr, "fleetsim: every figure must be positive")
		os.Exit(2)
	}
	r := simulate(*endpoints, *shard, *replicas, *slots, *cores**perCore, *db)
	closing := seconds(float64(*endpoints) * *result / *closeRate)
	fmt.Printf("%d endpoints in %d shards of %d, %d replicas × %d slots, %.0f handshakes/s per replica, database %.0f shards/s\n",
		*endpoints, r.shards, *shard, *replicas, *slots, *cores**perCore, *db)
	fmt.Printf("probing:              %v (probe bound %v, database bound %v)\n", r.wall.Round(time.Second),
		seconds(float64(*endpoints)/(float64(*replicas)**cores**perCore)).Round(time.Second), seconds(float64(r.shards) / *db).Round(time.Second))
	fmt.Printf("database busy:        %.0f%% of the run; workers waited for it %v in all\n", 100*r.dbBusy.Seconds()/r.wall.Seconds(), r.waited.Round(time.Millisecond))
	fmt.Printf("closing the sweep:    %v (%.1f GB of results read back by the leader)\n", closing.Round(time.Second), float64(*endpoints)**result/1e9)
	fmt.Printf("one sweep, wall time: %v\n", (r.wall + closing).Round(time.Second))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

type outcome struct {
	shards int
	wall   time.Duration
	dbBusy time.Duration
	waited time.Duration
}

// simulate runs the workers against the database. A replica's
// handshakes a second (rate) are shared by its slots; the database serves
// one request at a time, a claim or a write-back, each half of 1/db.
func simulate(endpoints, shard, replicas, slots int, rate, db float64) outcome {
	shards := (endpoints + shard - 1) / shard
	service := seconds(0.5 / db)
	var q events
	for w := range replicas * slots {
		heap.Push(&q, event{at: 0, worker: w, claim: true})
	}
	var (
		out     = outcome{shards: shards}
		dbFree  time.Duration
		claimed int
	)
	// serve queues one request of a worker ready at at and returns when
	// the database has answered it.
	serve := func(at time.Duration) time.Duration {
		start := max(at, dbFree)
		out.waited += start - at
		dbFree = start + service
		out.dbBusy += service
		return dbFree
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		at := e.at
		if !e.claim {
			at = serve(at) // the write-back
			out.wall = max(out.wall, at)
		}
		if claimed == shards {
			continue // the worker finds nothing more to claim
		}
		at = serve(at) // the claim
		n := min(shard, endpoints-claimed*shard)
		claimed++
		heap.Push(&q, event{at: at + seconds(float64(n)/(rate/float64(slots))), worker: e.worker})
	}
	return out
}

type event struct {
	at     time.Duration
	worker int
	claim  bool // a first claim; otherwise a write-back followed by the next claim
}

type events []event

func (q events) Len() int           { return len(q) }
func (q events) Less(i, j int) bool { return q[i].at < q[j].at }
func (q events) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)        { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

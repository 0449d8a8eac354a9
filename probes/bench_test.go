package probes_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// BenchmarkProbe probes 64 loopback listeners per iteration, serving 8
// certificates under one intermediate, as a fleet behind one private CA
// would. One op is a sweep of every endpoint; the per-endpoint metrics
// divide by the number of endpoints. The TLS servers run in the same
// process, so time and allocations include the server side of every
// handshake.
func BenchmarkProbe(b *testing.B) {
	const endpoints, certs = 64, 8
	p := newPKI(b)
	var leaves []*certtest.Leaf
	for range certs {
		leaves = append(leaves, leaf(b, p.inter, "svc.example", now.Add(-day), now.Add(30*day)))
	}
	var targets []discovery.Target
	for i := range endpoints {
		s, err := certtest.Serve("127.0.0.1:0", leaves[i%certs].FullChain())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		targets = append(targets, target("svc.example", s.Addr()))
	}
	prober := probes.New(probes.Config{AllowLoopback: true, Roots: p.root.Pool(), Now: func() time.Time { return now }})

	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		var wg sync.WaitGroup
		for _, tg := range targets {
			wg.Go(func() {
				if o := prober.Probe(b.Context(), tg); o[0].Trust != probes.Trusted {
					b.Errorf("%s: %q %q %s", o[0].Address, o[0].Failure, o[0].Trust, o[0].Error)
				}
			})
		}
		wg.Wait()
	}
	runtime.ReadMemStats(&after)
	n := float64(b.N * endpoints)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/endpoint")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/endpoint")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/endpoint")
	b.ReportMetric(retainedPerEndpoint(b, prober, targets), "retained-B/endpoint")
}

// retainedPerEndpoint sweeps targets once more with a warm prober and
// returns the heap the kept observations hold, per endpoint: what a sweep's
// results cost in memory until they are evaluated.
func retainedPerEndpoint(b *testing.B, prober *probes.Prober, targets []discovery.Target) float64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := make([][]probes.Observation, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Go(func() { kept[i] = prober.Probe(b.Context(), tg) })
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(targets))
}

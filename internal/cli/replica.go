package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

// daemons builds the daemon of `certwatch run` and hands it reloaded
// parts. A single instance runs one daemon for its lifetime; a replica
// sharing a PostgreSQL state runs a fresh one for each term it leads, and
// none while it is a standby.
type daemons struct {
	srv        *serve.Server
	recorder   daemon.Recorder
	client     *http.Client
	memory     state.Memory
	history    state.History
	emptyState string
	// stateCheck and stateName are the store's health and name, for the
	// state_corrupt finding.
	stateCheck func(context.Context) error
	stateName  string
	logger     *slog.Logger
	// sharing, when set, makes every daemon's probe runs shared sweeps.
	sharing *daemon.Sharing

	// mu guards the parts the next daemon starts with and the one running.
	mu       sync.Mutex
	cfg      daemon.Config
	scanner  daemon.Scanner
	notifier daemon.Notifier
	current  *daemon.Daemon
}

// start builds a daemon from the latest parts and makes it the current
// one.
func (h *daemons) start() (*daemon.Daemon, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := daemon.New(h.cfg, h.scanner, h.notifier, h.logger.With("component", "daemon"))
	if err != nil {
		return nil, err
	}
	d.Recorder = h.recorder
	d.HTTPClient = h.client
	d.Memory = h.memory
	d.History = h.history
	d.Sharing = h.sharing
	d.StateCheck, d.StateName = h.stateCheck, h.stateName
	// Only the first daemon of a process that found the store empty says
	// so; later terms find the state their predecessors wrote.
	d.EmptyState, h.emptyState = h.emptyState, ""
	h.current = d
	return d, nil
}

// stopped forgets d once its Run has returned.
func (h *daemons) stopped(d *daemon.Daemon) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == d {
		h.current = nil
	}
}

// Ready is the current daemon's readiness; a standby is ready.
func (h *daemons) Ready() error {
	h.mu.Lock()
	d := h.current
	h.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.Ready()
}

// Reload keeps the parts for the next daemon and hands them to the
// running one.
func (h *daemons) Reload(c daemon.Config, s daemon.Scanner, n daemon.Notifier) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current != nil {
		if err := h.current.Reload(c, s, n); err != nil {
			return err
		}
	}
	h.cfg, h.scanner, h.notifier = c, s, n
	return nil
}

// runOnce runs one daemon until ctx is done.
func (h *daemons) runOnce(ctx context.Context) error {
	d, err := h.start()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer h.stopped(d)
	return d.Run(ctx)
}

// collector is the current scanner's prober, for shared probing.
func (h *daemons) collector() daemon.Collector {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scanner.(daemon.Collector)
}

// runReplicated runs a daemon whenever this process leads the replicas of
// its site sharing store, and, all the time, a worker that probes the
// shards of the site's sweeps.
func (h *daemons) runReplicated(ctx context.Context, store state.Shared, site string, lease time.Duration, shardSize int, staleAfter time.Duration) error {
	holder := replicaName()
	h.sharing = &daemon.Sharing{Shards: store, Sites: store, Site: site, ShardSize: shardSize, StaleAfter: staleAfter}
	h.mu.Lock()
	grace := h.cfg.GracePeriod
	h.mu.Unlock()
	w := &daemon.Worker{
		Grace:     grace,
		Claimer:   store,
		Holder:    holder,
		Lease:     lease,
		Collector: h.collector,
		Logger:    h.logger.With("component", "worker"),
		OnShard:   h.srv.RecordShard,
	}
	var wg sync.WaitGroup
	wctx, stopWorker := context.WithCancel(ctx)
	defer func() {
		stopWorker()
		wg.Wait()
	}()
	wg.Go(func() { w.Run(wctx) })
	r := &daemon.Replica{
		Elector: store,
		Holder:  holder,
		Lease:   lease,
		Logger:  h.logger.With("component", "leader"),
		OnTerm:  h.srv.RecordTerm,
	}
	h.logger.Info("replica campaigning for leadership", "holder", r.Holder, "site", site, "lease", lease.String(), "shard_size", shardSize)
	return r.Run(ctx, h.runOnce)
}

// replicaName names this process among the replicas: its host (the pod's
// name on Kubernetes), its process ID and a random part, so that a
// restarted process never passes for its predecessor.
func replicaName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "certwatch"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

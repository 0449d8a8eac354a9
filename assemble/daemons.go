package assemble

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

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

// Daemons builds the daemon of `certwatch run` from the latest parts
// (Reload) and the store's, and hands it reloaded parts. A single instance
// runs one daemon for its lifetime (Run); a replica sharing a PostgreSQL
// state runs a fresh one for each term it leads, and none while it is a
// standby (RunReplicated). Set the exported fields before first use.
type Daemons struct {
	// Server records the replica's terms and shards.
	Server     *serve.Server
	Recorder   daemon.Recorder
	HTTPClient *http.Client
	Memory     state.Memory
	History    state.History
	// EmptyState names the store when it was created empty: the first
	// daemon says so.
	EmptyState string
	// StateCheck and StateName are the store's health and name, for the
	// state_corrupt finding.
	StateCheck func(context.Context) error
	StateName  string
	// AfterProbe, Judging, Notifying, Probing and Notified are each
	// daemon's (daemon.Daemon.AfterProbe and the others).
	AfterProbe, Judging, Notifying, Probing, Notified func()
	Logger                                            *slog.Logger

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
func (h *Daemons) start() (*daemon.Daemon, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := daemon.New(h.cfg, h.scanner, h.notifier, h.Logger.With("component", "daemon"))
	if err != nil {
		// Checked at start and on reload (Check): the configuration's.
		return nil, &config.FieldError{Path: "daemon", Err: err}
	}
	d.Recorder = h.Recorder
	d.HTTPClient = h.HTTPClient
	d.Memory = h.Memory
	d.History = h.History
	d.Sharing = h.sharing
	d.StateCheck, d.StateName = h.StateCheck, h.StateName
	d.AfterProbe, d.Judging, d.Notifying, d.Probing, d.Notified = h.AfterProbe, h.Judging, h.Notifying, h.Probing, h.Notified
	// Only the first daemon of a process that found the store empty says
	// so; later terms find the state their predecessors wrote.
	d.EmptyState, h.EmptyState = h.EmptyState, ""
	h.current = d
	return d, nil
}

// stopped forgets d once its Run has returned.
func (h *Daemons) stopped(d *daemon.Daemon) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == d {
		h.current = nil
	}
}

// Ready is the current daemon's readiness; a standby is ready.
func (h *Daemons) Ready() error {
	h.mu.Lock()
	d := h.current
	h.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.Ready()
}

// Reload keeps the parts for the next daemon and hands them to the
// running one, if any.
func (h *Daemons) Reload(c daemon.Config, s daemon.Scanner, n daemon.Notifier) error {
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

// Run runs one daemon until ctx is done. A daemon the parts cannot make
// is a *config.FieldError.
func (h *Daemons) Run(ctx context.Context) error {
	d, err := h.start()
	if err != nil {
		return err
	}
	defer h.stopped(d)
	return d.Run(ctx)
}

// collector is the current scanner's prober, for shared probing.
func (h *Daemons) collector() daemon.Collector {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.scanner.(daemon.Collector)
}

// RunReplicated runs a daemon (Run) whenever this process leads the
// replicas of its site sharing store, and, all the time, a worker that
// probes the shards of the site's sweeps; c says the site, the leader's
// lease, the shard size and when a site is stale.
func (h *Daemons) RunReplicated(ctx context.Context, store state.Shared, c config.Daemon) error {
	site, lease, shardSize, staleAfter := c.Site, time.Duration(c.LeaderLease), c.ShardSize, time.Duration(c.SiteStaleAfter)
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
		Logger:    h.Logger.With("component", "worker"),
		OnShard:   h.Server.RecordShard,
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
		Logger:  h.Logger.With("component", "leader"),
		OnTerm:  h.Server.RecordTerm,
	}
	h.Logger.Info("replica campaigning for leadership", "holder", r.Holder, "site", site, "lease", lease.String(), "shard_size", shardSize)
	return r.Run(ctx, h.Run)
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

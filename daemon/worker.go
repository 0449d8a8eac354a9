package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

// Collector probes targets without evaluating them, for shared probing.
// Implemented by *scan.Pass.
type Collector interface {
	Collect(ctx context.Context, targets []discovery.Target) []probes.Observation
}

// Defaults of Worker.
const (
	DefaultWorkerPoll  = time.Second
	DefaultWorkerSlots = 2
)

// errClaimLost is the cause that ends a shard's probing when its claim
// could not be kept: whatever was probed is not written.
var errClaimLost = errors.New("claim on the shard lost")

// errSweepDeadline is the cause that ends a shard's probing at its sweep's
// deadline: what was probed is written, the rest is not_probed.
var errSweepDeadline = errors.New("the probe run's sweep deadline passed")

// Worker probes shards of the sweeps its site's leader opens. Every replica
// runs one, leader and standbys alike: the probe work of a run is shared
// by every process that is up. A claim is renewed every third of Lease;
// when it cannot be renewed in time, the shard's probing stops at once
// (so a replica that was paused, and whose shard another took, does not
// go on connecting to the shard's addresses) and nothing of it is
// written. Set the fields before Run.
type Worker struct {
	Claimer state.Claimer
	// Holder names this process (as in Replica).
	Holder string
	// Lease is how long a claim lasts unless renewed: a shard of a replica
	// that died is taken by another after about this long.
	Lease time.Duration
	// Poll is how often an idle worker looks for a shard (with jitter);
	// 0 means DefaultWorkerPoll.
	Poll time.Duration
	// Slots is how many shards this process probes at once; 0 means
	// DefaultWorkerSlots.
	Slots int
	// Grace is how long shards in flight may go on after Run's context
	// ends (daemon.grace_period).
	Grace time.Duration
	// Collector returns the current prober (it changes on reload).
	Collector func() Collector
	Logger    *slog.Logger
	// OnShard, when set, gets the outcome of every shard claimed: a nil
	// error and the endpoints written back; the cause and the endpoints
	// written back for a shard cut short by its sweep's deadline; or why
	// nothing was written (state.ErrClaimLost, or another failure), with 0
	// endpoints.
	OnShard func(c state.Claim, endpoints int, err error)
}

// errShutdown ends the probing of shards still in flight when Grace is
// over after Run's context ended: they are not written back, and another
// replica probes them once their claims end.
var errShutdown = errors.New("shutdown grace period over")

// Run probes shards until ctx is done. Shards in flight then get Grace to
// finish and be written back; after it they are given up unwritten (a
// partial shard would read as probed), and another replica takes them at
// once.
func (w *Worker) Run(ctx context.Context) {
	work, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	idle := make(chan struct{})
	go func() {
		select {
		case <-idle:
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(w.Grace)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
			cancel(errShutdown)
		}
	}()
	var wg sync.WaitGroup
	for range cmp.Or(w.Slots, DefaultWorkerSlots) {
		wg.Go(func() { w.loop(ctx, work) })
	}
	wg.Wait()
	close(idle)
}

// loop claims shards while ctx lasts and probes each with work.
func (w *Worker) loop(ctx, work context.Context) {
	poll := cmp.Or(w.Poll, DefaultWorkerPoll)
	var enc scan.Encoder // one compressor for every shard this slot writes back
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, max(w.Lease/3, time.Second))
		c, ok, err := w.Claimer.ClaimShard(cctx, w.Holder, w.Lease)
		cancel()
		switch {
		case err == nil && ok:
			// Probed even when ctx ended meanwhile: work allows the
			// grace period, and the claim is held either way.
			w.probe(work, c, &enc)
			continue // look for the next one at once
		case ctx.Err() != nil:
			return
		case err != nil:
			w.Logger.Warn("cannot claim a probe shard", "err", err)
		}
		// Half to one and a half poll intervals, so idle replicas do not
		// ask in step.
		t := time.NewTimer(poll/2 + rand.N(poll))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// probe probes one claimed shard and writes it back, encoded by enc.
func (w *Worker) probe(ctx context.Context, c state.Claim, enc *scan.Encoder) {
	log := w.Logger.With("sweep", c.Sweep, "shard", c.Shard)
	targets, err := scan.DecodeTargets(c.Work)
	if err != nil {
		err = fmt.Errorf("probe shard %d of sweep %d: %w", c.Shard, c.Sweep, err)
		log.Error("cannot read the shard's targets; it is reported not probed", "err", err)
		w.done(c, 0, err)
		return
	}
	log.Info("probe shard claimed", "targets", len(targets))
	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	sctx, cancelDeadline := context.WithDeadlineCause(sctx, c.Deadline, errSweepDeadline)
	defer cancelDeadline()
	var mu sync.Mutex // guards held
	held := c
	var renewals sync.WaitGroup
	finished := make(chan struct{})
	renewals.Go(func() { w.keep(sctx, &mu, &held, stop, finished) })
	obs := w.Collector().Collect(sctx, targets)
	close(finished)
	renewals.Wait()
	mu.Lock()
	c = held
	mu.Unlock()
	abandon := func(err error) {
		log.Warn("probe shard abandoned: nothing of it is written, another replica probes it", "err", err)
		w.done(c, 0, err)
	}
	if cause := context.Cause(sctx); errors.Is(cause, errClaimLost) {
		abandon(cause)
		return
	}
	if cause := context.Cause(sctx); errors.Is(cause, errShutdown) {
		w.release(ctx, c)
		abandon(cause)
		return
	}
	if !time.Now().Before(c.Until) {
		// Paused or starved past the claim (the expiry did not fire
		// first): another replica may hold the shard now.
		abandon(fmt.Errorf("%w: its lease of %v ran out before it was renewed", errClaimLost, w.Lease))
		return
	}
	result, err := enc.Part(&scan.Part{Observations: obs})
	if err != nil {
		log.Error("cannot encode the probe shard's result; it is given up for another replica to probe", "err", err)
		w.release(ctx, c)
		w.done(c, 0, err)
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(w.Lease/2, time.Second))
	defer cancel()
	if err := w.Claimer.CompleteShard(wctx, c, result); err != nil {
		if errors.Is(err, state.ErrClaimLost) {
			abandon(err)
			return
		}
		log.Warn("probe shard not written back; its targets are probed again by whichever replica claims it next, or reported not probed", "err", err)
		w.release(ctx, c)
		w.done(c, 0, err)
		return
	}
	var cut error
	if cause := context.Cause(sctx); cause != nil && !errors.Is(cause, context.Canceled) {
		cut = cause
	}
	log.Info("probe shard written back", "endpoints", len(obs), "cut_short", cut != nil)
	w.done(c, len(obs), cut)
}

// keep renews the claim every third of the lease until finished, and
// stops the shard's probing (stop) as soon as the claim is lost or its
// local deadline passes without a renewal.
func (w *Worker) keep(ctx context.Context, mu *sync.Mutex, held *state.Claim, stop context.CancelCauseFunc, finished <-chan struct{}) {
	mu.Lock()
	until := held.Until
	mu.Unlock()
	expiry := time.NewTimer(time.Until(until))
	defer expiry.Stop()
	tick := time.NewTicker(max(w.Lease/3, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-finished:
			return
		case <-ctx.Done():
			return
		case <-expiry.C:
			stop(fmt.Errorf("%w: its lease of %v ran out before it was renewed", errClaimLost, w.Lease))
			return
		case <-tick.C:
		}
		mu.Lock()
		c := *held
		mu.Unlock()
		if !time.Now().Before(c.Until) {
			stop(fmt.Errorf("%w: its lease of %v ran out before it was renewed", errClaimLost, w.Lease))
			return
		}
		rctx, cancel := context.WithDeadline(ctx, c.Until)
		next, err := w.Claimer.RenewShard(rctx, c, w.Lease)
		cancel()
		switch {
		case errors.Is(err, state.ErrClaimLost):
			stop(fmt.Errorf("%w: %w", errClaimLost, err))
			return
		case err != nil:
			w.Logger.Warn("cannot renew the claim on a probe shard; retrying until it runs out", "sweep", c.Sweep, "shard", c.Shard, "err", err)
		default:
			mu.Lock()
			*held = next
			mu.Unlock()
			expiry.Reset(time.Until(next.Until))
		}
	}
}

// release gives c's shard up for another replica to claim at once; a
// failure only costs the wait for the claim to end.
func (w *Worker) release(ctx context.Context, c state.Claim) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.Claimer.ReleaseShard(rctx, c); err != nil && !errors.Is(err, state.ErrClaimLost) {
		w.Logger.Warn("cannot give the probe shard up; another replica takes it once its claim ends", "sweep", c.Sweep, "shard", c.Shard, "err", err)
	}
}

func (w *Worker) done(c state.Claim, endpoints int, err error) {
	if w.OnShard != nil {
		w.OnShard(c, endpoints, err)
	}
}

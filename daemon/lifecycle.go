package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/certwatch/certwatch/policy"
)

// dispatching is a Notifier's outbox delivery (Run) in progress.
type dispatching struct {
	d      Notifier
	cancel context.CancelFunc
	done   chan struct{}
}

// running is the state of one Run: the scheduler, its entries and the
// outbox dispatcher.
type running struct {
	cron    *cron.Cron
	jobs    map[string]cron.Job
	entries map[string]cron.EntryID
	base    context.Context // parent of the dispatcher's context
	wg      *sync.WaitGroup // dispatchers
	extra   *sync.WaitGroup // job runs started outside the scheduler

	// dmu serialises dispatcher changes; it is never taken with d.mu held.
	dmu      sync.Mutex
	dispatch *dispatching
}

// New returns a daemon that will run s's discovery and probes on c's
// schedules and hand reports to n (nil: reports are only recorded). It
// checks c's schedules; it starts nothing.
func New(c Config, s Scanner, n Notifier, logger *slog.Logger) (*Daemon, error) {
	sched, err := c.parse()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Daemon{
		logger:    logger,
		cfg:       c,
		sched:     sched,
		scanner:   s,
		notifier:  n,
		sources:   map[string]goodRun{},
		degraded:  map[string]policy.Finding{},
		shrunk:    map[string]bool{},
		successes: map[string]time.Time{},
		memoSums:  map[string][32]byte{},
	}, nil
}

// Reload replaces the configuration, scanner and notifier. A running job
// finishes with the old ones; the next run uses the new ones. A new
// notifier's dispatcher replaces the old one's (stopped first; undelivered
// notifications stay in the outbox). The inventory,
// each source's last good run and open discovery_degraded findings are
// kept, except that a source degraded for returning too few targets has
// its new size accepted at the next discovery: reloading is how an operator
// acknowledges an intended drop. An invalid c is rejected and nothing
// changes.
func (d *Daemon) Reload(c Config, s Scanner, n Notifier) error {
	sched, err := c.parse()
	if err != nil {
		return err
	}
	d.mu.Lock()
	old, oldScanner := d.cfg, d.scanner
	d.cfg, d.sched, d.scanner, d.notifier = c, sched, s, n
	if s != oldScanner {
		d.undiscovered = true
	}
	if c.Jitter != old.Jitter {
		d.pickOffsets()
	}
	for name := range d.shrunk {
		delete(d.sources, name) // the next result becomes the baseline
	}
	r := d.active
	if r != nil {
		if d.undiscovered {
			r.extra.Go(r.jobs[JobDiscovery].Run) // rediscover now, not at the next scheduled time
		}
		for job, spec := range map[string][2]string{
			JobDiscovery: {old.Discovery, c.Discovery},
			JobProbe:     {old.Probe, c.Probe},
		} {
			if spec[0] == spec[1] {
				continue
			}
			// The same wrapped job is scheduled again, so its
			// SkipIfStillRunning guard still covers a run in progress.
			r.cron.Remove(r.entries[job])
			r.entries[job] = r.cron.Schedule(sched[job], r.jobs[job])
			d.logger.Info("schedule changed", "job", job, "schedule", spec[1])
		}
	}
	d.mu.Unlock()
	if r != nil {
		d.startDispatcher(r)
	}
	return nil
}

// Run schedules the jobs, keeps the notifier's dispatcher running, runs a
// first discovery and probe (each after its jitter offset), and returns nil
// when ctx is done and shutdown is over: no new run starts, a running one
// gets GracePeriod before its context is cancelled, then the dispatcher is
// stopped and the outbox gets another GracePeriod to drain (Flush). Run may
// be called once.
func (d *Daemon) Run(ctx context.Context) error {
	// Runs use work, which outlives ctx by the grace period, so that a
	// sweep in flight at SIGTERM can finish and write its transitions.
	work, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelWork(nil)
	d.restore(ctx)
	d.mu.Lock()
	d.freshState = d.EmptyState
	d.mu.Unlock()
	if d.EmptyState != "" {
		d.logger.Warn("the state store held no state at start: every open finding is announced as new, with a state_created finding", "state", d.EmptyState)
	}

	c := cron.New(cron.WithLogger(cronLogger{l: d.logger}))
	var wg, extra sync.WaitGroup
	r := &running{cron: c, jobs: map[string]cron.Job{}, entries: map[string]cron.EntryID{}, base: work, wg: &wg, extra: &extra}
	for job, fn := range map[string]func(context.Context) error{
		JobDiscovery: d.discover,
		JobProbe:     d.probe,
	} {
		skip := cronLogger{l: d.logger, job: job, onSkip: func() { d.record(job, d.now(), 0, ErrSkipped) }}
		r.jobs[job] = cron.NewChain(cron.SkipIfStillRunning(skip)).Then(d.job(ctx, work, job, fn))
	}
	d.mu.Lock()
	d.pickOffsets()
	for job, j := range r.jobs {
		r.entries[job] = c.Schedule(d.sched[job], j)
	}
	d.active = r
	offsets := d.offsets
	d.mu.Unlock()
	d.startDispatcher(r)
	d.logger.Info("daemon started", "discovery_offset", offsets[JobDiscovery].Round(time.Millisecond).String(),
		"probe_offset", offsets[JobProbe].Round(time.Millisecond).String())

	// Start, not Run on a goroutine: a shutdown that came before that
	// goroutine ran found the scheduler not running yet, so Stop did
	// nothing and Run then scheduled for ever. Once Start returns, Stop
	// ends the scheduler's loop.
	c.Start()
	// The first discovery and probe run at once (after their offsets)
	// rather than at the first scheduled time, through the same guarded
	// jobs, so they cannot overlap a scheduled run either.
	extra.Go(func() {
		r.jobs[JobDiscovery].Run()
		r.jobs[JobProbe].Run()
	})

	<-ctx.Done()
	d.logger.Info("daemon stopping: no new runs", "grace_period", d.grace().String())
	d.mu.Lock()
	d.active = nil // Reload starts no more runs and dispatchers
	d.mu.Unlock()
	stopped := c.Stop() // done when the scheduler's running jobs are
	idle := make(chan struct{})
	go func() {
		extra.Wait()
		<-stopped.Done()
		close(idle)
	}()
	grace := time.NewTimer(d.grace())
	select {
	case <-idle:
	case <-grace.C:
		d.logger.Warn("grace period over: cancelling the running job", "grace_period", d.grace().String())
		cancelWork(errors.New("shutdown grace period over"))
		<-idle
	}
	grace.Stop()

	r.dmu.Lock()
	disp := r.dispatch
	r.dispatch = nil
	r.dmu.Unlock()
	if disp != nil {
		disp.cancel()
	}
	wg.Wait() // every dispatcher has returned
	if disp != nil {
		fctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), d.grace(), errors.New("shutdown grace period over"))
		defer cancel()
		if err := disp.d.Flush(fctx); err != nil {
			d.logger.Warn("outbox not fully delivered at shutdown; it is kept for the next start", "err", err)
		} else {
			d.logger.Info("outbox delivered")
		}
	}
	d.logger.Info("daemon stopped")
	return nil
}

// startDispatcher runs the current notifier's dispatcher if it is not the
// one already running, stopping that one first.
func (d *Daemon) startDispatcher(r *running) {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	d.mu.Lock()
	next := d.notifier
	d.mu.Unlock()
	if r.dispatch != nil && next == r.dispatch.d {
		return
	}
	if old := r.dispatch; old != nil {
		// Stopping waits for the old dispatcher's delivery in flight, so
		// two dispatchers never deliver the same outbox row at once.
		old.cancel()
		<-old.done
		r.dispatch = nil
	}
	if next == nil {
		return
	}
	ctx, cancel := context.WithCancel(r.base)
	disp := &dispatching{d: next, cancel: cancel, done: make(chan struct{})}
	r.dispatch = disp
	r.wg.Go(func() {
		defer close(disp.done)
		if err := next.Run(ctx); err != nil {
			d.logger.Error("outbox dispatcher stopped", "err", err)
		}
	})
}

func (d *Daemon) grace() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.GracePeriod
}

// job wraps fn with its start offset, timeout, logging and recording. stop
// ends when no new run may start; work when running ones must end.
func (d *Daemon) job(stop, work context.Context, job string, fn func(context.Context) error) cron.Job {
	return cron.FuncJob(func() {
		d.mu.Lock()
		offset := d.offsets[job]
		d.mu.Unlock()
		if offset > 0 {
			t := time.NewTimer(offset)
			select {
			case <-t.C:
			case <-stop.Done():
				t.Stop()
				return
			}
		}
		if stop.Err() != nil {
			return
		}
		timeout := d.timeout(job)
		ctx, cancel := context.WithTimeoutCause(work, timeout, &timeoutError{job: job, limit: timeout})
		defer cancel()
		start := d.now()
		err := fn(ctx)
		took := d.now().Sub(start)
		if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrTimeout) && !errors.Is(err, ErrTimeout) {
			// The job failed because time ran out, whatever it says.
			err = fmt.Errorf("%w: %w", err, cause)
		}
		switch {
		case errors.Is(err, errNoInventory), errors.Is(err, errAwaitDiscovery):
			d.logger.Info("probe run skipped", "job", job, "reason", err)
			return
		case err != nil:
			d.logger.Error("run failed", "job", job, "err", err, "duration", took.Round(time.Millisecond).String())
		default:
			d.logger.Debug("run finished", "job", job, "duration", took.Round(time.Millisecond).String())
		}
		d.record(job, start, took, err)
		if err == nil {
			d.rememberSuccess(work, job, start.Add(took))
		}
	})
}

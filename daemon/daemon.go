// Package daemon is `certwatch run`: it runs discovery and probing on cron
// schedules, keeps the last good inventory, watches its own sources, hands
// every completed probe run to the notifier, keeps the notifier's outbox
// dispatcher running, pings a heartbeat, and stops without starting new work
// when its context ends.
//
// Jobs never overlap themselves (cron.SkipIfStillRunning, skips logged), and
// each starts at a random offset below the configured jitter, so a fleet of
// instances restarted together does not probe in lock-step. A discovery
// source that fails, or that returns far fewer targets than its last good
// run, keeps its last good targets in the inventory and raises a
// discovery_degraded finding that travels with every probe report until the
// source recovers.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// DiscoveryDegraded is the finding kind for a discovery source that failed
// or returned far fewer targets than its last good run. Its Name is the
// source's name.
const DiscoveryDegraded policy.Kind = "discovery_degraded"

// Job names, as used in logs and metrics.
const (
	JobDiscovery = "discovery"
	JobProbe     = "probe"
)

// ErrSkipped is what Recorder.RecordRun gets for a run that did not start
// because the previous run of the same job was still going.
var ErrSkipped = errors.New("skipped: the previous run is still going")

// ErrTimeout is matched (errors.Is) by what Recorder.RecordRun gets for a
// run cut short by its sweep timeout: its work was thrown away (a probe
// run's partial report is neither shown nor notified), so a job that keeps
// timing out produces nothing. Recorders should count it apart from other
// errors.
var ErrTimeout = errors.New("run exceeded its sweep timeout")

// timeoutError is the cause of a run's context when its sweep timeout
// ends it.
type timeoutError struct {
	job   string
	limit time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%s run exceeded its sweep timeout of %v (raise daemon.sweep_timeout, or run %s less often)", e.job, e.limit, e.job)
}

func (e *timeoutError) Is(target error) bool { return target == ErrTimeout }

// errNoInventory marks a probe run that had nothing to probe yet.
var errNoInventory = errors.New("no inventory yet: the first discovery has not finished")

// errAwaitDiscovery marks a probe run skipped because the scanner given by
// Reload has not run a discovery yet (it may hold per-discovery state, such
// as ACM inventories, that its probe runs need).
var errAwaitDiscovery = errors.New("waiting for the first discovery with the reloaded configuration")

// Scanner discovers targets and probes them. Implemented by *scan.Pass.
type Scanner interface {
	Discover(ctx context.Context) ([]discovery.Target, []scan.SourceResult, error)
	Probe(ctx context.Context, targets []discovery.Target, now time.Time) *scan.Report
}

// Notifier takes the report of every completed probe run and turns its
// findings into notifications (written to an outbox). A Notifier that also
// implements Dispatcher has its outbox delivered by the daemon.
type Notifier interface {
	Notify(ctx context.Context, r *scan.Report) error
}

// Dispatcher delivers a notifier's outbox. Run delivers until ctx is done;
// Flush delivers what is due, as far as ctx allows. The daemon never runs
// both at once. Implemented by *notify.Notifier.
type Dispatcher interface {
	Run(ctx context.Context) error
	Flush(ctx context.Context) error
}

// Recorder receives what the daemon learns, for metrics and the status
// page. Implemented by *serve.Server. Calls come from job goroutines, one
// job at a time per job name.
type Recorder interface {
	// RecordDiscovery gets each source's result and the size of the
	// inventory the next probe runs use.
	RecordDiscovery(results []scan.SourceResult, inventory int)
	// RecordReport gets the report of every completed probe run, with the
	// discovery_degraded findings included.
	RecordReport(r *scan.Report)
	// RecordRun gets the outcome of every run of every job; err is nil on
	// success, matches ErrSkipped for a skipped run and ErrTimeout for a
	// run cut short by its sweep timeout.
	RecordRun(job string, start time.Time, took time.Duration, err error)
}

// Config is what `certwatch run` can change by reloading.
type Config struct {
	// Schedules are cron specs or descriptors (cron.ParseStandard).
	Discovery, Probe string
	// Jitter bounds each job's random start offset.
	Jitter time.Duration
	// SweepTimeout bounds a discovery or probe run; 0 means the job's
	// shortest gap between runs minus Jitter.
	SweepTimeout time.Duration
	// GracePeriod is how long a running job may go on after Run's context
	// ends, and then how long the outbox gets to drain.
	GracePeriod time.Duration
	// DropThreshold: a source returning fewer than this share of its last
	// good run's targets is degraded. 0 disables the check.
	DropThreshold float64
	// HeartbeatURL, when set, gets a GET after every successful probe run;
	// HeartbeatTimeout bounds it (0 means 10s). The URL is never logged.
	HeartbeatURL     string
	HeartbeatTimeout time.Duration
}

// schedules are a Config's parsed specs.
type schedules map[string]cron.Schedule

func (c Config) parse() (schedules, error) {
	s := schedules{}
	var errs []error
	for job, spec := range map[string]string{JobDiscovery: c.Discovery, JobProbe: c.Probe} {
		p, err := cron.ParseStandard(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule of %s job %q: %w", job, spec, err))
			continue
		}
		s[job] = p
	}
	if c.GracePeriod <= 0 {
		errs = append(errs, fmt.Errorf("grace period must be positive, got %v", c.GracePeriod))
	}
	return s, errors.Join(errs...)
}

// Daemon runs the jobs. Build it with New, set the optional fields, then
// call Run once. Reload may be called at any time, from any goroutine.
type Daemon struct {
	// Now is the clock for report and finding times; nil means time.Now.
	// Schedules and timeouts use the runtime's timers.
	Now func() time.Time
	// HTTPClient sends heartbeats; nil means a client with no timeout of
	// its own (every ping has HeartbeatTimeout).
	HTTPClient *http.Client
	// Recorder, when set, receives discovery results, reports and runs.
	Recorder Recorder

	logger *slog.Logger

	// mu guards everything below: the current configuration and parts, and
	// what the jobs learnt.
	mu        sync.Mutex
	cfg       Config
	sched     schedules
	scanner   Scanner
	notifier  Notifier
	offsets   map[string]time.Duration
	loaded    bool
	inventory []discovery.Target
	results   []scan.SourceResult
	sources   map[string]goodRun
	degraded  map[string]policy.Finding
	// shrunk marks degraded sources that answered with too few targets
	// (rather than failing); Reload accepts their new size.
	shrunk map[string]bool
	// undiscovered: the scanner given by Reload has not completed a
	// discovery yet.
	undiscovered bool
	active       *running // set while Run is running
}

// dispatching is a Dispatcher's Run in progress.
type dispatching struct {
	d      Dispatcher
	cancel context.CancelFunc
	done   chan struct{}
}

// goodRun is a source's last good result: the targets it contributes to
// the inventory, and how many targets and certificates it reported.
type goodRun struct {
	list           []discovery.Target
	targets, certs int
	at             time.Time
}

// items says how much a source found: "12 targets", "3 targets and 40
// certificates".
func items(targets, certs int) string {
	if certs > 0 {
		return fmt.Sprintf("%d targets and %d certificates", targets, certs)
	}
	return fmt.Sprintf("%d targets", targets)
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
		logger:   logger,
		cfg:      c,
		sched:    sched,
		scanner:  s,
		notifier: n,
		sources:  map[string]goodRun{},
		degraded: map[string]policy.Finding{},
		shrunk:   map[string]bool{},
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

// Ready returns nil once a discovery run has produced an inventory, and
// otherwise says why there is none yet.
func (d *Daemon) Ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.loaded {
		return errNoInventory
	}
	return nil
}

func (d *Daemon) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// pickOffsets draws each job's start offset in [0, Jitter). Callers hold
// d.mu.
func (d *Daemon) pickOffsets() {
	d.offsets = map[string]time.Duration{}
	for _, job := range []string{JobDiscovery, JobProbe} {
		if d.cfg.Jitter > 0 {
			d.offsets[job] = rand.N(d.cfg.Jitter)
		}
	}
}

// timeout is how long one run of job may take.
func (d *Daemon) timeout(job string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	gap := shortestGap(d.sched[job])
	if d.cfg.SweepTimeout > 0 {
		return d.cfg.SweepTimeout
	}
	return max(gap-d.cfg.Jitter, gap/2, time.Second)
}

// shortestGap is the shortest time between two runs of s over its next 64
// runs.
func shortestGap(s cron.Schedule) time.Duration {
	t := s.Next(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	gap := time.Duration(0)
	for range 64 {
		next := s.Next(t)
		if t.IsZero() || next.IsZero() {
			break
		}
		if g := next.Sub(t); gap == 0 || g < gap {
			gap = g
		}
		t = next
	}
	return cmp.Or(gap, 24*time.Hour)
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

	var scheduler sync.WaitGroup
	scheduler.Go(c.Run)
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
	scheduler.Wait()

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
	next, _ := d.notifier.(Dispatcher)
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
	})
}

func (d *Daemon) record(job string, start time.Time, took time.Duration, err error) {
	if d.Recorder != nil {
		d.Recorder.RecordRun(job, start, took, err)
	}
}

// discover refreshes the inventory. A failing or shrunken source keeps its
// last good targets and gets a discovery_degraded finding; a healthy run
// replaces them and clears the finding.
func (d *Daemon) discover(ctx context.Context) error {
	d.mu.Lock()
	s := d.scanner
	d.mu.Unlock()
	start := d.now()
	targets, results, err := s.Discover(ctx)
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("discovery abandoned: %w", context.Cause(ctx)) // shutdown: judge nothing
	}
	inventory, degraded := d.judge(s, targets, results, start)
	if d.Recorder != nil {
		d.Recorder.RecordDiscovery(slices.Clone(results), inventory)
	}
	if err != nil {
		return err
	}
	if degraded > 0 {
		return fmt.Errorf("discovery degraded: %d of %d sources failed or shrank", degraded, len(results))
	}
	return nil
}

// judge updates each source's last good run and discovery_degraded
// finding from one discovery's results, rebuilds the inventory and returns
// its size and the number of degraded sources.
func (d *Daemon) judge(s Scanner, targets []discovery.Target, results []scan.SourceResult, start time.Time) (inventory, degraded int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s == d.scanner {
		d.undiscovered = false
	}
	threshold := d.cfg.DropThreshold
	current := map[string]bool{}
	failed := 0 // sources that failed without returning anything
	for _, r := range results {
		current[r.Name] = true
		last, hasLast := d.sources[r.Name]
		got := fromSource(targets, r.Name)
		n := r.Targets + r.Certificates
		switch {
		case r.Error != "":
			if n == 0 {
				failed++
			}
			msg := fmt.Sprintf("Discovery source %s failed: %s.", r.Name, r.Error)
			if n > 0 {
				msg = fmt.Sprintf("Discovery source %s partly failed (%s found): %s.", r.Name, items(r.Targets, r.Certificates), r.Error)
			}
			switch {
			case hasLast:
				msg += fmt.Sprintf(" Its last good inventory (%s from %s) is still probed.", items(last.targets, last.certs), last.at.UTC().Format(time.RFC3339))
				last.list = discovery.Merge(last.list, got)
				d.sources[r.Name] = last
			case n > 0:
				msg += " What it found is probed."
				d.sources[r.Name] = goodRun{list: got, targets: r.Targets, certs: r.Certificates, at: start}
			default:
				msg += " It has not produced an inventory since certwatch started, so none of its endpoints are probed."
			}
			d.raise(r.Name, start, msg+" Fix the source's access or configuration.")
			delete(d.shrunk, r.Name)
		case hasLast && threshold > 0 && float64(n) < threshold*float64(last.targets+last.certs):
			d.raise(r.Name, start, fmt.Sprintf("Discovery source %s returned %s, fewer than %.0f%% of the %s of its last good run at %s. "+
				"Its last good targets are still probed. If the drop is intended, reload certwatch (SIGHUP) to accept it.",
				r.Name, items(r.Targets, r.Certificates), threshold*100, items(last.targets, last.certs), last.at.UTC().Format(time.RFC3339)))
			d.shrunk[r.Name] = true
			last.list = discovery.Merge(last.list, got)
			d.sources[r.Name] = last
		default:
			if _, was := d.degraded[r.Name]; was {
				d.logger.Info("discovery source recovered", "source", r.Name, "targets", r.Targets, "certificates", r.Certificates)
			}
			delete(d.degraded, r.Name)
			delete(d.shrunk, r.Name)
			d.sources[r.Name] = goodRun{list: got, targets: r.Targets, certs: r.Certificates, at: start}
		}
	}
	for name := range d.sources {
		if !current[name] { // removed from the configuration
			delete(d.sources, name)
		}
	}
	for name := range d.degraded {
		if !current[name] {
			delete(d.degraded, name)
			delete(d.shrunk, name)
		}
	}
	lists := make([][]discovery.Target, 0, len(d.sources))
	for _, g := range d.sources {
		lists = append(lists, g.list)
	}
	d.inventory = discovery.Merge(lists...)
	d.results = results
	if len(d.sources) > 0 {
		d.loaded = true
	}
	if failed == len(results) && len(results) > 0 {
		// Seeing nothing at all is the worst failure of a monitor.
		for name, f := range d.degraded {
			f.Tier = policy.Page
			d.degraded[name] = f
		}
	}
	d.logger.Info("discovery finished", "sources", len(results), "failed", failed, "degraded", len(d.degraded), "inventory", len(d.inventory))
	return len(d.inventory), len(d.degraded)
}

// raise opens (or updates) source's discovery_degraded finding. Its
// deadline stays at the first time it was raised. Callers hold d.mu.
func (d *Daemon) raise(source string, at time.Time, msg string) {
	f, ok := d.degraded[source]
	if !ok {
		f = policy.Finding{Kind: DiscoveryDegraded, Name: source, Deadline: at.UTC()}
		d.logger.Warn("discovery source degraded", "source", source)
	}
	f.Tier = policy.Warning
	f.Message = msg
	d.degraded[source] = f
}

// fromSource returns the targets that source reported.
func fromSource(targets []discovery.Target, source string) []discovery.Target {
	var out []discovery.Target
	for _, t := range targets {
		if slices.Contains(t.Sources, source) {
			out = append(out, t)
		}
	}
	return out
}

// probe probes the last good inventory and hands the report to the
// notifier; a complete, delivered run pings the heartbeat. Before any
// source has produced an inventory, the report (of discovery_degraded
// findings only) is recorded but not notified.
func (d *Daemon) probe(ctx context.Context) error {
	d.mu.Lock()
	s, n := d.scanner, d.notifier
	loaded, inventory, undiscovered := d.loaded, d.inventory, d.undiscovered
	results := slices.Clone(d.results)
	var degraded []policy.Finding
	for _, f := range d.degraded {
		degraded = append(degraded, f)
	}
	hb, hbTimeout := d.cfg.HeartbeatURL, d.cfg.HeartbeatTimeout
	d.mu.Unlock()
	if !loaded && len(degraded) == 0 {
		return errNoInventory
	}
	if undiscovered {
		return errAwaitDiscovery
	}
	start := d.now()
	var r *scan.Report
	if loaded {
		r = s.Probe(ctx, inventory, start)
	} else {
		r = &scan.Report{GeneratedAt: start.UTC(), Endpoints: []scan.Endpoint{}}
	}
	if ctx.Err() != nil {
		// A partial report would look as if the endpoints not reached had
		// been fixed: it is neither shown nor notified.
		return fmt.Errorf("probe run of %d targets cut short, report discarded: %w", len(inventory), context.Cause(ctx))
	}
	r.Sources = results
	r.Findings = append(r.Findings, degraded...)
	policy.SortFindings(r.Findings)
	if d.Recorder != nil {
		d.Recorder.RecordReport(r)
	}
	d.logger.Info("probe run finished", "targets", r.Targets, "endpoints", len(r.Endpoints),
		"certificates", len(r.Certificates), "findings", len(r.Findings), "duration", d.now().Sub(start).Round(time.Millisecond).String())
	if !loaded {
		// Without any inventory, every alert still open from before would
		// look fixed to the notifier and resolve. The degraded sources are
		// on the status page and in the metrics, readiness fails, and the
		// heartbeat stays silent, so the dead-man's switch fires.
		return errors.New("no discovery source has produced an inventory since start: nothing probed, nothing notified, no heartbeat")
	}
	if n != nil {
		if err := n.Notify(ctx, r); err != nil {
			return fmt.Errorf("notify findings of probe run: %w", err)
		}
	}
	if hb != "" {
		if err := d.heartbeat(ctx, hb, hbTimeout); err != nil {
			d.logger.Warn("heartbeat failed", "err", err)
		}
	}
	return nil
}

// heartbeat GETs target. The URL usually carries a token, so errors never
// include it.
func (d *Daemon) heartbeat(ctx context.Context, target string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(timeout, 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return errors.New("heartbeat: invalid url (not shown: it may hold a token)")
	}
	req.Header.Set("User-Agent", "certwatch")
	client := d.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // *url.Error names the URL; keep only the cause
		}
		return fmt.Errorf("heartbeat ping: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("heartbeat ping: status %s", resp.Status)
	}
	return nil
}

// cronLogger puts the scheduler's messages on slog: routine ones at Debug,
// skips (a run still going when the next is due) at Warn.
type cronLogger struct {
	l      *slog.Logger
	job    string
	onSkip func()
}

func (c cronLogger) Info(msg string, kv ...any) {
	if msg == "skip" && c.onSkip != nil {
		c.l.Warn("run skipped: the previous run is still going", "job", c.job)
		c.onSkip()
		return
	}
	c.l.Debug("scheduler", append([]any{"event", msg}, kv...)...)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("scheduler", append([]any{"event", msg, "err", err}, kv...)...)
}

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
	"context"
	"errors"
	"iter"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

// Job names, as used in logs and metrics.
const (
	JobDiscovery = "discovery"
	JobProbe     = "probe"
)

// ErrSkipped is what Recorder.RecordRun gets for a run that did not start
// because the previous run of the same job was still going.
var ErrSkipped = errors.New("skipped: the previous run is still going")

// ErrTimeout is matched (errors.Is) by what Recorder.RecordRun gets for a
// run cut short by its sweep timeout. A probe run's partial report is
// still published and notified, with a probe_cut_short finding, but the
// run is no success (no heartbeat, no last success). Recorders should count
// it apart from other errors.
var ErrTimeout = errors.New("run exceeded its sweep timeout")

// errNoInventory marks a probe run that had nothing to probe yet.
var errNoInventory = errors.New("no inventory yet: the first discovery has not finished")

// errAwaitDiscovery marks a probe run skipped because the scanner given by
// Reload has not run a discovery yet (it may hold per-discovery state, such
// as ACM inventories, that its probe runs need).
var errAwaitDiscovery = errors.New("waiting for the first discovery with the reloaded configuration")

// Scanner is what the daemon runs: discovery, probing and evaluation, in
// the stages it schedules itself. Implemented by *scan.Pass (assemble
// checks it at compile time); the daemon asserts nothing beyond it.
type Scanner interface {
	// Discover runs every source once. It says which targets each source
	// gave in its result's Found: the daemon keeps each source's last
	// good targets by that, not by the targets' Sources labels (a
	// source's targets may name what they came from rather than the
	// source: a hosted zone, a load balancer).
	Discover(ctx context.Context) ([]discovery.Target, []scan.SourceResult, error)
	// Inventory is what the last Discover found besides targets: the
	// daemon reads the coverage gaps of delegated zones not transferred,
	// and a shared run publishes it with the site's observations.
	Inventory() scan.Inventory
	// Probe probes targets here and evaluates what it saw.
	Probe(ctx context.Context, targets []discovery.Target, now time.Time) *scan.Report
	// Evaluate evaluates observations probed elsewhere (a shared run's
	// shards, other sites' publications), reading parts once, in order,
	// and keeping none of them: a shared run decodes one shard at a time.
	Evaluate(now time.Time, targets int, skipped []discovery.Target, parts iter.Seq[*scan.Part]) *scan.Report
	// SetHistory gives the next run what the state remembers of each
	// certificate name (see Daemon.History), to be let go once that run
	// is judged; nil judges a run on itself alone.
	SetHistory(h []policy.NameHistory)
	// Progress says how far the running discovery and probe run have
	// got, for the progress lines a long sweep logs.
	Progress() scan.Progress
}

// Notifier takes the report of every completed probe run and turns its
// findings into notifications written to an outbox, and delivers that
// outbox. Implemented by assemble's wrapper of *notify.Notifier (checked
// at compile time there); the daemon asserts nothing beyond it.
type Notifier interface {
	// Notify applies the findings of a probe run's report.
	Notify(ctx context.Context, r *scan.Report) error
	// MarkSilenced marks the findings of a report that a silence keeps
	// from being announced (policy.Finding.Silenced), before the report
	// is published: the status page, the JSON report and the metrics show
	// who silenced each, why and until when.
	MarkSilenced(ctx context.Context, r *scan.Report) error
	// Run delivers the outbox until ctx is done; Flush delivers what is
	// due, as far as ctx allows. The daemon never runs both at once.
	Run(ctx context.Context) error
	Flush(ctx context.Context) error
}

// NameRetention is how long a certificate name no run has seen stays in
// the history. Only a complete run (not cut short, no source degraded)
// prunes.
const NameRetention = 90 * 24 * time.Hour

// Recorder receives what the daemon learns, for metrics and the status
// page. Implemented by *serve.Server. Calls come from job goroutines, one
// job at a time per job name.
type Recorder interface {
	// RecordDiscovery gets each source's result and the size of the
	// inventory the next probe runs use.
	RecordDiscovery(results []scan.SourceResult, inventory int)
	// RecordReport gets the report of every completed probe run, with the
	// discovery_degraded findings included. The daemon holds r until it
	// calls release, once the run is done with it (notified): the
	// recorder may hold r as it is until then, and keeps what it needs of
	// it after, as it sees fit (the status server compresses it).
	RecordReport(r *scan.Report) (release func())
	// RecordRun gets the outcome of every run of every job; err is nil on
	// success, matches ErrSkipped for a skipped run and ErrTimeout for a
	// run cut short by its sweep timeout.
	RecordRun(job string, start time.Time, took time.Duration, err error)
	// RecordLastSuccess gets, at start-up, when each job last succeeded
	// before the restart (as kept in Memory).
	RecordLastSuccess(job string, at time.Time)
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
	// ProgressEvery is how often a running discovery or probe run logs
	// how far it has got (at Info), so that a long sweep is not silent
	// until it ends; 0 means DefaultProgressEvery, negative never. Only
	// a Scanner that counts (scan.Pass) says.
	ProgressEvery time.Duration
	// HeartbeatURL, when set, gets a GET after every successful probe run;
	// HeartbeatTimeout bounds it (0 means 10s). The URL is never logged.
	HeartbeatURL     string
	HeartbeatTimeout time.Duration
	// MaxFailureShare: after a probe run in which more than this share (0
	// to 1) of at least 10 endpoints failed to answer
	// (policy.FailureShareExceeded), the heartbeat is not pinged and the
	// run counts as failed: certwatch probably cannot see. 0 disables the
	// check. `certwatch run` uses storm.max_failure_share.
	MaxFailureShare float64
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
	// TempDir is where the daemon keeps what its next probe run carries
	// forward of the latest report (compressed, in a file unlinked as it
	// is made; about 5 MB at 100,000 endpoints); empty means the
	// system's temporary directory. Where no file can be written it is
	// kept in memory.
	TempDir string
	// Memory, when set, keeps each job's last success and each source's
	// last good inventory across restarts; Run reads them back first.
	Memory state.Memory
	// History, when set, keeps the renewal cadence of every certificate
	// name: read before each probe run and handed to the Scanner
	// (SetHistory), so that findings and certificates say when a name's
	// certificate last changed, and written with what the run saw.
	History state.History
	// EmptyState, when set, names a state store that held no state at
	// start-up: the first probe run notified carries a state_created
	// finding, so that announcing every open finding again is loud.
	EmptyState string
	// StateCheck, when set, is the state store's health (state.Store's
	// Check), asked once per probe run: while it reports state.ErrCorrupt,
	// the run's report carries a state_corrupt finding named StateName.
	StateCheck func(context.Context) error
	// StateName names the state store in the state_corrupt finding.
	StateName string
	// Sharing, when set, makes probe runs shared by the replicas (and
	// merged with the other sites').
	Sharing *Sharing
	// AfterProbe, when set, is called when a probe run is over (published
	// and notified, or failed): `certwatch run` gives the memory the run
	// freed back to the system there, so that between runs the process
	// does not stay at its peak.
	AfterProbe func()
	// Judging, when set, is called once a probe run's probing is over, as
	// what came back is judged, published and notified: the run's peak.
	// `certwatch run` gives back what the probing freed there, and
	// collects garbage more often from there on at a large inventory;
	// AfterProbe follows when the run is over.
	Judging func()
	// Notifying, when set, is called as a probe run that published its
	// report starts notifying it: the notifier weighs every open alert
	// beside the report, the run's peak. `certwatch run` gives back there
	// what judging and publishing freed (7 MiB off a later run's peak at
	// 100,000 endpoints).
	Notifying func()
	// Probing, when set, is called as a probe run starts, before it reads
	// the names' history and probes: `certwatch run` gives back there
	// what the code and garbage of the work between runs (a discovery, a
	// rendering of the status page) left mapped, about 8 MiB of a first
	// run's probing at 10,000 endpoints.
	Probing func()
	// Notified, when set, is called once a probe run that recorded its
	// report is done notifying it (or failed to), before the Recorder
	// keeps the report its own way (RecordReport's release, which
	// compresses it): `certwatch run` gives back there what the notifier
	// freed, which the compression otherwise grew on top of, a run's
	// peak at 10,000 endpoints.
	Notified func()

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
	inventory heldTargets
	results   []scan.SourceResult
	sources   map[string]goodRun
	degraded  map[string]policy.Finding
	// children are the discovery_degraded findings (by name in
	// degraded) of delegated child zones that could not be transferred
	// and whose last targets are kept (keepChildren), to the source
	// that follows them.
	children map[string]string
	// shrunk marks degraded sources that answered with too few targets
	// (rather than failing); Reload accepts their new size.
	shrunk map[string]bool
	// undiscovered: the scanner given by Reload has not completed a
	// discovery yet.
	undiscovered bool
	active       *running // set while Run is running
	// previous is what carryForward needs of the latest report published
	// (savedOf), compressed as its memo is, in a file in TempDir: a
	// fleet's whole report held from one run to the next was tens of MB,
	// and compressed on the heap 5 MB at 100,000 endpoints.
	previous *jsonstream.Kept
	// freshState is EmptyState until a probe run has been notified.
	freshState string
	// keptInMemory is set once previous could not be kept in a file
	// (warned about once).
	keptInMemory atomic.Bool
	// successes are each job's last success, as kept in Memory.
	successes map[string]time.Time

	// memoMu serialises writes to Memory (it is taken before mu), so that
	// an older memo never overwrites a newer one; it guards memoSums, the
	// SHA-256 of the memos last written, by key.
	memoMu   sync.Mutex
	memoSums map[string][32]byte
}

func (d *Daemon) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

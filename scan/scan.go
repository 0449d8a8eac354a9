// Package scan runs one pass of the pipeline: discover targets from every
// source, probe every address of every target, and evaluate the
// observations into a report. `certwatch scan` runs it once; the daemon runs
// it on a schedule.
//
// The probing of one run can be shared between processes: CutShards cuts
// the targets into shards that never split an address, each process
// probes the shards it claims with Collect and hands the observations on
// with EncodePart, and one process decodes the parts (Decoder) and judges
// them, its own with them, with Evaluate into one Report.
package scan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/ctcert"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// Source is one discovery source, implemented by discovery/*: each
// Discover says what it found (see found.Yield). assemble, which knows
// every kind, builds them.
//
// A source may also have capabilities of its own, each an interface below
// that the pass asserts on the source it holds: Follower, StreamingSource,
// Counter. A source without one is read by Discover alone. assemble
// checks at compile time that each source implementing one still does.
type Source interface {
	Name() string
	Discover(ctx context.Context) (found.Yield, error)
}

// Follower is a Source whose discovery leaves the delegations of some of
// its zones to follow once every source of the pass has discovered
// (found.Yield.Delegating): a child zone another source read whole (a
// Route 53 hosted zone of another account) is then listed as watched
// rather than transferred. Follow is given back the zones its Discover
// yielded and read, what every source's Discover read and which sources
// failed (found.Read), and yields the children's targets and their
// coverage (watched zones, gaps). Implemented by discovery/route53 and
// discovery/dnszone; asserted by Pass.Discover.
type Follower interface {
	Follow(ctx context.Context, zones []found.Delegating, read found.Read) found.Yield
}

// StreamingSource is a Source that can also hand out its targets one at a
// time, in the order Merge gives, without holding them all: a zone of a
// million names. A pass whose only source streams probes the targets as
// they come. Implemented by discovery/dnszone, which yields no inventory;
// asserted by Pass.Run.
type StreamingSource interface {
	Source
	// Stream discovers the targets and returns them as a sequence, with
	// how many there are and the inventory Discover would yield. A
	// yielded target may share memory with the next one (its Addresses):
	// a consumer copies what it keeps.
	Stream(ctx context.Context) (iter.Seq[discovery.Target], int, found.Inventory, error)
}

// Counter is a Source that says how far its running Discover has gone,
// in units of its own: a network sweep counts the connections tried of
// those its ranges hold. Implemented by discovery/networks; asserted by
// Pass.Progress.
type Counter interface {
	Progress() (done, total int)
}

// ZoneFinder finds the zone a DNS name lies in (an SOA lookup).
// Implemented by dnszone.ZoneFinder.
type ZoneFinder interface {
	ZoneOf(ctx context.Context, name string) (string, error)
}

// MaxZoneLookups bounds the SOA lookups of one pass: names beyond it are
// taken to lie in their parent (policy.ZoneOf).
const MaxZoneLookups = 100

// Prober probes every address of one target. Implemented by probes.Prober.
type Prober interface {
	Probe(ctx context.Context, t discovery.Target) []probes.Observation
}

// Sweeper is a Prober that can start a sweep: one pass's probes, sharing a
// per-address breaker, and telling how many targets of one address the
// pass may have in flight (see probes.Sweep). A pass whose Prober is a
// Sweeper probes through one Sweep, and keeps a hung address to its share
// of the workers. Implemented by probes.Prober; asserted when a pass
// probes (Pass.Run, Pass.Probe, and Pass.Collect for the daemon's shards).
type Sweeper interface {
	Sweep() *probes.Sweep
}

// ErrNoSource is returned (wrapped) when every discovery source failed, so
// there is nothing to probe and no report would be honest.
var ErrNoSource = errors.New("every discovery source failed")

// Pass is one scan. Set the fields before calling Run; zero values are
// documented defaults. A Pass may be run more than once, but not
// concurrently.
type Pass struct {
	Sources []Source
	Prober  Prober
	Rules   policy.Rules
	// DiscoveryParallelism bounds sources queried at once (zone
	// transfers, AWS accounts); default 4.
	DiscoveryParallelism int
	// SourceTimeout is each source's deadline, for its Discover (or
	// Stream) and again for its Follow; 0 means DefaultSourceTimeout.
	// A source that has not returned by then fails with a
	// *SourceTimeoutError, as any failed source does, and is abandoned
	// (see bounded): the other sources' targets are probed without it.
	// SourceTimeouts overrides it for the sources it names (by Name), for
	// sources known to need longer (a large network sweep at a low rate).
	SourceTimeout  time.Duration
	SourceTimeouts map[string]time.Duration
	// Parallelism bounds targets in flight (the prober bounds connections);
	// default 100. With a Sweeper, at most the prober's per-address limit
	// of them are on one IP address: the rest go on with other addresses.
	Parallelism int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives one summary line per pass and per-source failures;
	// nil discards.
	Logger *slog.Logger
	// OnObservation, when set, is called for each observation as it is
	// evaluated (serially), e.g. to feed metrics.
	OnObservation func(*probes.Observation)
	// OnProbed, when set, is called once the probing of a pass is done,
	// before its report is built: the one-off scan gives the probing's
	// freed memory back to the system there.
	OnProbed func()
	// OnTargets, when set, is called once a pass knows how many targets it
	// probes, before it probes them: the one-off scan collects its garbage
	// more often in a large one.
	OnTargets func(n int)
	// Zones, when set, finds the zone of each name on a certificate that
	// no source watches (policy.Evaluator.UncoveredNames), so that its
	// coverage gap names the real zone rather than the name's parent. At
	// most MaxZoneLookups names are looked up a pass.
	Zones ZoneFinder

	mu sync.Mutex
	// inventory is what each source's last Discover found besides
	// targets, by source name.
	inventory map[string]Inventory
	// history is what the state remembers of each certificate name, as
	// SetHistory gave it; hasHistory is set once it has.
	history    []policy.NameHistory
	hasHistory bool
	// abandoned are the sources' calls abandoned at their deadline that
	// have not returned yet, by source name.
	abandoned map[string]pendingCall

	// progress counts how far the running stages have gone (Progress).
	progress progress
}

// SetHistory gives the pass what the state remembers of each certificate
// name (policy.NameHistory), for its next run: that report's certificates
// carry first_seen and last_changed, and renewal_missed says when the
// certificate last changed. The run takes it, and the pass keeps none of
// it. Without it (a one-off scan) both are judged on the run alone, as
// after SetHistory(nil); an empty, non-nil h is a history that knows no
// name yet. The daemon sets it before each probe run.
func (p *Pass) SetHistory(h []policy.NameHistory) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.history, p.hasHistory = h, h != nil
}

// SourceResult says what one source contributed.
type SourceResult struct {
	Name    string `json:"name"`
	Targets int    `json:"targets"`
	// Names is how many distinct names its targets not skipped have.
	Names int `json:"names,omitempty"`
	// Certificates is the size of the source's inventory (see
	// found.Inventory.Records).
	Certificates int `json:"certificates,omitempty"`
	// Empty is how many things the source read held no certificate
	// (found.Yield.Empty).
	Empty int    `json:"empty,omitempty"`
	Error string `json:"error,omitempty"`
	// Found are the targets the source gave (Discover's; those of the
	// delegated zones it followed, and of the listeners of the resources
	// it lists, among them), before they were merged with the other
	// sources': what `certwatch run` keeps of it, whatever the targets'
	// Sources labels say.
	Found []discovery.Target `json:"-"`
}

// Endpoint is one probed (name, port, address) in the report: the list the
// evaluation itself keeps, handed over rather than copied.
type Endpoint = policy.Probed

// Report is the outcome of one pass. Its JSON encoding is the stable
// `certwatch scan --output json` shape.
type Report struct {
	GeneratedAt  time.Time            `json:"generated_at"`
	Targets      int                  `json:"targets"`
	Sources      []SourceResult       `json:"sources"`
	Endpoints    []Endpoint           `json:"endpoints"`
	Certificates []policy.Certificate `json:"certificates"`
	Findings     []policy.Finding     `json:"findings"`
	// Skipped lists targets that were found but cannot be probed (wildcard
	// owners), with the reason.
	Skipped []discovery.Target `json:"skipped,omitempty"`
	// ACM lists the ACM certificates with their renewal state and the
	// endpoints that serve them.
	ACM []policy.ACMCertificate `json:"acm,omitempty"`
	// IAM lists the IAM server certificates with the endpoints and AWS
	// resources serving them.
	IAM []policy.IAMCertificate `json:"iam,omitempty"`
	// AtRest lists the certificates held at rest (files, keystores,
	// Kubernetes objects), one per fingerprint with every location and
	// the endpoints that serve it.
	AtRest []policy.AtRestCertificate `json:"at_rest,omitempty"`
	// Revocation says how the leaves' revocation was checked (by CRL, by
	// OCSP, by neither) and the freshness of each CRL relied on.
	Revocation policy.RevocationSummary `json:"revocation"`
	// Networks are the address ranges swept: per network the addresses
	// tried, the ports that answered, the TLS endpoints among them and
	// the certificates they served, address_only where no name leads to
	// them.
	Networks []NetworkReport `json:"networks,omitempty"`

	// CutShort is set when the pass's context ended (a sweep deadline, a
	// shutdown) before every endpoint was probed. The report then holds
	// everything that was probed, with its findings, and every endpoint
	// not probed in time is in Endpoints with Failure "not_probed"
	// (probes.FailNotProbed), so nothing known is lost and nothing missed
	// reads as healthy. NotProbed counts those endpoints and
	// CutShortCause is the context's cause. A consumer publishes such a
	// report as it is, says it was cut short (a finding, a metric), and
	// must not resolve what its not_probed endpoints showed before.
	CutShort      bool   `json:"cut_short,omitempty"`
	CutShortCause string `json:"cut_short_cause,omitempty"`
	NotProbed     int    `json:"not_probed,omitempty"`
	// AddressesSkipped counts the endpoints not dialled because discovery
	// named an address certwatch does not dial (unspecified, link-local,
	// multicast, broadcast, or loopback without probe.allow_loopback):
	// each is in Endpoints with Failure "address_skipped"
	// (probes.FailAddressSkipped) and an error naming the address, its
	// source and why, and under an address_skipped finding (info).
	AddressesSkipped int `json:"addresses_skipped,omitempty"`

	// Coverage says what the pass watched and what not (coverage gaps).
	Coverage *Coverage `json:"coverage,omitempty"`

	// Summary is what the report adds up to (NewSummary), set by Run and
	// by whoever publishes a report it changed (the daemon's, through
	// serve): the counts every view renders.
	Summary Summary `json:"summary"`
}

func (p *Pass) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Pass) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Discover runs every source concurrently and merges their targets. Then
// the sources that left delegations to follow (Follower) follow them,
// knowing what every source read. It returns an error wrapping
// ErrNoSource only when every source failed; a partial failure is in the
// per-source results.
func (p *Pass) Discover(ctx context.Context) ([]discovery.Target, []SourceResult, error) {
	results := make([]SourceResult, len(p.Sources))
	yields := make([]found.Yield, len(p.Sources))
	abandoned := make([]bool, len(p.Sources)) // the error does not name the source
	p.discoveryStarted(len(p.Sources))
	defer p.discoveryEnded()
	var g errgroup.Group
	// Many zones often share one primary: transfer a few at a time.
	g.SetLimit(cmp.Or(p.DiscoveryParallelism, 4))
	for i, s := range p.Sources {
		g.Go(func() error {
			y, err := bounded(ctx, p, s.Name(), s.Discover)
			p.sourceDone()
			yields[i] = y
			if err != nil {
				results[i].Error = err.Error()
				abandoned[i] = errors.As(err, new(*SourceTimeoutError))
				p.logger().Warn("source failed", "source", s.Name(), "err", err)
			}
			return nil
		})
	}
	_ = g.Wait() // every func returns nil: a failed source is a result
	p.follow(ctx, yields, results)
	addListenerTargets(yields)
	lists := make([][]discovery.Target, len(p.Sources))
	for i, s := range p.Sources {
		y := &yields[i]
		results[i] = SourceResult{Name: s.Name(), Targets: len(y.Targets), Names: countNames(y.Targets), Certificates: y.Inventory.Records(), Empty: y.Empty, Error: results[i].Error,
			Found: y.Targets}
		lists[i] = y.Targets
		p.keepInventory(s.Name(), y.Inventory)
	}
	failed := 0
	var errs []error
	for i, r := range results {
		if r.Error != "" && r.Targets+r.Certificates == 0 { // partial results are not a failed source
			failed++
			msg := r.Error
			if abandoned[i] {
				msg = "source " + r.Name + " " + msg
			}
			// It reaches a terminal: a file name in it must not drive it.
			errs = append(errs, errors.New(policy.Printable(msg)))
		}
	}
	targets := merge(lists)
	if len(p.Sources) > 0 && failed == len(p.Sources) {
		return targets, results, fmt.Errorf("%w: %w", ErrNoSource, errors.Join(errs...))
	}
	return targets, results, nil
}

// follow hands each Follower the zones whose delegations its Discover
// left to follow, with what every source read and which failed (results,
// by Error), and adds what it yields to its yield.
func (p *Pass) follow(ctx context.Context, yields []found.Yield, results []SourceResult) {
	var read found.Read
	pending := false
	for i := range yields {
		read.Zones = append(read.Zones, yields[i].Inventory.Zones...)
		read.Watched = append(read.Watched, yields[i].Inventory.Watched...)
		if results[i].Error != "" {
			read.Failed = append(read.Failed, found.SourceFailure{Source: p.Sources[i].Name(), Error: results[i].Error})
		}
		pending = pending || len(yields[i].Delegating) > 0
	}
	if !pending {
		return
	}
	var g errgroup.Group
	g.SetLimit(cmp.Or(p.DiscoveryParallelism, 4))
	for i, s := range p.Sources {
		f, ok := s.(Follower)
		if !ok || len(yields[i].Delegating) == 0 {
			continue
		}
		g.Go(func() error {
			y := &yields[i] // each goroutine owns one yield
			more, err := bounded(ctx, p, s.Name(), func(ctx context.Context) (found.Yield, error) {
				return f.Follow(ctx, y.Delegating, read), nil
			})
			if err != nil {
				// What its Discover found stands; the delegations it was
				// following are missing.
				p.logger().Warn("source failed following delegations", "source", s.Name(), "err", err)
				results[i].Error = "following delegations: " + err.Error()
			}
			if len(more.Targets) > 0 {
				y.Targets = discovery.Merge(y.Targets, more.Targets)
			}
			y.Inventory.Watched = append(slices.Clip(y.Inventory.Watched), more.Inventory.Watched...)
			y.Inventory.Gaps = append(slices.Clip(y.Inventory.Gaps), more.Inventory.Gaps...)
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
}

// keepInventory keeps inv as the inventory of the source called name until its next
// Discover.
func (p *Pass) keepInventory(name string, inv Inventory) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inventory == nil {
		p.inventory = make(map[string]Inventory)
	}
	p.inventory[name] = inv
}

// merge merges the sources' targets (discovery.Merge). A single non-empty
// list that is already merged (a zone's, a static list's) is used as it is
// rather than copied: a zone of a million names would otherwise be held
// twice. Its slices then alias the source's, which nothing downstream
// modifies.
func merge(lists [][]discovery.Target) []discovery.Target {
	var only []discovery.Target
	for _, l := range lists {
		if len(l) == 0 {
			continue
		}
		if only != nil {
			return discovery.Merge(lists...)
		}
		only = l
	}
	if only == nil || !merged(only) {
		return discovery.Merge(lists...)
	}
	return only
}

// merged reports whether ts is in the form discovery.Merge returns:
// normalised names, sorted by name, port and via without duplicates, addresses
// and sources sorted without duplicates.
func merged(ts []discovery.Target) bool {
	for i := range ts {
		t := &ts[i]
		if discovery.NormalizeName(t.Name) != t.Name {
			return false
		}
		if i > 0 && discovery.Compare(&ts[i-1], t) >= 0 {
			return false
		}
		for j := 1; j < len(t.Addresses); j++ {
			if t.Addresses[j-1].Compare(t.Addresses[j]) >= 0 {
				return false
			}
		}
		for j := 1; j < len(t.Sources); j++ {
			if t.Sources[j-1] >= t.Sources[j] {
				return false
			}
		}
	}
	return true
}

// Run discovers, probes and evaluates. The only error is ErrNoSource (wrapped)
// or the context's; individual probe failures are in the report.
func (p *Pass) Run(ctx context.Context) (*Report, error) {
	start := p.now()
	var r *Report
	if ss, ok := p.streaming(); ok {
		p.discoveryStarted(1)
		st, err := bounded(ctx, p, ss.Name(), func(ctx context.Context) (stream, error) {
			seq, n, inv, err := ss.Stream(ctx)
			return stream{seq, n, inv}, err
		})
		seq, n, inv := st.seq, st.n, st.inv
		p.sourceDone()
		p.discoveryEnded()
		p.keepInventory(ss.Name(), inv)
		if ctx.Err() != nil {
			return nil, interrupted(ctx)
		}
		if err != nil {
			p.logger().Warn("source failed", "source", ss.Name(), "err", err)
			if errors.As(err, new(*SourceTimeoutError)) { // its words do not name it
				err = fmt.Errorf("source %s %w", ss.Name(), err)
			}
			return nil, fmt.Errorf("%w: %w", ErrNoSource, printableError{err})
		}
		names := 0
		r = p.probeStream(ctx, countingNames(seq, &names), n, start)
		r.Sources = []SourceResult{{Name: ss.Name(), Targets: n, Names: names, Certificates: inv.Records()}}
	} else {
		targets, sources, err := p.Discover(ctx)
		if ctx.Err() != nil {
			return nil, interrupted(ctx)
		}
		if err != nil {
			return nil, err
		}
		r = p.Probe(ctx, targets, start)
		for i := range sources {
			sources[i].Found = nil // the report lists the targets once, merged
		}
		r.Sources = sources
	}
	r.Coverage.AddSources(r.Sources)
	for _, s := range r.Sources {
		if s.Error != "" {
			msg := fmt.Sprintf("source %s failed, so its targets were not probed: %s", s.Name, s.Error)
			if s.Targets+s.Certificates > 0 {
				msg = fmt.Sprintf("source %s partly failed: what it found is in the report, the rest is missing: %s", s.Name, s.Error)
			}
			r.Findings = append(r.Findings, policy.Finding{
				Kind: policy.DiscoveryFailed, Tier: policy.Page, Name: s.Name, Deadline: policy.At(start), Message: msg,
			})
		}
	}
	policy.SortFindings(r.Findings)
	r.Summary = NewSummary(r)
	if ctx.Err() != nil {
		return r, fmt.Errorf("scan interrupted: %w", context.Cause(ctx))
	}
	p.logger().Info("scan finished", "targets", r.Targets, "endpoints", len(r.Endpoints),
		"certificates", len(r.Certificates), "findings", len(r.Findings), "duration", p.now().Sub(start).Round(time.Millisecond))
	return r, nil
}

// stream is what a StreamingSource's Stream returns.
type stream struct {
	seq iter.Seq[discovery.Target]
	n   int
	inv found.Inventory
}

// interrupted is the error of a pass whose ctx ended during discovery:
// nothing was probed, so there is no report.
func interrupted(ctx context.Context) error {
	return fmt.Errorf("scan interrupted during discovery, nothing was probed: %w", context.Cause(ctx))
}

// printableError is an error whose message has its control and format
// characters escaped (policy.Printable): a source's error can quote a
// file name or a server's words, and ends up on a terminal.
type printableError struct{ err error }

func (e printableError) Error() string { return policy.Printable(e.err.Error()) }
func (e printableError) Unwrap() error { return e.err }

// streaming returns the pass's only source when it streams its targets.
func (p *Pass) streaming() (StreamingSource, bool) {
	if len(p.Sources) != 1 {
		return nil, false
	}
	ss, ok := p.Sources[0].(StreamingSource)
	return ss, ok
}

// Probe probes targets (with bounded parallelism) and evaluates the
// observations at time now as they complete. When ctx ends first, the
// report is cut short (see Report.CutShort): it holds what was probed and
// a not_probed endpoint for each of the others.
func (p *Pass) Probe(ctx context.Context, targets []discovery.Target, now time.Time) *Report {
	r, ev := p.newReport(len(targets), now)
	for i := range targets {
		if targets[i].Skip != "" {
			r.Skipped = append(r.Skipped, targets[i])
		}
	}
	next := 0 // guarded by the schedule
	p.probeAll(ctx, r, ev, len(targets)-len(r.Skipped), func() (*discovery.Target, bool) {
		for ; next < len(targets); next++ {
			if t := &targets[next]; t.Skip == "" {
				next++
				return t, true
			}
		}
		return nil, false
	})
	return r
}

// probeStream is Probe for the n targets of seq, taken one at a time: none
// is held once its worker is done with it.
func (p *Pass) probeStream(ctx context.Context, seq iter.Seq[discovery.Target], n int, now time.Time) *Report {
	r, ev := p.newReport(n, now)
	pull, stop := iter.Pull(seq)
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	// The schedule guards pull, stop and r.Skipped.
	p.probeAll(ctx, r, ev, n, func() (*discovery.Target, bool) {
		for {
			if pull == nil {
				return nil, false
			}
			t, ok := pull()
			if !ok {
				// Done: let go of the sequence and what it holds (a
				// zone's index) before the report is built.
				stop()
				pull, stop = nil, nil
				return nil, false
			}
			if t.Skip != "" {
				r.Skipped = append(r.Skipped, t)
				p.targetDone(0) // of the n counted, passed over
				continue
			}
			t.Addresses = slices.Clone(t.Addresses) // the sequence reuses them
			return &t, true
		}
	})
	return r
}

func (p *Pass) newReport(n int, now time.Time) (*Report, *policy.Evaluator) {
	if p.OnTargets != nil {
		p.OnTargets(n)
	}
	r := &Report{GeneratedAt: now.UTC(), Targets: n}
	ev := policy.NewEvaluator(p.Rules, now)
	ev.Grow(n) // one address per target is the common case; more grow the lists
	p.mu.Lock()
	if p.hasHistory {
		ev.SetHistory(p.history)
	}
	// The run's evaluation has it now: between runs the pass holds none
	// of it (tens of megabytes at 100,000 names), and a daemon reads it
	// again before the next run.
	p.history, p.hasHistory = nil, false
	p.mu.Unlock()
	return r, ev
}

// probeAll probes the targets pull hands out (called serially) and
// evaluates the observations into r (see sweep). When ctx ends first, r is
// cut short: every target not taken is evaluated as not probed.
func (p *Pass) probeAll(ctx context.Context, r *Report, ev *policy.Evaluator, n int, pull func() (*discovery.Target, bool)) {
	if p.sweep(ctx, n, pull, func(obs []probes.Observation) { p.observe(ev, obs) }) {
		r.CutShort, r.CutShortCause = true, context.Cause(ctx).Error()
	}
	if p.OnProbed != nil {
		p.OnProbed()
	}
	inv := p.Inventory()
	addInventory(ev, &inv)
	p.findZones(ctx, ev)
	fillReport(r, ev, &inv)
	r.Networks = networkReports(r, &inv)
}

// ctBehind returns a ct_behind finding for each CT log with more entries
// left to read than its bound, as the last discovery left it.
func ctBehind(logs []ctcert.Progress, at time.Time) []policy.Finding {
	var out []policy.Finding
	for _, l := range logs {
		if l.MaxBehind <= 0 || l.Behind() <= l.MaxBehind {
			continue
		}
		out = append(out, policy.Finding{Kind: policy.CTBehind, Tier: policy.Warning, Name: "ct:" + l.Log, Deadline: policy.At(at),
			Message: fmt.Sprintf("CT log %s (%s) is %d entries behind: its checkpoint has tree size %d and the next entry to read is %d, more than ct.max_behind (%d). "+
				"Certificates logged lately are not seen yet. Each discovery reads on from there; if the gap keeps growing, discover more often, raise ct.parallelism or ct.timeout, or check the log answers.",
				l.Log, l.URL, l.Behind(), l.TreeSize, l.Next, l.MaxBehind)})
	}
	return out
}

// countingNames yields what seq yields, counting into *n the distinct
// names of the targets not skipped, which seq yields sorted by name.
func countingNames(seq iter.Seq[discovery.Target], n *int) iter.Seq[discovery.Target] {
	return func(yield func(discovery.Target) bool) {
		last := ""
		for t := range seq {
			if t.Skip == "" && (*n == 0 || t.Name != last) {
				*n++
				last = t.Name
			}
			if !yield(t) {
				return
			}
		}
	}
}

// findZones looks up the zones of the names no source watches, at most
// MaxZoneLookups of them, a few at a time, and hands them to ev. A failed
// lookup leaves the name in its parent's zone.
func (p *Pass) findZones(ctx context.Context, ev *policy.Evaluator) {
	if p.Zones == nil || ctx.Err() != nil {
		return
	}
	names := ev.UncoveredNames()
	if len(names) > MaxZoneLookups {
		p.logger().Warn("too many names outside every watched zone to look their zones up; the rest are taken to lie in their parent",
			"names", len(names), "looked_up", MaxZoneLookups)
		names = names[:MaxZoneLookups]
	}
	zones := make([]string, len(names))
	var g errgroup.Group
	g.SetLimit(4)
	for i, n := range names {
		g.Go(func() error {
			z, err := p.Zones.ZoneOf(ctx, n)
			if err != nil {
				p.logger().Debug("zone lookup failed", "name", n, "err", err)
				return nil
			}
			zones[i] = z
			return nil
		})
	}
	_ = g.Wait()
	m := make(map[string]string, len(names))
	for i, n := range names {
		if zones[i] != "" && discovery.InZone(n, zones[i]) {
			m[n] = zones[i]
		}
	}
	ev.SetZonesOf(m)
}

// sweep probes the n targets pull hands out (called serially) and hands
// each target's observations to emit, serially. A fixed pool of workers
// takes the targets through a schedule that keeps each address to its
// share of the workers: no goroutine is started per target, and none waits
// for an address another worker is stuck on. When ctx ends, the workers
// stop taking targets, every target not taken is emitted as not probed
// (notProbed), and sweep returns true.
func (p *Pass) sweep(ctx context.Context, n int, pull func() (*discovery.Target, bool), emit func([]probes.Observation)) (cut bool) {
	probe, perAddr := p.Prober.Probe, 0
	if sw, ok := p.Prober.(Sweeper); ok {
		sweep := sw.Sweep()
		probe, perAddr = sweep.Probe, sweep.PerAddress()
	}
	workers := min(cmp.Or(p.Parallelism, 100), n)
	p.sweepStarted(n)
	defer p.sweepEnded()
	s := newSchedule(perAddr, workers, pull)
	defer s.stopOn(ctx)()
	var mu sync.Mutex // serialises emit
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				t, ok := s.next()
				if !ok {
					return
				}
				obs := probe(ctx, *t)
				s.done(t)
				p.targetDone(len(obs))
				mu.Lock()
				emit(obs)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ctx.Err() == nil {
		return false
	}
	at := p.now()
	s.rest(func(t *discovery.Target) { emit(notProbed(ctx, t, at)) })
	return true
}

// fillReport ends the evaluation ev into r: its endpoints ("endpoints": [], not
// null, when there are none), certificates, findings and AWS inventories,
// how many endpoints were not probed or not dialled, and the coverage,
// with the zones and CT logs of inv (ct_behind for a log too far behind).
func fillReport(r *Report, ev *policy.Evaluator, inv *Inventory) {
	res := ev.Result()
	r.Endpoints, r.Certificates, r.Findings, r.ACM, r.IAM, r.AtRest = res.Endpoints, res.Certificates, res.Findings, res.ACM, res.IAM, res.AtRest
	r.Revocation = res.Revocation
	r.Coverage = coverage(&res, inv)
	if behind := ctBehind(inv.CTLogs, r.GeneratedAt); len(behind) > 0 {
		r.Findings = append(r.Findings, behind...)
		policy.SortFindings(r.Findings)
	}
	if r.Endpoints == nil {
		r.Endpoints = []Endpoint{}
	}
	for i := range r.Endpoints {
		switch r.Endpoints[i].Fault().Failure {
		case string(probes.FailNotProbed):
			r.NotProbed++
		case string(probes.FailAddressSkipped):
			r.AddressesSkipped++
		}
	}
}

// notProbed returns the observations of a target the pass did not reach
// before ctx ended: one per address, or one without an address for a
// target the prober would have resolved.
func notProbed(ctx context.Context, t *discovery.Target, at time.Time) []probes.Observation {
	return appendNotProbed(nil, t, at, context.Cause(ctx))
}

// NotProbed returns not_probed observations (probes.FailNotProbed) at time
// at for the targets not skipped, as a pass cut short by cause records the
// targets it did not reach: one per address, or one without an address for
// a target the prober would have resolved. A run whose probing is shared
// gives them to Evaluate for a shard that never came back.
func NotProbed(targets []discovery.Target, at time.Time, cause error) []probes.Observation {
	var obs []probes.Observation
	for i := range targets {
		if targets[i].Skip == "" {
			obs = appendNotProbed(obs, &targets[i], at, cause)
		}
	}
	return obs
}

func appendNotProbed(obs []probes.Observation, t *discovery.Target, at time.Time, cause error) []probes.Observation {
	o := probes.Observation{Name: t.Name, Port: t.Port, Via: t.Via, Protocol: t.Protocol, Sources: t.Sources, Explicit: t.Explicit, At: at,
		Failure: probes.FailNotProbed, Error: fmt.Sprintf("not probed: %v", cause)}
	if len(t.Addresses) == 0 {
		return append(obs, o)
	}
	for _, a := range t.Addresses {
		o.Address = a
		obs = append(obs, o)
	}
	return obs
}

// observe evaluates one target's observations; the caller serialises the
// calls.
func (p *Pass) observe(ev *policy.Evaluator, obs []probes.Observation) {
	for i := range obs {
		o := &obs[i]
		ev.Add(o)
		if p.OnObservation != nil {
			p.OnObservation(o)
		}
	}
}

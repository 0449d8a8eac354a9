package daemon

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

// DefaultSweepPoll is how often the leader checks a shared sweep's
// progress.
const DefaultSweepPoll = 500 * time.Millisecond

// Sharing makes the daemon's probe runs shared: the run's targets are cut
// into shards (scan.CutShards, ShardSize targets, one address never split)
// that every replica's Worker claims, probes and writes back; the leader
// evaluates what came back once every shard is in or the run's sweep
// timeout is near. With Sites set, every run also publishes what it saw,
// and is evaluated together with every other site's latest publication,
// so that the alert state they share sees one view.
type Sharing struct {
	Shards state.Shards
	// Sites, when set, merges the site's runs with the other sites'.
	Sites state.Sites
	// Site names this site ("" for the one site of a deployment).
	Site string
	// ShardSize is the targets per shard; 0 means 100.
	ShardSize int
	// Poll is how often the sweep's progress is checked; 0 means
	// DefaultSweepPoll.
	Poll time.Duration
	// StaleAfter: another site's publication older than this raises
	// site_stale; 0 means an hour.
	StaleAfter time.Duration
	// PartSize is the size of the parts the site's publication is
	// staged in as the run writes it (Sites.StageSitePart); 0 means
	// 1 MiB.
	PartSize int
}

// sitePublication is what one site publishes: its observations and
// inventory (an encoded scan.Part) and its own self-monitoring findings
// (degraded sources, a cut-short run), which no other site can raise for
// it and none must resolve.
type sitePublication struct {
	// Version is publicationVersion when written; a reader refuses a
	// newer one rather than miss what it cannot read.
	Version  int                 `json:"version"`
	Targets  int                 `json:"targets"`
	Sources  []scan.SourceResult `json:"sources"`
	Findings []policy.Finding    `json:"findings"`
	// Part is the site's inventory and observations in one part
	// (version 1); Parts, from version 2, the same in several: the
	// inventory, then each shard's result as it came back from the
	// replica that probed it, so that a run is published without being
	// held whole.
	Part  []byte   `json:"part,omitempty"`
	Parts [][]byte `json:"parts,omitempty"`
}

// publicationVersion is the version of sitePublication this certwatch
// writes and the newest it reads.
const publicationVersion = 2

// decodePublication returns the one part of p's parts.
func decodePublication(dec *scan.Decoder, p *sitePublication) (*scan.Part, error) {
	if p.Version < 2 {
		return dec.DecodePart(p.Part)
	}
	all := &scan.Part{}
	for i, b := range p.Parts {
		part, err := dec.DecodePart(b)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i, err)
		}
		all.Observations = append(all.Observations, part.Observations...)
		if i == 0 {
			all.Inventory = part.Inventory
		}
	}
	return all, nil
}

// probeShared runs one probe run as a shared sweep and returns its report,
// merged with the other sites' latest publications when there are sites,
// and seen, the endpoints this site probed (its failure share is its own:
// another site's outage does not withhold this one's heartbeat). cut is
// set (matching ErrTimeout) when shards or endpoints were not probed in
// time. err is a failure of the shared state: the run then publishes and
// notifies nothing.
func (d *Daemon) probeShared(ctx context.Context, pe Scanner, inventory heldTargets, results []scan.SourceResult, degraded []policy.Finding, start time.Time) (r *scan.Report, seen *tally, cut error, err error) {
	sh := d.Sharing
	timeout := d.timeout(JobProbe)
	count := inventory.n
	dec := &scan.Decoder{}
	closed, err := d.sweep(ctx, sh, inventory, start)
	if err != nil {
		return nil, nil, nil, err
	}
	d.judging()
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if !errors.Is(cause, ErrTimeout) {
			return nil, nil, nil, fmt.Errorf("probe run of %d targets abandoned at shutdown: nothing of it is published or notified and no heartbeat is sent; the last complete report stays and the next leader probes again: %w", count, cause)
		}
		// Cut short by the sweep timeout: what came back is published,
		// which takes a few more round trips.
		nctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), max(d.grace(), 10*time.Second),
			errors.New("publishing a cut-short shared probe run took longer than daemon.grace_period"))
		defer cancel()
		ctx = nctx
	}
	// The shards' observations are decoded one shard at a time as the
	// evaluation reads them, and let go once judged: a run of 100,000
	// endpoints never holds 100,000 parsed certificates at once. With
	// sites, the run is published for the other sites as it is read (the
	// shards' results as they came back, not_probed observations for
	// those that did not), then every other site's latest publication is
	// read and judged after this site's own.
	seen = &tally{}
	at := d.now()
	inv := &scan.Part{Inventory: pe.Inventory()}
	var pub *publicationWriter
	if sh.Sites != nil {
		invPart, err := scan.EncodePart(inv)
		if err == nil {
			pub, err = newPublicationWriter(count, results, sh.PartSize, func(part int, data []byte) error {
				return sh.Sites.StageSitePart(ctx, part, data)
			})
		}
		if err == nil {
			err = pub.part(invPart)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("probe run: encode site %s's publication: %w", siteLabel(sh.Site), err)
		}
	}
	targets, sources, findings := count, results, []policy.Finding(nil)
	probed := newJudged() // with sites: what this site judged
	var readErr, shareErr error
	r = pe.Evaluate(start, count, closed.skipped, func(yield func(*scan.Part) bool) {
		if !yield(inv) {
			return
		}
		for i := range closed.outcomes {
			raw, err := closed.result(ctx, i)
			if err != nil {
				readErr = err
				return
			}
			obs, written, err := closed.observations(dec, i, at)
			if err != nil {
				readErr = err
				return
			}
			for j := range obs {
				o := &obs[j]
				seen.add(o.Leaf() != nil, string(o.Failure), o.Error)
				if pub != nil {
					probed.add(judgedKey{o.Name, o.Port, o.Address})
				}
			}
			if pub != nil {
				if !written {
					// Not written back, or unreadable: its not_probed
					// observations are what this site saw.
					raw, err = scan.EncodePart(&scan.Part{Observations: obs})
				}
				if err == nil {
					err = pub.part(raw)
				}
				if err != nil {
					shareErr = fmt.Errorf("probe run: encode site %s's publication: %w", siteLabel(sh.Site), err)
					return
				}
			}
			if !yield(&scan.Part{Observations: obs}) {
				return
			}
		}
		for _, f := range degraded {
			findings = append(findings, d.siteScoped(f))
		}
		var f *policy.Finding
		if f, cut = closed.cutShort(seen, count, timeout, start); f != nil {
			findings = append(findings, d.siteScoped(*f))
		}
		if pub == nil {
			return
		}
		staged, b, err := pub.finish(findings)
		if err != nil {
			shareErr = fmt.Errorf("probe run: encode site %s's publication: %w", siteLabel(sh.Site), err)
			return
		}
		var others []otherSite
		if others, shareErr = d.otherSites(ctx, sh, dec, staged, b, start); shareErr != nil {
			return
		}
		// An endpoint two sites probe is judged once: by this site's
		// run, else by the latest publication that has it.
		slices.SortStableFunc(others, func(a, b otherSite) int { return b.at.Compare(a.at) })
		for _, o := range others {
			o.part.Observations = slices.DeleteFunc(o.part.Observations, func(ob probes.Observation) bool {
				return !probed.add(judgedKey{ob.Name, ob.Port, ob.Address})
			})
			o.part.Foreign = true
			targets += o.pub.Targets
			for _, r := range o.pub.Sources {
				r.Name = siteLabel(o.site) + "/" + r.Name
				sources = append(sources, r)
			}
			findings = append(findings, o.pub.Findings...)
			findings = append(findings, o.stale...)
			if !yield(o.part) {
				return
			}
		}
	})
	if err := cmp.Or(readErr, shareErr); err != nil {
		return nil, nil, nil, err
	}
	r.Targets = targets
	if cut != nil {
		r.CutShort, r.CutShortCause = true, cut.Error()
	}
	r.Sources = sources
	r.Coverage.AddSources(sources)
	r.Findings = append(r.Findings, findings...)
	return r, seen, cut, nil
}

// judgedKey is an endpoint judged in a run with sites.
type judgedKey struct {
	name string
	port int
	addr netip.Addr
}

// judged is the set of endpoints a run with sites has judged, each by a
// 64-bit hash of its key (hash/maphash, seeded anew each run): about 1 MB
// at 100,000 endpoints, against 8 MB for a set of the keys, which also
// kept every endpoint's name alive after its shard was judged. Two
// endpoints of a run share a hash with a chance of about 3 in 10^10 at
// 100,000 endpoints; the second is then taken for judged already, left
// out of that run only.
type judged struct {
	seed maphash.Seed
	set  map[uint64]struct{}
}

func newJudged() *judged {
	return &judged{seed: maphash.MakeSeed(), set: map[uint64]struct{}{}}
}

// add adds k and reports whether it was not in the set already.
func (j *judged) add(k judgedKey) bool {
	h := j.hash(k)
	if _, ok := j.set[h]; ok {
		return false
	}
	j.set[h] = struct{}{}
	return true
}

// hash hashes k's name, port and address (as binary, zone included)
// without allocating.
func (j *judged) hash(k judgedKey) uint64 {
	var buf [48]byte
	b := binary.LittleEndian.AppendUint64(buf[:0], uint64(len(k.name)))
	b = binary.LittleEndian.AppendUint64(b, uint64(k.port))
	b, _ = k.addr.AppendBinary(b) // never fails
	var h maphash.Hash
	h.SetSeed(j.seed)
	_, _ = h.Write(b)
	_, _ = h.WriteString(k.name)
	return h.Sum64()
}

// closedSweep is a shared sweep once closed: every shard's outcome, read
// one at a time by observations.
type closedSweep struct {
	id int64
	// outcomes are the sweep's shards; their results are read from store
	// resultsWindow at a time as they are judged (result).
	outcomes []state.ShardOutcome
	store    state.Shards
	skipped  []discovery.Target
	// missed counts the shards not written back before the sweep closed,
	// unreadable the endpoints of shards whose result could not be read
	// (counted as observations reads them).
	missed, unreadable int
	logger             *slog.Logger
}

// observations returns the observations of shard i: those written back
// (written), or not_probed ones, stamped at, for every target of a shard
// that was not (missed) or whose result could not be read (unreadable).
// The shard's result and targets are let go.
func (c *closedSweep) observations(dec *scan.Decoder, i int, at time.Time) (obs []probes.Observation, written bool, err error) {
	o := &c.outcomes[i]
	defer func() { o.Result, o.Work = nil, nil }()
	var cause error
	switch {
	case o.Done:
		part, err := dec.DecodePart(o.Result)
		if err == nil {
			return part.Observations, true, nil
		}
		cause = fmt.Errorf("shard %d came back from replica %q unreadable (%v): run the same certwatch version on every replica", o.Shard, o.Holder, err)
		c.logger.Error("a probe shard's result cannot be read: its targets are reported not probed", "sweep", c.id, "shard", o.Shard, "holder", o.Holder, "err", err)
	case o.Claims == 0:
		cause = fmt.Errorf("shard %d was not claimed by any replica before the sweep deadline", o.Shard)
	default:
		cause = fmt.Errorf("shard %d was not written back before the sweep deadline (claimed %d times, last by %q)", o.Shard, o.Claims, o.Holder)
	}
	ts, err := scan.DecodeTargets(o.Work)
	if err != nil {
		return nil, false, fmt.Errorf("probe run: read shard %d of sweep %d: %w", o.Shard, c.id, err)
	}
	np := scan.NotProbed(ts, at, cause)
	if o.Done {
		c.unreadable += len(np)
	}
	return np, false, nil
}

// resultsWindow is how many shards' results a run reads from the shared
// state at a time (about 36 KB each at 100 endpoints a shard).
const resultsWindow = 32

// resultsAttempts is how many times a window of results is read before the
// run fails, the first retry after up to resultsRetry (at least half of
// it), the next after up to twice that: a dropped connection or a
// database failing over costs a read, not a probe run of every endpoint.
// A shard with no result (state.ShardMissingError) is not read again.
const (
	resultsAttempts = 3
	resultsRetry    = time.Second
)

// result returns the i-th shard's result, reading it from the shared state
// with those of the next shards written back (resultsWindow in all) when
// it is not read yet; nil for a shard not written back. Like the sweep's
// close, the reads outlast the run's time (each within the store's own
// timeout): a run whose time runs out as it is judged still publishes
// what was probed.
func (c *closedSweep) result(ctx context.Context, i int) ([]byte, error) {
	if o := &c.outcomes[i]; o.Done && o.Result == nil && c.store != nil {
		if err := c.readResults(context.WithoutCancel(ctx), i); err != nil {
			return nil, err
		}
	}
	return c.outcomes[i].Result, nil
}

// readResults reads the results of the next resultsWindow shards written
// back, from the i-th on.
func (c *closedSweep) readResults(ctx context.Context, i int) error {
	var shards, at []int
	for j := i; j < len(c.outcomes) && len(shards) < resultsWindow; j++ {
		if c.outcomes[j].Done && c.outcomes[j].Result == nil {
			shards, at = append(shards, c.outcomes[j].Shard), append(at, j)
		}
	}
	var results [][]byte
	var err error
	attempts := 0
	for attempt := range resultsAttempts {
		if attempt > 0 {
			if errors.As(err, new(*state.ShardMissingError)) {
				break // no read brings it back
			}
			c.logger.Warn("cannot read the results of probe shards; retrying", "sweep", c.id, "shards", len(shards), "attempt", attempt+1, "err", err)
			// Not cut short by ctx: the reads outlast the run's time (result).
			wait := resultsRetry << (attempt - 1)
			time.Sleep(wait/2 + rand.N(wait/2)) // jittered over the upper half
		}
		attempts++
		if results, err = c.store.ShardResults(ctx, c.id, shards); err == nil {
			break
		}
	}
	if err != nil {
		tries := fmt.Sprintf("%d attempts", attempts)
		if attempts == 1 {
			tries = "read once: no retry brings a missing shard back"
		}
		return fmt.Errorf("probe run: read the results of shared sweep %d (%s): %w; nothing was published or notified", c.id, tries, err)
	}
	for k, j := range at {
		c.outcomes[j].Result = results[k]
	}
	return nil
}

// cutShort says, once every shard has been read, whether the run was cut
// short (the error) and the probe_cut_short finding that says so.
func (c *closedSweep) cutShort(seen *tally, targets int, timeout time.Duration, start time.Time) (*policy.Finding, error) {
	notProbed := seen.notProbed
	switch {
	case c.unreadable > 0 && c.missed == 0 && notProbed == c.unreadable:
		return &policy.Finding{
			Kind: policy.ProbeCutShort, Tier: policy.Warning, Name: JobProbe, Deadline: policy.At(start),
			Message: fmt.Sprintf("Shards of the shared probe run of %d targets came back unreadable (%d endpoints not probed): a replica probably runs another certwatch version. "+
				"Those endpoints keep their findings, marked unverified; run the same certwatch on every replica.", targets, c.unreadable),
		}, fmt.Errorf("probe shards of %d endpoints came back unreadable; those endpoints are reported not probed", c.unreadable)
	case c.missed > 0 || notProbed > 0:
		f := cutShort(targets, notProbed, seen.endpoints, timeout, start)
		return &f, &timeoutError{job: JobProbe, limit: timeout}
	}
	return nil, nil
}

// siteScoped names a self-monitoring finding after the site it is about,
// so that two sites' degraded "route53" sources are two findings.
func (d *Daemon) siteScoped(f policy.Finding) policy.Finding {
	if d.Sharing.Site != "" {
		f.Name = d.Sharing.Site + "/" + f.Name
	}
	return f
}

// sweep cuts the probeable targets of inventory into shards, opens a
// sweep of them and waits until every shard is in or ctx is done, then
// closes it and returns what came back (closedSweep.observations reads
// each shard). The targets not probed by design are its skipped.
func (d *Daemon) sweep(ctx context.Context, sh *Sharing, inventory heldTargets, start time.Time) (*closedSweep, error) {
	closed := &closedSweep{logger: d.logger}
	work, probed, err := d.shardWork(inventory, sh.ShardSize, closed)
	if err != nil {
		return nil, err
	}
	// Workers stop a little before the run's own deadline, so that what
	// they probed is written back before the sweep closes.
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = start.Add(d.timeout(JobProbe))
	}
	margin := min(max(time.Until(deadline)/20, time.Second), 10*time.Second)
	id, err := sh.Shards.OpenSweep(ctx, deadline.Add(-margin), work)
	if err != nil {
		return nil, fmt.Errorf("probe run: open a shared sweep of %d targets in %d shards: %w; nothing was probed, published or notified", probed, len(work), err)
	}
	closed.id, closed.store = id, sh.Shards
	d.logger.Info("probe run shared", "sweep", id, "targets", probed, "shards", len(work))
	poll := cmp.Or(sh.Poll, DefaultSweepPoll)
	for ctx.Err() == nil {
		done, total, err := sh.Shards.SweepProgress(ctx, id)
		if err == nil && done >= total {
			break
		}
		if err != nil && ctx.Err() == nil {
			d.logger.Warn("cannot read the progress of the shared sweep; retrying", "sweep", id, "err", err)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(d.grace(), 10*time.Second))
	defer cancel()
	if closed.outcomes, err = sh.Shards.CloseSweep(cctx, id); err != nil {
		return nil, fmt.Errorf("probe run: close shared sweep %d: %w; nothing was published or notified", id, err)
	}
	for i := range closed.outcomes {
		if !closed.outcomes[i].Done {
			closed.missed++
		}
	}
	if closed.missed > 0 {
		d.logger.Warn("shared probe run cut short: shards not written back are reported not probed", "sweep", id, "missed", closed.missed, "shards", len(closed.outcomes))
	}
	return closed, nil
}

// shardWork unpacks the inventory and encodes its shards' targets, each
// size targets (default 100), listing the targets not probed in
// closed.skipped; it returns the shards and the number of targets in
// them. The unpacked list is this function's alone, so that it is let go
// as it returns, before the sweep is probed: 18 MB at 100,000 targets.
func (d *Daemon) shardWork(inventory heldTargets, size int, closed *closedSweep) ([][]byte, int, error) {
	probe, err := inventory.probed()
	if err != nil {
		return nil, 0, err
	}
	// Filtered in place: the list is a copy of the inventory's own.
	kept := probe[:0]
	for _, t := range probe {
		if t.Skip != "" {
			closed.skipped = append(closed.skipped, t)
		} else {
			kept = append(kept, t)
		}
	}
	shards := scan.CutShards(kept, cmp.Or(size, 100))
	work := make([][]byte, len(shards))
	var enc scan.Encoder
	for i, ts := range shards {
		if work[i], err = enc.Targets(ts); err != nil {
			return nil, 0, fmt.Errorf("probe run: encode shard %d: %w", i, err)
		}
	}
	return work, len(kept), nil
}

// siteLabel names a site in messages and source names: "" is "default".
func siteLabel(site string) string {
	if site == "" {
		return "default"
	}
	return site
}

// otherSite is another site's latest publication, decoded.
type otherSite struct {
	site  string
	at    time.Time
	pub   sitePublication
	part  *scan.Part
	stale []policy.Finding
}

// otherSites publishes this site's run (the staged parts, then pub: a
// publicationWriter's, gzip-compressed, which an older certwatch cannot
// read and says to upgrade), and returns every other site's latest
// publication. Another site's publication is used however old it is, so
// that nothing it saw resolves while it is away; one older than
// StaleAfter also raises site_stale.
func (d *Daemon) otherSites(ctx context.Context, sh *Sharing, dec *scan.Decoder, staged int, pub [][]byte, start time.Time) ([]otherSite, error) {
	if err := sh.Sites.PublishSite(ctx, start, staged, pub); err != nil {
		return nil, fmt.Errorf("probe run: publish site %s's run to the shared state: %w; nothing was notified", siteLabel(sh.Site), err)
	}
	all, err := sh.Sites.OtherSites(ctx)
	if err != nil {
		return nil, fmt.Errorf("probe run: read the other sites' runs from the shared state: %w; nothing was notified", err)
	}
	staleAfter := cmp.Or(sh.StaleAfter, time.Hour)
	var out []otherSite
	for _, s := range all {
		if s.Site == sh.Site {
			continue
		}
		o := otherSite{site: s.Site, at: s.At}
		err := decodeCompressed(s.Result, &o.pub)
		if err == nil && o.pub.Version > publicationVersion {
			err = fmt.Errorf("publication version %d, this certwatch reads up to %d", o.pub.Version, publicationVersion)
		}
		if err == nil {
			o.part, err = decodePublication(dec, &o.pub)
			o.pub.Part, o.pub.Parts = nil, nil
		}
		if err != nil {
			// A site this one cannot read (a newer certwatch, a damaged
			// row) is loud, and its alerts are not resolved for it.
			return nil, fmt.Errorf("probe run: read site %s's latest run from the shared state: %w; nothing was notified (upgrade this certwatch if that site runs a newer one)", siteLabel(s.Site), err)
		}
		if age := cmp.Or(s.Age, start.Sub(s.At)); age > staleAfter {
			o.stale = append(o.stale, policy.Finding{
				Kind: policy.SiteStale, Tier: policy.Warning, Name: s.Site, Deadline: policy.At(start),
				Message: fmt.Sprintf("Site %s last published a probe run %v ago (about %s), more than daemon.site_stale_after (%v): its instances stopped or cannot reach the shared state. "+
					"Its last results are still used, so nothing it saw is resolved; check that site's certwatch. If the site is gone for good, delete its last run from the database (DELETE FROM site_results WHERE site = '%s'): what only it saw then resolves.",
					siteLabel(s.Site), age.Round(time.Second), start.Add(-age).UTC().Format(time.RFC3339), staleAfter, s.Site),
			})
		}
		out = append(out, o)
	}
	return out, nil
}

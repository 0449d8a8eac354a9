package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

// probe probes the last good inventory, publishes the report (to the
// Recorder, with findings whose endpoints stopped answering kept as
// unverified) and hands it to the notifier; a complete, delivered run in
// which most endpoints answered pings the heartbeat. A run cut short by
// its sweep timeout publishes and notifies what it probed, with a
// probe_cut_short finding, and fails with ErrTimeout. Before any source
// has produced an inventory, the report (of discovery_degraded findings
// only) is recorded but not notified.
func (d *Daemon) probe(ctx context.Context) error {
	if d.AfterProbe != nil {
		defer d.AfterProbe()
	}
	in := d.snapshotForProbe()
	if !in.loaded && len(in.degraded) == 0 {
		return errNoInventory
	}
	if in.undiscovered {
		return errAwaitDiscovery
	}
	start := d.now()
	if d.Probing != nil {
		d.Probing()
	}
	d.readHistory(ctx, in.scanner, in.loaded)
	r, seen, cut, shared, err := d.probeInventory(ctx, in, start)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if !errors.Is(cause, ErrTimeout) {
			// Shutdown after the grace period: the process is exiting.
			// Publishing or notifying a partial view now could resolve
			// alerts it did not verify; the last complete report stays in
			// the state, no heartbeat is pinged, and the next start
			// probes at once (after its offset), so nothing is lost
			// but time. Restarts that keep cutting runs short stop the
			// last success from moving (CertwatchProbeStale).
			return fmt.Errorf("probe run of %d targets abandoned at shutdown: nothing of it is published or notified and no heartbeat is sent; the last complete report stays and the next start probes again: %w", in.inventory.n, cause)
		}
		if cut == nil {
			cut = cause
		}
		// What was probed is published and notified: endpoints the sweep
		// did not reach are failed (not_probed), so their findings stay,
		// unverified, and their alerts stay open.
		nctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), cmp.Or(in.cfg.GracePeriod, time.Minute),
			errors.New("notifying a cut-short probe run took longer than daemon.grace_period"))
		defer cancel()
		ctx = nctx
	}
	if !shared {
		addRunFindings(r, in, cut, start)
	}
	if in.freshState != "" {
		r.Findings = append(r.Findings, freshStateFinding(in.freshState, start))
	}
	if f, ok := d.corruptState(ctx, start); ok {
		r.Findings = append(r.Findings, f)
	}
	policy.SortFindings(r.Findings)
	published, release := d.publish(ctx, r, in)
	// The recorder holds the report as it is while this run notifies,
	// and keeps it its own way after (serve compresses it): never both
	// beside the notifier's work.
	defer func() {
		if d.Notified != nil {
			d.Notified()
		}
		release()
	}()
	// The previous report is spent (carried forward into published): not
	// held through the notifier's work, the run's largest.
	in.previous = nil
	if in.loaded {
		d.recordHistory(ctx, r, start, cut == nil && len(in.degraded) == 0)
	}
	if seen == nil {
		t := tallyOf(r.Endpoints)
		seen = &t
	}
	failedN, outage := seen.share(in.cfg.MaxFailureShare)
	d.logger.Info("probe run finished", "targets", r.Targets, "endpoints", len(r.Endpoints), "failed", failedN,
		"certificates", len(r.Certificates), "findings", len(published.Findings), "unverified", len(published.Findings)-len(r.Findings),
		"cut_short", cut != nil, "duration", d.now().Sub(start).Round(time.Millisecond).String())
	if !in.loaded {
		// Without any inventory, every alert still open from before would
		// look fixed to the notifier and resolve. The degraded sources are
		// on the status page and in the metrics, readiness fails, and the
		// heartbeat stays silent, so the dead-man's switch fires.
		return errors.New("no discovery source has produced an inventory since start: nothing probed, nothing notified, no heartbeat")
	}
	if in.notifier != nil && d.Notifying != nil {
		d.Notifying()
	}
	return d.announce(ctx, r, in, cut, outage)
}

// probeSnapshot is what a probe run reads of the daemon when it starts.
type probeSnapshot struct {
	scanner  Scanner
	notifier Notifier
	// loaded: a source has produced an inventory; undiscovered: the
	// scanner given by Reload has not completed a discovery yet.
	loaded, undiscovered bool
	// inventory is unpacked by the run's probing alone (probeInventory),
	// so that the list is let go before the run judges.
	inventory heldTargets
	results   []scan.SourceResult
	degraded  []policy.Finding
	// previous is what carryForward needs of the latest report published
	// (savedOf); freshState is EmptyState until a probe run has been
	// notified.
	previous   *jsonstream.Kept
	freshState string
	cfg        Config
}

// snapshotForProbe copies what a probe run reads of the daemon.
func (d *Daemon) snapshotForProbe() probeSnapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := probeSnapshot{
		scanner: d.scanner, notifier: d.notifier,
		loaded: d.loaded, undiscovered: d.undiscovered, inventory: d.inventory,
		results: slices.Clone(d.results), previous: d.previous, freshState: d.freshState, cfg: d.cfg,
	}
	for _, f := range d.degraded {
		in.degraded = append(in.degraded, f)
	}
	return in
}

// probeInventory probes the inventory: shared with the other replicas when the
// scanner evaluates parts and a shared store is set, else whole here. It
// returns the report, what this site probed when that differs (for the
// failure share), the timeout that cut the run short, and whether it was
// shared.
func (d *Daemon) probeInventory(ctx context.Context, in probeSnapshot, start time.Time) (r *scan.Report, seen *tally, cut error, shared bool, err error) {
	shared = d.Sharing != nil && in.loaded
	stopProgress := d.logProgress(in.scanner, true)
	defer stopProgress()
	switch {
	case shared:
		r, seen, cut, err = d.probeShared(ctx, in.scanner, in.inventory, in.results, in.degraded, start)
		if err != nil {
			return nil, nil, nil, shared, err
		}
	case in.loaded:
		// The unpacked list is this frame's local, not an argument (which
		// would stay live as long as the function runs): the scanner lets
		// it go once its probing has taken every target.
		targets, err := in.inventory.probed()
		if err != nil {
			return nil, nil, nil, shared, err
		}
		r = in.scanner.Probe(ctx, targets, start)
		d.judging()
	default:
		r = &scan.Report{GeneratedAt: start.UTC(), Endpoints: []scan.Endpoint{}}
	}
	return r, seen, cut, shared, nil
}

// judging says that the run's probing is over (Judging).
func (d *Daemon) judging() {
	if d.Judging != nil {
		d.Judging()
	}
}

// addRunFindings adds to a report probed here alone its discovery results
// and coverage, the discovery_degraded findings and, for a run cut short,
// the probe_cut_short finding naming the timeout that cut it.
func addRunFindings(r *scan.Report, in probeSnapshot, cut error, start time.Time) {
	timeout := in.cfg.SweepTimeout
	if te := (*timeoutError)(nil); errors.As(cut, &te) {
		timeout = te.limit
	}
	r.Sources = in.results
	r.Coverage.AddSources(in.results)
	r.Findings = append(r.Findings, in.degraded...)
	if cut != nil {
		r.Findings = append(r.Findings, cutShort(in.inventory.n, r.NotProbed, len(r.Endpoints), timeout, start))
	}
}

// publish records r with the findings carried forward from the previous
// report (unverified), marked silenced, for the status page, the metrics
// and the next start, and returns what it published and the Recorder's
// release of it (Recorder.RecordReport), to be called once the run is
// done with r.
func (d *Daemon) publish(ctx context.Context, r *scan.Report, in probeSnapshot) (published *scan.Report, release func()) {
	// The previous report is read back only when an endpoint failed: it
	// carries nothing forward otherwise, and at 100,000 endpoints it is
	// tens of megabytes at the run's peak.
	var previous *scan.Report
	if anyFailed(r.Endpoints) {
		var err error
		if previous, err = openKept(in.previous); err != nil {
			// Not expected: the daemon wrote it. The findings of endpoints
			// that stopped answering are shown again once they answer.
			d.logger.Error("cannot read back the previous report: findings whose endpoints stopped answering are not carried forward this run", "err", err)
		}
	}
	published = carryForward(previous, r)
	if in.notifier != nil && in.loaded {
		if err := in.notifier.MarkSilenced(ctx, published); err != nil {
			d.logger.Warn("silences could not be read: the published report marks no finding as silenced", "err", err)
		}
	}
	release = func() {}
	if d.Recorder != nil {
		if rel := d.Recorder.RecordReport(published); rel != nil {
			release = rel
		}
	}
	saved, err := savedOf(published, in.previous.Size(), d.TempDir)
	if err != nil {
		d.logger.Error("cannot encode what the next run carries forward of this report: findings whose endpoints stop answering are not carried forward then", "err", err)
	} else if ferr := saved.FileError(); ferr != nil && d.keptInMemory.CompareAndSwap(false, true) {
		d.logger.Warn("cannot keep what the next run carries forward in a temporary file: it is kept in memory from one run to the next; set TMPDIR to a writable directory",
			"bytes", saved.Size(), "err", ferr)
	}
	d.mu.Lock()
	d.previous = saved
	d.mu.Unlock()
	if err == nil {
		d.rememberReport(ctx, saved)
	}
	return published, release
}

// announce hands the run's own findings to the notifier and, for a
// complete run in which most endpoints answered (no outage), pings the
// heartbeat. The notifier keeps the alerts of findings whose endpoints
// failed open by itself, without taking them as seen again.
func (d *Daemon) announce(ctx context.Context, r *scan.Report, in probeSnapshot, cut error, outage string) error {
	if in.notifier != nil {
		if err := in.notifier.Notify(ctx, r); err != nil {
			return errors.Join(fmt.Errorf("notify findings of probe run: %w", err), cut)
		}
	}
	if in.freshState != "" {
		d.mu.Lock()
		d.freshState = "" // announced
		d.mu.Unlock()
	}
	switch {
	case cut != nil:
		return fmt.Errorf("probe run cut short, partial report published (heartbeat withheld): %w", cut)
	case outage != "":
		return fmt.Errorf("probe run: %s; findings not seen are kept as unverified, heartbeat withheld", outage)
	}
	if hb := in.cfg.HeartbeatURL; hb != "" {
		if err := d.heartbeat(ctx, hb, in.cfg.HeartbeatTimeout); err != nil {
			d.logger.Warn("heartbeat failed", "err", err)
		}
	}
	return nil
}

// cutShort is the self-monitoring finding of a probe run that hit its sweep
// timeout after probing part of its inventory.
func cutShort(targets, notProbed, endpoints int, timeout time.Duration, at time.Time) policy.Finding {
	what := fmt.Sprintf("%d targets", targets)
	if notProbed > 0 {
		what = fmt.Sprintf("%d targets (%d of %d endpoints not probed)", targets, notProbed, endpoints)
	}
	return policy.Finding{
		Kind: policy.ProbeCutShort, Tier: policy.Warning, Name: JobProbe, Deadline: policy.At(at),
		Message: fmt.Sprintf("The probe run of %s hit its sweep timeout of %v. What it probed is reported; endpoints it did not reach keep their findings, marked unverified. "+
			"Raise daemon.sweep_timeout, probe less often, or lower probe.timeout and probe.retries; certwatch_probe_latency_seconds shows where the time goes.", what, timeout),
	}
}

// freshStateFinding says, in the first probe run notified, that the state
// store started empty: every open finding is about to be announced as new.
func freshStateFinding(store string, at time.Time) policy.Finding {
	return policy.Finding{
		Kind: policy.StateCreated, Tier: policy.Warning, Name: store, Deadline: policy.At(at),
		Message: fmt.Sprintf("certwatch started with an empty state (%s): every open finding is announced as new. "+
			"If the state was lost (deleted, or a new volume), these announcements repeat earlier ones; restore the state from a backup to avoid that next time.", store),
	}
}

// corruptState is the state_corrupt finding of a probe run, when the state
// store reports its file damaged. The store keeps reporting it until
// certwatch is restarted on a good file, so the finding stays open as long.
func (d *Daemon) corruptState(ctx context.Context, at time.Time) (policy.Finding, bool) {
	if d.StateCheck == nil {
		return policy.Finding{}, false
	}
	err := d.StateCheck(ctx)
	if !errors.Is(err, state.ErrCorrupt) {
		return policy.Finding{}, false
	}
	return policy.Finding{
		Kind: policy.StateCorrupt, Tier: policy.Warning, Name: d.StateName, Deadline: policy.At(at),
		Message: fmt.Sprintf("The state %s is damaged: %v. certwatch keeps probing and notifying with what it can still read and write, "+
			"but what the damaged pages hold (alerts, what channels were told, memos) is unreadable, so notifications may be repeated or missed. "+
			"Stop certwatch, restore the state from a backup (or move it aside to start afresh: every open finding is announced again) and start it again; "+
			"until then /readyz is 503 and certwatch_state_up is 0.", d.StateName, err),
	}, true
}

// readHistory hands the scanner what the state remembers of each
// certificate name, when the daemon keeps it. A history that cannot be
// read is logged, and the run is judged without it.
func (d *Daemon) readHistory(ctx context.Context, s Scanner, loaded bool) {
	if d.History == nil || !loaded {
		return
	}
	h, err := d.History.Names(ctx)
	switch {
	case err != nil:
		d.logger.Warn("certificate name history could not be read: this run cannot say when certificates last changed", "err", err)
		h = nil // judged without history
	case h == nil:
		h = []policy.NameHistory{} // a history that knows no name yet
	}
	s.SetHistory(h)
}

// recordHistory records the certificate each name of r was seen with. A
// run that saw less than the whole estate (cut short, a source degraded)
// only adds and moves forward; a complete one also drops the names no run
// has seen for NameRetention. A failure is logged: the history is for
// telling, never a reason to fail the run.
func (d *Daemon) recordHistory(ctx context.Context, r *scan.Report, at time.Time, complete bool) {
	if d.History == nil {
		return
	}
	var prune time.Time
	if complete {
		prune = at.Add(-NameRetention)
	}
	seen := policy.NamesSeen(r.Certificates, r.Findings, r.ACM, r.IAM, r.AtRest)
	if err := d.History.RecordNames(ctx, at, seen, prune); err != nil {
		d.logger.Warn("certificate name history could not be written: the next runs may say a certificate changed later than it did", "names", len(seen), "err", err)
	}
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// goodRun is a source's last good result: the targets it contributes to
// the inventory, held packed, and how many targets and certificates it
// reported.
type goodRun struct {
	held           heldTargets
	targets, certs int
	at             time.Time
}

// lastTargets returns the targets of source's last good run g. One that
// cannot be read back (damaged memory: the daemon packed it itself) is
// logged, and the source then keeps only what this discovery found.
func (d *Daemon) lastTargets(source string, g goodRun) []discovery.Target {
	ts, err := g.held.targets(new(scan.Decoder))
	if err != nil {
		d.logger.Error("cannot read back a source's last good targets: it keeps only what this discovery found", "source", source, "targets", g.held.n, "err", err)
	}
	return ts
}

// items says how much a source found: "12 targets", "3 targets and 40
// certificates".
func items(targets, certs int) string {
	if certs > 0 {
		return fmt.Sprintf("%d targets and %d certificates", targets, certs)
	}
	return fmt.Sprintf("%d targets", targets)
}

// discover refreshes the inventory. A failing or shrunken source keeps its
// last good targets and gets a discovery_degraded finding; a healthy run
// replaces them and clears the finding. So does a delegated child zone
// that an earlier discovery transferred and this one could not (see
// keepChildren).
func (d *Daemon) discover(ctx context.Context) error {
	d.mu.Lock()
	s := d.scanner
	d.mu.Unlock()
	start := d.now()
	stopProgress := d.logProgress(s, false)
	_, results, err := s.Discover(ctx)
	stopProgress()
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("discovery abandoned: %w", context.Cause(ctx)) // shutdown: record nothing
	}
	inventory, degraded, stale := d.recordDiscoveryResults(s, results, start)
	d.rememberInventory(ctx)
	if d.Recorder != nil {
		d.Recorder.RecordDiscovery(slices.Clone(results), inventory)
	}
	if err != nil {
		return err
	}
	switch {
	case degraded > 0 && stale > 0:
		return fmt.Errorf("discovery degraded: %d of %d sources failed or shrank, and %d delegated zones transferred before were not (their last targets are kept)", degraded, len(results), stale)
	case degraded > 0:
		return fmt.Errorf("discovery degraded: %d of %d sources failed or shrank", degraded, len(results))
	case stale > 0:
		return fmt.Errorf("discovery degraded: %d delegated zones transferred before were not (their last targets are kept)", stale)
	}
	return nil
}

// childFailures returns the delegated child zones s's last Discover
// could not transfer (refused, timed out, broken, unreachable), by zone.
// Children left out by a bound (delegation_limit) are not failures: the
// configuration decides them.
func childFailures(s Scanner) map[string]found.Gap {
	var out map[string]found.Gap
	for _, g := range s.Inventory().Gaps {
		switch g.Reason {
		case found.GapDelegationRefused, found.GapDelegationTimeout, found.GapDelegationBroken, found.GapDelegationFailed:
			if out == nil {
				out = map[string]found.Gap{}
			}
			out[g.Zone] = g
		}
	}
	return out
}

// failedZone returns the failed child zone name lies in (the deepest), if
// any.
func failedZone(name string, failures map[string]found.Gap) (found.Gap, bool) {
	for n := name; ; {
		if g, ok := failures[n]; ok {
			return g, true
		}
		i := strings.IndexByte(n, '.')
		if i < 0 {
			return found.Gap{}, false
		}
		n = n[i+1:]
	}
}

// keepChildren returns got with the targets of last (a source's last good
// targets) that lie in a child zone this discovery could not transfer
// and that the zone's source gave: those an earlier discovery
// transferred (and the zones below it, not reached this time). A child
// that never transferred has none. For each child with targets kept it
// opens (or updates) a discovery_degraded finding named
// "SOURCE/ZONE", and marks it in raised (to SOURCE). Callers hold d.mu.
func (d *Daemon) keepChildren(got, last []discovery.Target, failures map[string]found.Gap, start time.Time, raised map[string]string) []discovery.Target {
	kept := map[string][]discovery.Target{}
	for _, t := range last {
		if g, ok := failedZone(t.Name, failures); ok && slices.Contains(t.Sources, g.Source) {
			kept[g.Zone] = append(kept[g.Zone], t)
		}
	}
	if len(kept) == 0 {
		return got
	}
	lists := [][]discovery.Target{got}
	for zone, ts := range kept {
		g := failures[zone]
		key := g.Source + "/" + zone
		d.raise(key, start, fmt.Sprintf("Delegated zone %s (delegated by %s, followed by source %s) could not be transferred (%s): %s. "+
			"Its %s from an earlier transfer are still probed, and their findings stay open, until it transfers again; its coverage_gap finding says the same. To fix: %s.",
			zone, g.Parent, g.Source, g.Reason, strings.TrimSuffix(g.Detail, "."), items(len(ts), 0), strings.TrimSuffix(g.Fix, ".")))
		raised[key] = g.Source
		lists = append(lists, ts)
	}
	return discovery.Merge(lists...)
}

// recordDiscoveryResults updates each source's last good run (the targets it found,
// SourceResult.Found) and discovery_degraded finding from one discovery's
// results, rebuilds the inventory and returns its size, the number of
// degraded sources and of delegated child zones whose last targets were
// kept (keepChildren).
func (d *Daemon) recordDiscoveryResults(s Scanner, results []scan.SourceResult, start time.Time) (inventory, degraded, stale int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s == d.scanner {
		d.undiscovered = false
	}
	threshold := d.cfg.DropThreshold
	current := map[string]bool{}
	failed := 0 // sources that failed without returning anything
	failures := childFailures(s)
	children := map[string]string{} // discovery_degraded findings of child zones raised now, to their source
	erred := map[string]bool{}      // sources whose run failed
	for _, r := range results {
		current[r.Name] = true
		last, hasLast := d.sources[r.Name]
		got := r.Found
		n := r.Targets + r.Certificates
		kept := 0 // targets of failed child zones kept (keepChildren)
		if r.Error == "" && hasLast && len(failures) > 0 {
			// r.Targets leaves a failed child's targets out; they are
			// kept, so they count: a large child must not make its
			// source look shrunk (the drop a reload would accept).
			got = discovery.Merge(got)
			all := d.keepChildren(got, d.lastTargets(r.Name, last), failures, start, children)
			kept = len(all) - len(got)
			n += kept
			got = all
		}
		switch {
		case r.Error != "":
			erred[r.Name] = true
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
				last.held = holdTargets(discovery.Merge(d.lastTargets(r.Name, last), got))
				d.sources[r.Name] = last
			case n > 0:
				msg += " What it found is probed."
				d.sources[r.Name] = goodRun{held: holdTargets(got), targets: r.Targets, certs: r.Certificates, at: start}
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
			last.held = holdTargets(discovery.Merge(d.lastTargets(r.Name, last), got))
			d.sources[r.Name] = last
		default:
			if _, was := d.degraded[r.Name]; was {
				d.logger.Info("discovery source recovered", "source", r.Name, "targets", r.Targets, "certificates", r.Certificates)
			}
			delete(d.degraded, r.Name)
			delete(d.shrunk, r.Name)
			d.sources[r.Name] = goodRun{held: holdTargets(got), targets: r.Targets + kept, certs: r.Certificates, at: start}
		}
	}
	for name := range d.sources {
		if !current[name] { // removed from the configuration
			delete(d.sources, name)
		}
	}
	for name, source := range d.children {
		// A source that failed kept its last targets, its children's
		// among them, without judging them: their findings stay as they
		// are rather than close and open anew when it recovers.
		if erred[source] && children[name] == "" {
			children[name] = source
		}
	}
	for name := range d.degraded {
		if !current[name] && children[name] == "" {
			if d.children[name] != "" {
				d.logger.Info("delegated zone transferred again, or no longer delegated", "zone", name)
			}
			delete(d.degraded, name)
			delete(d.shrunk, name)
		}
	}
	d.children = children
	d.rebuildInventory()
	for i := range results {
		results[i].Found = nil // kept in d.sources; reports list none
	}
	d.results = results
	if failed == len(results) && len(results) > 0 {
		// Seeing nothing at all is the worst failure of a monitor.
		for name, f := range d.degraded {
			f.Tier = policy.Page
			d.degraded[name] = f
		}
	}
	d.logger.Info("discovery finished", "sources", len(results), "failed", failed, "degraded", len(d.degraded), "inventory", d.inventory.n)
	return d.inventory.n, len(d.degraded) - len(children), len(children)
}

// rebuildInventory merges every source's last good targets into the
// inventory. A source's targets that cannot be read back leave the
// inventory as it was (logged). Callers hold d.mu.
func (d *Daemon) rebuildInventory() {
	if len(d.sources) > 0 {
		d.loaded = true
	}
	if len(d.sources) == 1 {
		for _, g := range d.sources {
			if g.held.merged {
				// One source, whose list is merged already (a zone's, the
				// static targets'): the inventory is that list, held
				// once, not twice.
				d.inventory = g.held
				return
			}
		}
	}
	lists := make([][]discovery.Target, 0, len(d.sources))
	dec := new(scan.Decoder)
	for name, g := range d.sources {
		ts, err := g.held.targets(dec)
		if err != nil {
			d.logger.Error("cannot read back a source's last good targets: the inventory stays as it was", "source", name, "targets", g.held.n, "inventory", d.inventory.n, "err", err)
			return
		}
		lists = append(lists, ts)
	}
	d.inventory = holdTargets(discovery.Merge(lists...))
}

// raise opens (or updates) source's discovery_degraded finding. Its
// deadline stays at the first time it was raised. Callers hold d.mu.
func (d *Daemon) raise(source string, at time.Time, msg string) {
	f, ok := d.degraded[source]
	if !ok {
		f = policy.Finding{Kind: policy.DiscoveryDegraded, Name: source, Deadline: policy.At(at)}
		d.logger.Warn("discovery source degraded", "source", source)
	}
	f.Tier = policy.Warning
	f.Message = msg
	d.degraded[source] = f
}

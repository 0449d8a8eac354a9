package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

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
	d.rememberInventory(ctx)
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
	d.rebuildInventory()
	d.results = results
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

// rebuildInventory merges every source's last good targets into the
// inventory. Callers hold d.mu.
func (d *Daemon) rebuildInventory() {
	lists := make([][]discovery.Target, 0, len(d.sources))
	for _, g := range d.sources {
		lists = append(lists, g.list)
	}
	d.inventory = discovery.Merge(lists...)
	if len(d.sources) > 0 {
		d.loaded = true
	}
}

// raise opens (or updates) source's discovery_degraded finding. Its
// deadline stays at the first time it was raised. Callers hold d.mu.
func (d *Daemon) raise(source string, at time.Time, msg string) {
	f, ok := d.degraded[source]
	if !ok {
		f = policy.Finding{Kind: policy.DiscoveryDegraded, Name: source, Deadline: at.UTC()}
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

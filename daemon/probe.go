package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

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

package scan

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/probes"
)

// Part is the evaluation input one process contributes to a run whose
// probing is shared (see CutShards): the raw observations of the targets
// it probed, and the inventory of the sources it discovered, if any (a
// replica that only probes a shard leaves it empty). EncodePart and
// Decoder.DecodePart carry it through a database; Evaluate merges parts
// into one report.
type Part struct {
	Observations []probes.Observation
	Inventory    Inventory
	// Foreign marks a part another site probed (its latest publication,
	// perhaps an old one): it is judged, but not handed to OnObservation,
	// so this process's probe metrics count only what it saw this run.
	Foreign bool `json:"-"`
}

// Collect probes targets as Probe does (the same schedule, the same
// per-address share of the workers through one Sweep, the same
// Parallelism) and returns the raw observations instead of evaluating
// them, sorted by name, port and address. Skipped targets (Skip set) are
// neither probed nor returned. When ctx ends first, every target not taken
// has not_probed observations (probes.FailNotProbed), so the result
// accounts for every target. Collect does not call OnObservation:
// Evaluate does.
func (p *Pass) Collect(ctx context.Context, targets []discovery.Target) []probes.Observation {
	var out []probes.Observation
	next := 0 // guarded by the schedule
	n := 0
	for i := range targets {
		if targets[i].Skip == "" {
			n++
		}
	}
	p.sweep(ctx, n, func() (*discovery.Target, bool) {
		for ; next < len(targets); next++ {
			if t := &targets[next]; t.Skip == "" {
				next++
				return t, true
			}
		}
		return nil, false
	}, func(obs []probes.Observation) { out = append(out, obs...) })
	slices.SortStableFunc(out, func(a, b probes.Observation) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), a.Address.Compare(b.Address), strings.Compare(a.Via, b.Via))
	})
	return out
}

// Evaluate judges the observations of every part with p.Rules at now, as
// Probe would have judged them had one process probed them all, and
// returns the report: a certificate served in several parts is one
// certificate, with one finding listing the endpoints of every part.
// OnObservation is called for each observation of the parts not Foreign,
// serially. parts is read once, in order, and no part is kept once it
// has been judged (only its inventory is): a caller can decode one shard
// at a time instead of holding every observation of a run. The inventory
// judged is the parts' (every part's, as it is: a certificate listed in
// two parts is listed twice), not p's own: a caller that wants it passes
// p.Inventory() in one of the parts. targets is the run's number of
// targets (Report.Targets) and skipped the targets not probed (Skip set).
//
// NotProbed counts the not_probed endpoints. CutShort and CutShortCause
// are the caller's to set, as only it knows whether the run was cut short
// (a shard that never came back has no observations here: the caller
// supplies not_probed observations for its targets, see Collect). Sources
// too are the caller's.
func (p *Pass) Evaluate(now time.Time, targets int, skipped []discovery.Target, parts iter.Seq[*Part]) *Report {
	r, ev := p.newReport(targets, now)
	r.Skipped = skipped
	var invs []*Inventory
	for part := range parts {
		if part == nil {
			continue
		}
		if part.Foreign {
			for i := range part.Observations {
				ev.Add(&part.Observations[i])
			}
		} else {
			p.observe(ev, part.Observations)
		}
		// A copy: a pointer into the part would keep its observations
		// too.
		inv := part.Inventory
		invs = append(invs, &inv)
	}
	addInventory(ev, invs...)
	var all Inventory
	for _, inv := range invs {
		all.Watched = append(all.Watched, inv.Watched...)
		all.Zones = append(all.Zones, inv.Zones...)
		all.CTLogs = append(all.CTLogs, inv.CTLogs...)
	}
	fillReport(r, ev, &all)
	r.Networks = networkReports(r, invs...)
	return r
}

package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
)

// CoverageGap: part of the estate certwatch knows it does not watch: a
// delegated child zone it could not transfer (or that lies beyond a
// bound), names on certificates under a zone no source watches, or an ACM
// or IAM certificate in use that no probed endpoint serves. Its Name is
// the zone (or the certificate's ARN); its Deadline the time of the run.
// The tier depends on the gap (Rules.CoverageDelegation, CoverageNames,
// CoverageUnverified).
const CoverageGap Kind = "coverage_gap"

// Gap is a coverage gap as a report lists it: what a source found it could
// not watch, or what evaluation found no source watches, with the tier of
// its finding.
type Gap struct {
	found.Gap
	// Names are the names on certificates under the zone (unmonitored
	// zones), at most maxGapNames of them; Certificates the certificates
	// naming them, by fingerprint or ARN.
	Names        []string `json:"names,omitempty"`
	Certificates []string `json:"certificates,omitempty"`
	// Tier is the tier of its coverage_gap finding; none when that kind
	// of gap is turned off.
	Tier Tier `json:"tier"`
}

// AddCoverage adds what the sources watched (zones transferred, delegated
// zones followed) and the gaps they found. Result raises a coverage_gap
// finding per gap, at most one per zone, unless the zone is out of scope
// (Rules.OutOfScope).
func (e *Evaluator) AddCoverage(watched []found.WatchedZone, gaps []found.Gap) {
	e.inv.watched = append(e.inv.watched, watched...)
	e.inv.gaps = append(e.inv.gaps, gaps...)
}

// outOfScope reports whether name lies at or below a zone declared out of
// scope.
func (e *Evaluator) outOfScope(name string) bool {
	return slices.ContainsFunc(e.rules.OutOfScope, func(z string) bool { return discovery.InZone(name, z) })
}

// judgeCoverage turns the gaps the sources found into findings, appended
// to fs, and returns the gaps as the report lists them, by reason and
// zone.
func (e *Evaluator) judgeCoverage(fs []Finding) ([]Finding, []Gap) {
	var out []Gap
	seen := map[string]bool{}
	for _, g := range e.inv.gaps {
		if seen[g.Zone] || e.outOfScope(g.Zone) {
			continue // the same gap from two parts of a shared run
		}
		seen[g.Zone] = true
		gap := Gap{Gap: g, Tier: e.rules.CoverageDelegation}
		out = append(out, gap)
		if gap.Tier == None {
			continue
		}
		fs = append(fs, Finding{Kind: CoverageGap, Tier: gap.Tier, Name: g.Zone, Subject: g.Zone, Deadline: e.now,
			Message: Printable(delegationMessage(&g))})
	}
	slices.SortFunc(out, func(a, b Gap) int {
		return cmp.Or(strings.Compare(string(a.Reason), string(b.Reason)), strings.Compare(a.Zone, b.Zone))
	})
	return fs, out
}

// delegationMessage says what a delegation gap is and what to do.
func delegationMessage(g *found.Gap) string {
	what := "could not be transferred"
	switch g.Reason {
	case found.GapDelegationRefused:
		what = "refused its transfer"
	case found.GapDelegationTimeout:
		what = "did not finish its transfer in time"
	case found.GapDelegationBroken:
		what = "sent a broken transfer"
	case found.GapDelegationLimit:
		what = "was not followed"
	}
	ns := ""
	if len(g.Nameservers) > 0 {
		ns = " (name servers " + strings.Join(g.Nameservers, ", ") + ")"
	}
	return fmt.Sprintf("zone %s, delegated by %s%s, %s: none of its names are watched, so certificates there can expire unseen: %s; %s",
		g.Zone, g.Parent, ns, what, g.Detail, g.Fix)
}

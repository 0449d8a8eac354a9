package scan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/certwatch/certwatch/policy"
)

// Summary is what a report adds up to: its findings by tier and kind, its
// certificates served, held at rest and both, its endpoints, sources and
// coverage gaps. NewSummary computes it once from a report, and every view
// renders it rather than counting for itself: the table's last lines, the
// JSON report's "summary", `certwatch coverage`, the status page,
// /metrics and notifications' summaries, so that no two of them can
// disagree on a count.
type Summary struct {
	// Findings is how many findings the report holds, and ByTier how many
	// of each tier, most urgent first (tiers without any left out).
	Findings int         `json:"findings"`
	ByTier   []TierCount `json:"by_tier"`
	// ByKind counts the findings by kind and tier, most urgent tier first,
	// then by kind; Silenced and Unverified count those among them that a
	// silence keeps unannounced, or that were kept from an earlier run.
	ByKind     []KindCount `json:"by_kind"`
	Silenced   int         `json:"silenced"`
	Unverified int         `json:"unverified"`
	// Certificates counts distinct certificates: leaves served on a probed
	// endpoint, held at rest (files, keystores, Kubernetes objects), and
	// both; Total is every distinct one of them (Served + AtRest - Both).
	Certificates CertificateCount `json:"certificates"`
	// Targets is how many targets discovery gave; Skipped how many of them
	// could not be probed (wildcard owners).
	Targets int `json:"targets"`
	Skipped int `json:"skipped"`
	// Endpoints counts the probed (name, port, address) triples, those that
	// completed a TLS handshake, and the rest by failure class.
	Endpoints EndpointCount `json:"endpoints"`
	// Sources is how many discovery sources ran, SourcesFailed how many of
	// them reported an error.
	Sources       int `json:"sources"`
	SourcesFailed int `json:"sources_failed"`
	// Gaps is how many coverage gaps the report holds, GapsByReason how
	// many of each reason.
	Gaps         int            `json:"gaps"`
	GapsByReason map[string]int `json:"gaps_by_reason"`
}

// TierCount is how many findings stand at one tier.
type TierCount struct {
	Tier  policy.Tier `json:"tier"`
	Count int         `json:"count"`
}

// KindCount is how many findings of one kind stand at one tier.
type KindCount struct {
	Kind       policy.Kind `json:"kind"`
	Tier       policy.Tier `json:"tier"`
	Count      int         `json:"count"`
	Silenced   int         `json:"silenced,omitempty"`
	Unverified int         `json:"unverified,omitempty"`
}

// CertificateCount counts a report's distinct certificates.
type CertificateCount struct {
	Total  int `json:"total"`
	Served int `json:"served"`
	AtRest int `json:"at_rest"`
	Both   int `json:"both"`
}

// EndpointCount counts a report's probed endpoints.
type EndpointCount struct {
	Total int `json:"total"`
	TLS   int `json:"tls"`
	// Failures counts the endpoints without a certificate by failure class
	// (probes.Failure: refused, timeout, no_starttls, ...; "error" for one
	// without a class).
	Failures map[string]int `json:"failures"`
}

// NewSummary computes the summary of r. It reads r and keeps nothing of it.
func NewSummary(r *Report) Summary {
	s := Summary{
		Findings: len(r.Findings), Targets: r.Targets, Skipped: len(r.Skipped), Sources: len(r.Sources),
		ByTier: []TierCount{}, ByKind: []KindCount{}, GapsByReason: map[string]int{},
		Endpoints: EndpointCount{Total: len(r.Endpoints), Failures: map[string]int{}},
	}
	byTier := map[policy.Tier]int{}
	type kindTier struct {
		kind policy.Kind
		tier policy.Tier
	}
	byKind := map[kindTier]*KindCount{}
	for i := range r.Findings {
		f := &r.Findings[i]
		byTier[f.Tier]++
		k := byKind[kindTier{f.Kind, f.Tier}]
		if k == nil {
			k = &KindCount{Kind: f.Kind, Tier: f.Tier}
			byKind[kindTier{f.Kind, f.Tier}] = k
		}
		k.Count++
		if f.Silenced != nil {
			k.Silenced++
			s.Silenced++
		}
		if !f.UnverifiedSince.IsZero() {
			k.Unverified++
			s.Unverified++
		}
	}
	for t := policy.Critical; t >= policy.None; t-- {
		if n := byTier[t]; n > 0 {
			s.ByTier = append(s.ByTier, TierCount{Tier: t, Count: n})
		}
	}
	for _, k := range byKind {
		s.ByKind = append(s.ByKind, *k)
	}
	slices.SortFunc(s.ByKind, func(a, b KindCount) int {
		return cmp.Or(cmp.Compare(b.Tier, a.Tier), strings.Compare(string(a.Kind), string(b.Kind)))
	})
	s.Certificates.Served = len(r.Certificates)
	s.Certificates.AtRest = len(r.AtRest)
	for i := range r.AtRest {
		if len(r.AtRest[i].Endpoints) > 0 {
			s.Certificates.Both++
		}
	}
	s.Certificates.Total = s.Certificates.Served + s.Certificates.AtRest - s.Certificates.Both
	for i := range r.Endpoints {
		ep := &r.Endpoints[i]
		if ep.Certificate != "" {
			s.Endpoints.TLS++
		} else {
			s.Endpoints.Failures[cmp.Or(ep.Fault().Failure, "error")]++
		}
	}
	for _, src := range r.Sources {
		if src.Error != "" {
			s.SourcesFailed++
		}
	}
	if r.Coverage != nil {
		s.Gaps = len(r.Coverage.Gaps)
		for _, g := range r.Coverage.Gaps {
			s.GapsByReason[string(g.Reason)]++
		}
	}
	return s
}

// SummaryOf returns r.Summary, or computes it when r was not summed up
// (a report built by hand, or read back from a version without it).
func SummaryOf(r *Report) Summary {
	if r.Summary.ByTier != nil {
		return r.Summary
	}
	return NewSummary(r)
}

// TiersText says the findings by tier, most urgent first: "2 critical,
// 4 page"; "no findings" without any.
func (s Summary) TiersText() string {
	if s.Findings == 0 {
		return "no findings"
	}
	parts := make([]string, len(s.ByTier))
	for i, t := range s.ByTier {
		parts[i] = strconv.Itoa(t.Count) + " " + t.Tier.String()
	}
	return strconv.Itoa(s.Findings) + " finding(s): " + strings.Join(parts, ", ")
}

// CertificatesText says the distinct certificates: "18 certificate(s)
// (15 served, 4 held at rest, 1 both)".
func (s Summary) CertificatesText() string {
	c := s.Certificates
	return fmt.Sprintf("%d certificate(s) (%d served, %d held at rest, %d both)", c.Total, c.Served, c.AtRest, c.Both)
}

// GapsText says the coverage gaps by reason: "1 coverage gap(s):
// 1 delegation_refused"; "no coverage gaps" without any.
func (s Summary) GapsText() string {
	if s.Gaps == 0 {
		return "no coverage gaps"
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(s.GapsByReason)) {
		parts = append(parts, fmt.Sprintf("%d %s", s.GapsByReason[r], r))
	}
	return fmt.Sprintf("%d coverage gap(s): %s", s.Gaps, strings.Join(parts, ", "))
}

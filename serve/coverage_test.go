package serve_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/ctcert"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
)

// TestCoverageInMetricsAndPage: a report's coverage gaps are counted by
// reason in /metrics (0 for a reason without any), its zones by how they
// were read, the certificates held at rest by kind of location (0 for a
// kind without any), and the status page's Coverage section lists each
// gap with its fix and what is held at rest.
func TestCoverageInMetricsAndPage(t *testing.T) {
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	r, _ := testReport()
	r.Coverage = &scan.Coverage{
		Zones: []scan.CoverageZone{{Zone: "internal.example", Via: "transfer"}, {Zone: "svc.internal.example", Via: "delegation", Parent: "internal.example"}},
		Gaps: []policy.Gap{{Gap: found.Gap{Reason: found.GapDelegationRefused, Zone: "closed.internal.example", Parent: "internal.example",
			Detail: "AXFR refused by 10.0.0.53:53", Fix: "allow transfers from this host, or add the zone with its own nameserver/tsig"}, Tier: policy.Warning}},
		GapsByReason: map[string]int{"delegation_refused": 1},
		AtRest:       []scan.CoverageAtRest{{Kind: "file", Certificates: 2, Locations: 3, Served: 1}, {Kind: "secret", Certificates: 1, Locations: 1}},
	}
	s.RecordReport(r)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()

	fams := scrape(t, hs.URL)
	for reason, want := range map[string]float64{"delegation_refused": 1, "unmonitored_zone": 0} {
		if got, ok := value(fams, "certwatch_coverage_gaps", map[string]string{"reason": reason}); !ok || got != want {
			t.Errorf("certwatch_coverage_gaps{reason=%s} = %v (present %v), want %v", reason, got, ok, want)
		}
	}
	if got, ok := value(fams, "certwatch_coverage_zones", map[string]string{"via": "delegation"}); !ok || got != 1 {
		t.Errorf("certwatch_coverage_zones{via=delegation} = %v (present %v), want 1", got, ok)
	}
	for kind, want := range map[string][2]float64{"file": {2, 3}, "secret": {1, 1}, "configmap": {0, 0}} {
		certs, ok := value(fams, "certwatch_coverage_at_rest_certificates", map[string]string{"location_kind": kind})
		locs, ok2 := value(fams, "certwatch_coverage_at_rest_locations", map[string]string{"location_kind": kind})
		if !ok || !ok2 || certs != want[0] || locs != want[1] {
			t.Errorf("certwatch_coverage_at_rest_{certificates,locations}{location_kind=%s} = %v, %v (present %v, %v), want %v", kind, certs, locs, ok, ok2, want)
		}
	}
	_, _, page := get(t, hs.URL+"/")
	for _, want := range []string{`<h2 id="coverage-title">Coverage</h2>`, "Watching 2 zones (1 followed from delegations, 0 in Route 53)",
		"Held at rest: 2 certificates in file (3 places, 1 served), 1 certificate in secret (1 place, 0 served).",
		"closed.internal.example", "delegation refused", "allow transfers from this host"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
}

// TestCTEntriesBehindInMetrics: /metrics shows, per CT log, the entries
// the report's coverage says are left to read: the number ct_behind
// states.
func TestCTEntriesBehindInMetrics(t *testing.T) {
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	r, _ := testReport()
	r.Coverage = &scan.Coverage{GapsByReason: map[string]int{}, CTLogs: []ctcert.Progress{
		{Log: "log.example/2030h1", URL: "https://mon.log.example/2030h1/", TreeSize: 1000, Next: 512, MaxBehind: 100},
		{Log: "log.example/2030h2", URL: "https://mon.log.example/2030h2/", TreeSize: 40, Next: 40, MaxBehind: 100},
	}}
	s.RecordReport(r)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	fams := scrape(t, hs.URL)
	for log, want := range map[string]float64{"log.example/2030h1": 488, "log.example/2030h2": 0} {
		if got, ok := value(fams, "certwatch_ct_entries_behind", map[string]string{"log": log}); !ok || got != want {
			t.Errorf("certwatch_ct_entries_behind{log=%s} = %v (present %v), want %v", log, got, ok, want)
		}
	}
}

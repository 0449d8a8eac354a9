package serve_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
)

// TestCoverageInMetricsAndPage: a report's coverage gaps are counted by
// reason in /metrics (0 for a reason without any), its zones by how they
// were read, and the status page's Coverage section lists each gap with
// its fix.
func TestCoverageInMetricsAndPage(t *testing.T) {
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	r, _ := testReport()
	r.Coverage = &scan.Coverage{
		Zones: []scan.CoverageZone{{Zone: "internal.example", Via: "transfer"}, {Zone: "svc.internal.example", Via: "delegation", Parent: "internal.example"}},
		Gaps: []policy.Gap{{Gap: found.Gap{Reason: found.GapDelegationRefused, Zone: "closed.internal.example", Parent: "internal.example",
			Detail: "AXFR refused by 10.0.0.53:53", Fix: "allow transfers from this host, or add the zone with its own nameserver/tsig"}, Tier: policy.Warning}},
		GapsByReason: map[string]int{"delegation_refused": 1},
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
	_, _, page := get(t, hs.URL+"/")
	for _, want := range []string{`<h2 id="coverage-title">Coverage</h2>`, "Watching 2 zones (1 followed from delegations, 0 in Route 53)",
		"closed.internal.example", "delegation refused", "allow transfers from this host"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
}

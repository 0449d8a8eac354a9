package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

func TestCarryForward(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(time.Hour), t0.Add(2*time.Hour)
	ep := func(name, addr string) policy.Endpoint { return policy.Endpoint{Name: name, Port: 443, Address: addr} }
	ok := func(name, addr, cert string) scan.Endpoint {
		return scan.Endpoint{Name: name, Port: 443, Address: addr, Certificate: cert}
	}
	down := func(name, addr, failure string) scan.Endpoint {
		return scan.Endpoint{Name: name, Port: 443, Address: addr, Failed: &policy.Failed{Error: "dial: " + failure, Failure: failure}}
	}
	expired := policy.Finding{Kind: policy.Expired, Tier: policy.Critical, Certificate: "aa", Subject: "a.example",
		Endpoints: []policy.Endpoint{ep("a.example", "127.0.0.2"), ep("a.example", "127.0.0.3")}}
	degraded := policy.Finding{Kind: policy.DiscoveryDegraded, Tier: policy.Warning, Name: "zone"}
	certA := policy.Certificate{SHA256: "aa", Subject: "a.example", NotAfter: policy.At(t0.Add(-time.Hour))}
	prev := &scan.Report{GeneratedAt: t0, Findings: []policy.Finding{expired, degraded}, Certificates: []policy.Certificate{certA}}
	unverified := expired
	unverified.UnverifiedSince = policy.At(t0)

	tests := []struct {
		name      string
		prev, cur *scan.Report
		want      []policy.Finding
		wantCerts int
	}{
		{"every endpoint refused: kept, unverified since the last observation", prev,
			&scan.Report{GeneratedAt: t1, Endpoints: []scan.Endpoint{down("a.example", "127.0.0.2", "refused"), down("a.example", "127.0.0.3", "timeout")}},
			[]policy.Finding{unverified}, 1},
		{"not probed before the sweep timeout: kept", prev,
			&scan.Report{GeneratedAt: t1, Endpoints: []scan.Endpoint{down("a.example", "127.0.0.2", "not_probed"), down("a.example", "127.0.0.3", "not_probed")}},
			[]policy.Finding{unverified}, 1},
		{"carried again: since stays at the last observation",
			&scan.Report{GeneratedAt: t1, Findings: []policy.Finding{unverified}},
			&scan.Report{GeneratedAt: t2, Endpoints: []scan.Endpoint{down("a.example", "127.0.0.2", "refused"), down("a.example", "127.0.0.3", "refused")}},
			[]policy.Finding{unverified}, 0},
		{"one address answered without the finding: fixed", prev,
			&scan.Report{GeneratedAt: t1, Endpoints: []scan.Endpoint{ok("a.example", "127.0.0.2", "bb"), down("a.example", "127.0.0.3", "refused")}},
			nil, 0},
		{"endpoint gone from the inventory: not carried", prev,
			&scan.Report{GeneratedAt: t1, Endpoints: []scan.Endpoint{down("a.example", "127.0.0.2", "refused")}},
			nil, 0},
		{"observed again: the fresh finding only", prev,
			&scan.Report{GeneratedAt: t1, Findings: []policy.Finding{expired}, Endpoints: []scan.Endpoint{ok("a.example", "127.0.0.2", "aa"), down("a.example", "127.0.0.3", "refused")}},
			[]policy.Finding{expired}, 0},
		{"no previous report", nil,
			&scan.Report{GeneratedAt: t1, Endpoints: []scan.Endpoint{down("a.example", "127.0.0.2", "refused"), down("a.example", "127.0.0.3", "refused")}},
			nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(tt.cur.Findings)
			got := carryForward(tt.prev, tt.cur)
			if diff := cmp.Diff(tt.want, got.Findings); diff != "" {
				t.Errorf("carried findings (-want +got):\n%s", diff)
			}
			if len(got.Certificates) != tt.wantCerts {
				t.Errorf("%d certificates listed, want %d (the carried finding's)", len(got.Certificates), tt.wantCerts)
			}
			if len(tt.cur.Findings) != before {
				t.Error("carryForward modified the run's own report")
			}
		})
	}
}

func TestFailureShare(t *testing.T) {
	report := func(failed int, failure string) *scan.Report {
		r := &scan.Report{}
		for i := range 10 {
			ep := scan.Endpoint{Name: "h.example", Port: 443, Address: "127.0.0.1", Certificate: "aa"}
			if i < failed {
				ep = scan.Endpoint{Name: "h.example", Port: 443, Address: "127.0.0.1", Failed: &policy.Failed{Error: failure, Failure: failure}}
			}
			r.Endpoints = append(r.Endpoints, ep)
		}
		return r
	}
	// A refused port is an answer: a zone scanned on ports most of its
	// names do not serve is no outage, unless nothing answered at all.
	if n, why := failureShare(report(6, "refused"), 0.5); n != 6 || why != "" {
		t.Errorf("failureShare(6 of 10 refused, 0.5) = %d, %q; want 6 and no reason", n, why)
	}
	if _, why := failureShare(report(10, "refused"), 0.5); !strings.Contains(why, "10 of 10 endpoints failed") {
		t.Errorf("failureShare(10 of 10 refused, 0.5) = %q; want every endpoint failed named", why)
	}
	r := report(6, "timeout")
	if n, why := failureShare(r, 0.5); n != 6 || !strings.Contains(why, "6 of 10 endpoints (60%) went unanswered") {
		t.Errorf("failureShare(6 of 10 failed, 0.5) = %d, %q; want 6 and a reason", n, why)
	}
	if _, why := failureShare(r, 0.6); why != "" {
		t.Errorf("failureShare(6 of 10 failed, 0.6) = %q, want none (not above the share)", why)
	}
	r.Endpoints = r.Endpoints[:9]
	if _, why := failureShare(r, 0.5); why != "" {
		t.Errorf("failureShare(6 of 9 failed) = %q, want none below 10 endpoints", why)
	}
	// Nothing answering is loud however small the run.
	r.Endpoints = r.Endpoints[:3]
	if _, why := failureShare(r, 0.5); !strings.Contains(why, "3 of 3 endpoints failed") {
		t.Errorf("failureShare(3 of 3 failed) = %q, want every endpoint failed named", why)
	}
	if _, why := failureShare(r, 0); why != "" {
		t.Errorf("failureShare(3 of 3 failed, share 0) = %q, want none: the check is off", why)
	}
}

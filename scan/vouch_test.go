package scan_test

import (
	"strings"
	"testing"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// endpoints returns n endpoints that served a certificate and, after
// them, failed ones of each given failure class.
func endpoints(n int, failures ...string) []scan.Endpoint {
	var es []scan.Endpoint
	for range n {
		es = append(es, scan.Endpoint{Name: "ok.example", Port: 443, Certificate: "ab"})
	}
	for _, f := range failures {
		es = append(es, scan.Endpoint{Name: "down.example", Port: 443, Failed: &policy.Failed{Failure: f}})
	}
	return es
}

// TestVouchUnverified: a report that checked nothing it can vouch for (an
// empty zone, nothing probed, no certificate, more unanswered than the
// storm guard allows) is refused, each with a line saying why, and a
// report that checked what it found, or was allowed to find nothing, is
// not.
func TestVouchUnverified(t *testing.T) {
	zone := map[string]bool{"dnszone:empty.example": false}
	tests := []struct {
		name  string
		vouch scan.Vouch
		r     scan.Report
		want  string // in the error; "" for none
	}{
		{name: "every endpoint served a certificate", r: scan.Report{Endpoints: endpoints(3)}},
		{name: "empty zone", vouch: scan.Vouch{AllowEmpty: zone},
			r:    scan.Report{Sources: []scan.SourceResult{{Name: "dnszone:empty.example"}}, Endpoints: endpoints(3)},
			want: "zone empty.example transferred with no name to probe"},
		{name: "empty zone allowed", vouch: scan.Vouch{AllowEmpty: map[string]bool{"dnszone:empty.example": true}},
			r: scan.Report{Sources: []scan.SourceResult{{Name: "dnszone:empty.example"}}}},
		{name: "empty zone that failed is not empty", vouch: scan.Vouch{AllowEmpty: zone},
			r: scan.Report{Sources: []scan.SourceResult{{Name: "dnszone:empty.example", Error: "refused"}}, Endpoints: endpoints(1)}},
		{name: "nothing probed", r: scan.Report{Targets: 2}, want: "nothing was probed: the sources found 2 targets"},
		{name: "no certificate from any endpoint", r: scan.Report{Endpoints: endpoints(0, "refused", "timeout", "timeout")},
			want: "no certificate from any of the 3 endpoint(s) (2 timeout, 1 refused)"},
		{name: "more unanswered than the share", vouch: scan.Vouch{MaxFailureShare: 0.5},
			r:    scan.Report{Endpoints: endpoints(4, "timeout", "timeout", "timeout", "timeout", "timeout", "timeout")},
			want: "6 of 10 endpoints (60%) went unanswered"},
		{name: "as many unanswered as the share", vouch: scan.Vouch{MaxFailureShare: 0.6},
			r: scan.Report{Endpoints: endpoints(4, "timeout", "timeout", "timeout", "timeout", "timeout", "timeout")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.vouch.Unverified(&tt.r)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Unverified = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Unverified = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

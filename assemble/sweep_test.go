package assemble

import (
	"testing"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// Sweep hands notification the report's own lists, not copies: at 100,000
// endpoints a copy of the endpoints was 8 MB held through the run's
// notification, its peak. The name asked for at a load balancer (via)
// stays on its endpoint.
func TestSweepSharesTheReport(t *testing.T) {
	r := &scan.Report{
		Endpoints: []scan.Endpoint{
			{Name: "shop.corp.example", Port: 443, Address: "10.0.0.1", Failed: &policy.Failed{Failure: "timeout", Error: "no answer"}},
			{Name: "shop.corp.example", Port: 443, Address: "10.0.0.1", Via: "web-1.eu-west-1.elb.amazonaws.com", Certificate: "ab12"},
		},
		Certificates: []policy.Certificate{{SHA256: "ab12"}},
		Findings:     []policy.Finding{{Kind: policy.Unreachable}},
	}
	sw := Sweep(r)
	if len(sw.Endpoints) != 2 || &sw.Endpoints[0] != &r.Endpoints[0] {
		t.Errorf("sweep endpoints are not the report's own list")
	}
	if &sw.Certificates[0] != &r.Certificates[0] || &sw.Findings[0] != &r.Findings[0] {
		t.Errorf("sweep certificates or findings are not the report's own lists")
	}
	if e := sw.Endpoints[1]; e.Via != "web-1.eu-west-1.elb.amazonaws.com" || e.Certificate != "ab12" {
		t.Errorf("endpoint asked at the load balancer = %+v, want its via and certificate", e)
	}
}

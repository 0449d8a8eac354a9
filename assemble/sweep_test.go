package assemble

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// Sweep hands notification each endpoint as the report names it: the
// name asked for at a load balancer (via) stays apart from the endpoint of
// that name at the same address, so the one's certificate is never taken
// for the other's.
func TestSweepKeepsVia(t *testing.T) {
	r := &scan.Report{Endpoints: []scan.Endpoint{
		{Name: "shop.corp.example", Port: 443, Address: "10.0.0.1", Failed: &policy.Failed{Failure: "timeout", Error: "no answer"}},
		{Name: "shop.corp.example", Port: 443, Address: "10.0.0.1", Via: "web-1.eu-west-1.elb.amazonaws.com", Certificate: "ab12"},
	}}
	var got []policy.Endpoint
	for _, s := range Sweep(r).Endpoints {
		got = append(got, s.Endpoint)
	}
	want := []policy.Endpoint{
		{Name: "shop.corp.example", Port: 443, Address: "10.0.0.1"},
		{Name: "shop.corp.example", Port: 443, Address: "10.0.0.1", Via: "web-1.eu-west-1.elb.amazonaws.com"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sweep endpoints (-want +got):\n%s", d)
	}
}

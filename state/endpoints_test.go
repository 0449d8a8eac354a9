package state_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// A certificate's endpoints read back as written, the resource a name was
// probed through (Via) included, with or without an address.
func TestEndpointsRoundTrip(t *testing.T) {
	eps := []policy.Endpoint{
		{Name: "a.example", Port: 443, Address: "10.0.0.1"},
		{Name: "[2001:db8::1]", Port: 8443, Address: "2001:db8::1"},
		{Name: "c.example", Port: 443},
		{Name: "app.example", Port: 443, Address: "10.0.0.9", Via: "alb-1.eu-west-1.elb.amazonaws.com"},
		{Name: "cdn.example", Port: 443, Via: "d111111abcdef8.cloudfront.net"},
	}
	if diff := cmp.Diff(eps, state.DecodeEndpoints(state.EncodeEndpoints(eps))); diff != "" {
		t.Errorf("endpoints read back (-written +read):\n%s", diff)
	}
}

// Rows written before endpoints kept Via still read, and endpoints
// without Via are written as they were, so an older certwatch on the same
// state reads them too.
func TestEndpointsOldRows(t *testing.T) {
	old := "a.example 443 10.0.0.1\nc.example 443"
	want := []policy.Endpoint{{Name: "a.example", Port: 443, Address: "10.0.0.1"}, {Name: "c.example", Port: 443}}
	if diff := cmp.Diff(want, state.DecodeEndpoints(old)); diff != "" {
		t.Errorf("old row read (-want +got):\n%s", diff)
	}
	if got := state.EncodeEndpoints(want); got != old {
		t.Errorf("endpoints without Via written as %q, want %q as before", got, old)
	}
}

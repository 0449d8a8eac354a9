package scan_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestDiscoverMerges checks that Discover returns what discovery.Merge
// would, and that a single source's list that is already merged is used as
// it is, not copied (a zone of a million names is held once).
func TestDiscoverMerges(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.1")
	b := netip.MustParseAddr("10.0.0.2")
	canonical := []discovery.Target{
		{Name: "a.example", Port: 443, Addresses: []netip.Addr{a, b}, Sources: []string{"dnszone:example"}},
		{Name: "a.example", Port: 8443, Addresses: []netip.Addr{a}, Sources: []string{"dnszone:example"}},
		{Name: "b.example", Port: 443, Sources: []string{"dnszone:example"}},
	}
	tests := []struct {
		name    string
		lists   [][]discovery.Target
		aliased bool
	}{
		{"one merged list", [][]discovery.Target{canonical}, true},
		{"one merged list and an empty one", [][]discovery.Target{nil, canonical}, true},
		{"unsorted", [][]discovery.Target{{canonical[2], canonical[0]}}, false},
		{"duplicate endpoint", [][]discovery.Target{{canonical[0], canonical[0]}}, false},
		{"name not normalised", [][]discovery.Target{{{Name: "A.example.", Port: 443, Sources: []string{"static"}}}}, false},
		{"addresses unsorted", [][]discovery.Target{{{Name: "a.example", Port: 443, Addresses: []netip.Addr{b, a}, Sources: []string{"static"}}}}, false},
		{"two sources", [][]discovery.Target{canonical, {{Name: "a.example", Port: 443, Sources: []string{"static"}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &scan.Pass{Prober: probes.New(probes.Config{AllowLoopback: true})}
			for i, l := range tt.lists {
				p.Sources = append(p.Sources, listSource{name: fmt.Sprintf("source%d", i), targets: l})
			}
			got, _, err := p.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(discovery.Merge(tt.lists...), got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("Discover differs from discovery.Merge (-want +got):\n%s", diff)
			}
			if aliased := len(got) > 0 && &got[0] == &canonical[0]; aliased != tt.aliased {
				t.Errorf("result shares the source's list = %v, want %v", aliased, tt.aliased)
			}
		})
	}
}

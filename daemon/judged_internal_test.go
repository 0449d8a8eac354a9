package daemon

import (
	"net/netip"
	"testing"
)

// TestJudgedTellsEndpointsApart: the set of endpoints a run with sites has
// judged tells apart endpoints that differ only in their name, port,
// address family or zone, and knows each once added.
func TestJudgedTellsEndpointsApart(t *testing.T) {
	keys := []judgedKey{
		{"a.example.com", 443, netip.MustParseAddr("192.0.2.1")},
		{"a.example.com", 8443, netip.MustParseAddr("192.0.2.1")},
		{"a.example.co", 443, netip.MustParseAddr("192.0.2.1")},
		{"b.example.com", 443, netip.MustParseAddr("192.0.2.1")},
		{"a.example.com", 443, netip.MustParseAddr("192.0.2.2")},
		{"a.example.com", 443, netip.MustParseAddr("::ffff:192.0.2.1")},
		{"a.example.com", 443, netip.MustParseAddr("fe80::1")},
		{"a.example.com", 443, netip.MustParseAddr("fe80::1%eth0")},
		{"a.example.com", 443, netip.MustParseAddr("fe80::1%eth1")},
		{"a.example.com", 443, netip.Addr{}},
		{"", 443, netip.Addr{}},
	}
	j := newJudged()
	for _, k := range keys {
		if !j.add(k) {
			t.Errorf("%v taken for judged before it was added", k)
		}
	}
	for _, k := range keys {
		if j.add(k) {
			t.Errorf("%v not known once added", k)
		}
	}
	if len(j.set) != len(keys) {
		t.Errorf("%d endpoints held, want %d", len(j.set), len(keys))
	}
}

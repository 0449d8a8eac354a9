package discovery_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery"
)

func TestKey(t *testing.T) {
	tests := []struct {
		name string
		t    discovery.Target
		want string
	}{
		{"host name", discovery.Target{Name: "www.example", Port: 443}, "www.example:443"},
		{"IPv4 literal", discovery.Target{Name: "192.0.2.7", Port: 8443}, "192.0.2.7:8443"},
		{"IPv6 literal", discovery.Target{Name: "2001:db8::7", Port: 8443}, "[2001:db8::7]:8443"},
		{"asked at a load balancer", discovery.Target{Name: "shop.example", Port: 443, Via: "web-1.eu-west-1.elb.amazonaws.com"}, "shop.example:443 via web-1.eu-west-1.elb.amazonaws.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.t.Key()
			if got != tt.want {
				t.Errorf("Key() = %q, want %q", got, tt.want)
			}
			if host, _, err := net.SplitHostPort(got); err != nil || host != tt.t.Name {
				t.Errorf("Key() = %q does not split back into host %q: %v", got, tt.t.Name, err)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	a1, a2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	zone := []discovery.Target{
		{Name: "WWW.example.", Port: 443, Addresses: []netip.Addr{a2}, Sources: []string{"dnszone:example"}},
		{Name: "*.dyn.example", Port: 443, Sources: []string{"dnszone:example"}, Skip: "wildcard owner"},
		{Name: "api.example", Port: 443, Resolve: "api.cdn.example", Sources: []string{"dnszone:example"}},
	}
	static := []discovery.Target{
		{Name: "www.example", Port: 443, Addresses: []netip.Addr{a1, a2}, Sources: []string{"static"}, Explicit: true},
		{Name: "www.example", Port: 8443, Sources: []string{"static"}, Explicit: true},
	}
	got := discovery.Merge(zone, static)
	want := []discovery.Target{
		{Name: "*.dyn.example", Port: 443, Sources: []string{"dnszone:example"}, Skip: "wildcard owner"},
		{Name: "api.example", Port: 443, Resolve: "api.cdn.example", Sources: []string{"dnszone:example"}},
		{Name: "www.example", Port: 443, Addresses: []netip.Addr{a1, a2}, Sources: []string{"dnszone:example", "static"}, Explicit: true},
		{Name: "www.example", Port: 8443, Sources: []string{"static"}, Explicit: true},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
	if zone[0].Name != "WWW.example." || len(static[0].Sources) != 1 {
		t.Errorf("Merge modified its inputs: %+v %+v", zone[0], static[0])
	}
}

// TestMergeVia: a name asked at a load balancer (Via) is a target of its
// own, apart from the name probed where its DNS leads and from the same
// name asked at another load balancer, and it is looked up by the load
// balancer's name.
func TestMergeVia(t *testing.T) {
	static := []discovery.Target{{Name: "shop.example", Port: 443, Sources: []string{"static"}, Explicit: true}}
	lbs := []discovery.Target{
		{Name: "shop.example", Port: 443, Via: "web-2.elb.example", Sources: []string{"aws-lb:elbv2:1/web-2"}},
		{Name: "shop.example", Port: 443, Via: "web-1.elb.example", Sources: []string{"aws-lb:elbv2:1/web-1"}},
		{Name: "shop.example", Port: 443, Via: "web-1.elb.example", Sources: []string{"aws-lb:elbv2:1/web-1"}},
	}
	got := discovery.Merge(lbs, static)
	want := []discovery.Target{
		{Name: "shop.example", Port: 443, Sources: []string{"static"}, Explicit: true},
		{Name: "shop.example", Port: 443, Via: "web-1.elb.example", Sources: []string{"aws-lb:elbv2:1/web-1"}},
		{Name: "shop.example", Port: 443, Via: "web-2.elb.example", Sources: []string{"aws-lb:elbv2:1/web-2"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
	if got[0].ResolveName() != "shop.example" || got[1].ResolveName() != "web-1.elb.example" {
		t.Errorf("ResolveName = %q, %q; want the name itself, then the load balancer's", got[0].ResolveName(), got[1].ResolveName())
	}
}

func TestMergeProtocol(t *testing.T) {
	zone := []discovery.Target{
		{Name: "mail.example", Port: 25, Protocol: discovery.TLS, Sources: []string{"a"}},
		{Name: "db.example", Port: 6432, Protocol: discovery.TLS, Sources: []string{"a"}},
		{Name: "ldap.example", Port: 389, Protocol: discovery.LDAP, Sources: []string{"a"}},
	}
	records := []discovery.Target{
		{Name: "mail.example", Port: 25, Protocol: discovery.SMTP, Sources: []string{"b"}},
		{Name: "db.example", Port: 6432, Protocol: discovery.Postgres, Sources: []string{"b"}, Explicit: true},
		{Name: "ldap.example", Port: 389, Protocol: discovery.TLS, Sources: []string{"b"}},
	}
	explicitTLS := []discovery.Target{{Name: "mail.example", Port: 25, Protocol: discovery.TLS, Sources: []string{"c"}, Explicit: true}}
	got := map[string]discovery.Protocol{}
	for _, tg := range discovery.Merge(zone, records) {
		got[tg.Key()] = tg.Protocol
	}
	want := map[string]discovery.Protocol{"mail.example:25": discovery.SMTP, "db.example:6432": discovery.Postgres, "ldap.example:389": discovery.LDAP}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Merge protocols (-want +got):\n%s", diff)
	}
	if m := discovery.Merge(records, explicitTLS); m[2].Key() != "mail.example:25" || m[2].Protocol != discovery.TLS {
		t.Errorf("Merge with an explicit tls target: %+v, want mail.example:25 as tls", m)
	}
}

func TestFilter(t *testing.T) {
	f, err := discovery.NewFilter([]string{"*.prod.example", "vault.example"}, []string{"legacy-*"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		keep bool
	}{
		{"a.b.prod.example", true},
		{"API.Prod.Example.", true},
		{"vault.example", true},
		{"vault.example.org", false},
		{"legacy-db.prod.example", false},
		{"prod.example", false},
	}
	for _, tt := range tests {
		if got := f.Keep(tt.name); got != tt.keep {
			t.Errorf("Keep(%q) = %v, want %v", tt.name, got, tt.keep)
		}
	}
	if f.KeepsAll() {
		t.Error("a filter with patterns says it keeps every name")
	}
	if only, _ := discovery.NewFilter(nil, []string{"legacy-*"}); only.KeepsAll() {
		t.Error("a filter with an exclude pattern says it keeps every name")
	}
	if none, _ := discovery.NewFilter(nil, nil); !none.KeepsAll() || !(discovery.Filter{}).KeepsAll() {
		t.Error("a filter without patterns does not say it keeps every name")
	}
	if !(discovery.Filter{}).Keep("anything.example") {
		t.Error("the zero Filter drops a name")
	}
	if _, err := discovery.NewFilter([]string{" "}, nil); err == nil {
		t.Error("NewFilter accepted an empty pattern")
	}
}

// TestMerged: what Merge returns is merged, and a list that Merge would
// change is not: a name not normalised, targets out of order or twice,
// addresses or sources out of order or repeated.
func TestMerged(t *testing.T) {
	a1, a2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	merged := discovery.Merge([]discovery.Target{
		{Name: "www.example", Port: 443, Addresses: []netip.Addr{a2, a1}, Sources: []string{"static"}},
		{Name: "api.example", Port: 443, Sources: []string{"static", "dnszone:example"}},
		{Name: "api.example", Port: 443, Via: "lb.example", Sources: []string{"route53"}},
	})
	if !discovery.Merged(merged) || !discovery.Merged(nil) {
		t.Fatalf("Merged(Merge(...)) = false: %+v", merged)
	}
	unmerged := map[string][]discovery.Target{
		"name not normalised": {{Name: "WWW.example.", Port: 443}},
		"out of order":        {{Name: "www.example", Port: 443}, {Name: "api.example", Port: 443}},
		"twice":               {{Name: "www.example", Port: 443}, {Name: "www.example", Port: 443}},
		"addresses":           {{Name: "www.example", Port: 443, Addresses: []netip.Addr{a2, a1}}},
		"address repeated":    {{Name: "www.example", Port: 443, Addresses: []netip.Addr{a1, a1}}},
		"sources":             {{Name: "www.example", Port: 443, Sources: []string{"static", "dnszone:example"}}},
	}
	for name, list := range unmerged {
		if discovery.Merged(list) {
			t.Errorf("%s: Merged(%+v) = true, want false", name, list)
		}
		if !discovery.Merged(discovery.Merge(list)) {
			t.Errorf("%s: Merge does not make it merged", name)
		}
	}
}

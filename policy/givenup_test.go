package policy_test

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestTLSBrokenCoversGivenUpNames: a zone of 8 names on one hung load
// balancer (it accepts TCP and never speaks). The scan's breaker gives the
// address up after 2 stalls, so most names make no connection; they are
// the same outage of the same server, and each name gets its tls_broken
// warning, the given-up ones saying why they were not probed.
func TestTLSBrokenCoversGivenUpNames(t *testing.T) {
	now := time.Now()
	const zone = "lb.example"
	pit, err := certtest.ServeSilent("127.0.22.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pit.Close() })
	var text strings.Builder
	for i := range 8 {
		fmt.Fprintf(&text, "app%d A 127.0.22.1\n", i)
	}
	dns, err := dnstest.Start(dnstest.Zone{Name: zone, Text: text.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	port := int(pit.Addr().Port())
	src, err := dnszone.New(dnszone.Config{Zone: zone, Nameserver: dns.Addr(), Ports: []int{port}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pass := &scan.Pass{
		Sources: []scan.Source{src},
		Prober:  probes.New(probes.Config{AllowLoopback: true, Attempts: 1, HandshakeTimeout: 300 * time.Millisecond, BreakAfter: 2}),
		Rules:   policy.DefaultRules(),
		Now:     func() time.Time { return now },
	}
	r, err := pass.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	givenUp := 0
	for _, ep := range r.Endpoints {
		if strings.Contains(ep.Fault().Error, "given up on") {
			givenUp++
		}
	}
	if givenUp < 4 {
		t.Fatalf("%d of 8 endpoints given up on, want most: %+v", givenUp, r.Endpoints)
	}
	var names []string
	for _, f := range r.Findings {
		if f.Kind != policy.TLSBroken || f.Tier != policy.Warning || len(f.Endpoints) != 1 || f.Endpoints[0].Address != "127.0.22.1" {
			t.Errorf("unexpected finding %s %s %s %v: %s", f.Kind, f.Tier, f.Name, f.Endpoints, f.Message)
			continue
		}
		names = append(names, f.Name)
		if ep := f.Endpoints[0]; net.JoinHostPort(ep.Name, fmt.Sprint(ep.Port)) != f.Name {
			t.Errorf("%s: its endpoint is %s, another name's", f.Name, ep)
		}
		if !strings.Contains(f.Message, f.Name+" accepts connections but the TLS handshake fails (timeout: ") {
			t.Errorf("%s: message %q", f.Name, f.Message)
		}
	}
	var want []string
	for i := range 8 {
		want = append(want, net.JoinHostPort(fmt.Sprintf("app%d.%s", i, zone), fmt.Sprint(port)))
	}
	if !slices.Equal(names, want) {
		t.Errorf("tls_broken findings for %v, want one for each of %v", names, want)
	}
}

// TestTLSBrokenGivenUpOnAnotherPort: the breaker gives up on an address
// whatever the port, but only the port that stalled is known broken. A
// healthy port of the same address, given up on after the hung port's
// stalls, is not tls_broken: nothing was seen to fail there.
func TestTLSBrokenGivenUpOnAnotherPort(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Given Up Root", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	pit, err := certtest.ServeSilent("127.0.22.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pit.Close() })
	healthy := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"ok.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 6, 0)})
	ok, err := certtest.Serve("127.0.22.2:0", healthy.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ok.Close() })
	sweep := probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), Attempts: 1, HandshakeTimeout: 300 * time.Millisecond, BreakAfter: 2}).Sweep()
	target := func(name string, ap netip.AddrPort) discovery.Target {
		return discovery.Target{Name: name, Port: int(ap.Port()), Addresses: []netip.Addr{ap.Addr()}, Sources: []string{"dnszone:example"}}
	}
	var obs []probes.Observation
	for _, tg := range []discovery.Target{ // one at a time: the breaker counts in order
		target("hung1.example", pit.Addr()), target("hung2.example", pit.Addr()),
		target("hung3.example", pit.Addr()), target("ok.example", ok.Addr()),
	} {
		obs = append(obs, sweep.Probe(t.Context(), tg)...)
	}
	if o := obs[3]; !o.GivenUp || o.Failure != probes.FailTimeout {
		t.Fatalf("ok.example: GivenUp %v, failure %q (%s); want given up on after the hung port's 2 stalls", o.GivenUp, o.Failure, o.Error)
	}
	res := policy.Evaluate(obs, policy.DefaultRules(), now)
	var names []string
	for _, f := range res.Findings {
		names = append(names, f.Name)
	}
	hung := func(n int) string {
		return net.JoinHostPort(fmt.Sprintf("hung%d.example", n), fmt.Sprint(pit.Addr().Port()))
	}
	if want := []string{hung(1), hung(2), hung(3)}; !slices.Equal(names, want) {
		t.Errorf("findings about %v, want tls_broken for %v and none for the healthy port", names, want)
	}
}

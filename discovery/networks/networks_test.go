package networks_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/networks"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// Every test sweeps its own loopback range under 127.31.0.0/16 (all of
// 127.0.0.0/8 is loopback on Linux): an address nothing listens on
// refuses at once.

var now = time.Now()

// accepts records when each listener accepted a connection.
type accepts struct {
	mu sync.Mutex
	at map[netip.Addr][]time.Time
}

func (a *accepts) add(addr netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = map[netip.Addr][]time.Time{}
	}
	a.at[addr] = append(a.at[addr], time.Now())
}

func (a *accepts) count(addr netip.Addr) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at[addr])
}

func (a *accepts) all() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Time
	for _, ts := range a.at {
		out = append(out, ts...)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// serveTLS listens on every address of addrs at one port (a free one on
// the first), completing a TLS handshake with certs[addr] (none: the
// connection is held open and never spoken to, a tarpit) and recording
// each accept in acc. It returns the port.
func serveTLS(t testing.TB, acc *accepts, certs map[string]*tls.Certificate, addrs ...string) int {
	t.Helper()
	port := 0
	for _, a := range addrs {
		addr := netip.MustParseAddr(a)
		cert := certs[a]
		s, err := certtest.ServeFunc(fmt.Sprintf("%s:%d", a, port), func(ctx context.Context, c net.Conn) {
			acc.add(addr)
			if cert == nil {
				<-ctx.Done() // a tarpit: accepts and never speaks
				return
			}
			_ = tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*cert}}).HandshakeContext(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		port = int(s.Addr().Port())
	}
	return port
}

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

func TestSweepSkipsSpecialAndExcluded(t *testing.T) {
	t.Parallel()
	ca := certtest.MustCA("sweep CA", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "sweep", NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)}).TLSCertificate()
	var acc accepts
	certs := map[string]*tls.Certificate{"127.31.1.2": &leaf, "127.31.1.0": &leaf, "127.31.1.5": &leaf, "127.31.1.15": &leaf}
	port := serveTLS(t, &acc, certs, "127.31.1.2", "127.31.1.0", "127.31.1.5", "127.31.1.15")

	src, err := networks.New(networks.Config{
		Name: "lab", Prefixes: prefixes("127.31.1.0/28"), Exclude: prefixes("127.31.1.5/32"),
		Ports: []networks.Port{{Number: port}, {Number: 6432, Protocol: discovery.Postgres}}, Rate: 1000, Burst: 10,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := src.Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []discovery.Target{{Name: "127.31.1.2", Port: port, Addresses: []netip.Addr{netip.MustParseAddr("127.31.1.2")}, Sources: []string{"networks:lab"}, FromRange: true}}
	if diff := cmp.Diff(y.Targets, want, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("targets (-got +want):\n%s", diff)
	}
	for _, a := range []string{"127.31.1.0", "127.31.1.15", "127.31.1.5"} {
		if n := acc.count(netip.MustParseAddr(a)); n != 0 {
			t.Errorf("%s (network, broadcast or excluded address) got %d connection(s), want none", a, n)
		}
	}
	if len(y.Inventory.Networks) != 1 {
		t.Fatalf("inventory networks = %d, want 1", len(y.Inventory.Networks))
	}
	n := y.Inventory.Networks[0]
	got := [6]int{n.Addresses, n.Connections, n.Refused, n.Skipped, n.Excluded, len(n.Answered)}
	if want := [6]int{13, 26, 25, 2, 1, 1}; got != want {
		t.Errorf("addresses, connections, refused, skipped, excluded, answered = %v, want %v", got, want)
	}
	if diff := cmp.Diff(n.Ports, []string{fmt.Sprint(port), "6432/postgres"}); diff != "" {
		t.Errorf("ports (-got +want):\n%s", diff)
	}
	// Its progress counts every address × port of the range, the
	// skipped and excluded ones passed over.
	if done, total := src.Progress(); done != 32 || total != 32 {
		t.Errorf("progress after the sweep = %d of %d connections, want 32 of 32 (16 addresses × 2 ports)", done, total)
	}
}

func TestCheckBoundsTheRange(t *testing.T) {
	t.Parallel()
	one := []networks.Port{{Number: 443}}
	tests := []struct {
		name string
		c    networks.Config
		want string // in the error; "" for none
	}{
		{"a /16 on one port", networks.Config{Prefixes: prefixes("10.0.0.0/16"), Ports: one}, ""},
		{"a /16 on two ports", networks.Config{Prefixes: prefixes("10.0.0.0/16"), Ports: []networks.Port{{Number: 443}, {Number: 8443}}},
			"10.0.0.0/16 addresses × 2 port(s) is 131072 connections, above max_size 65536: split it into the ranges that hold services, or raise max_size (at most 1048576)"},
		{"raised", networks.Config{Prefixes: prefixes("10.0.0.0/16"), Ports: []networks.Port{{Number: 443}, {Number: 8443}}, MaxSize: 1 << 17}, ""},
		{"a /8", networks.Config{Prefixes: prefixes("10.0.0.0/8"), Ports: one, MaxSize: networks.HardMaxSize},
			"10.0.0.0/8 addresses × 1 port(s) is more than 1048576 connections, above max_size 1048576: split it into the ranges that hold services: certwatch refuses to sweep it whole"},
		{"an IPv6 /64", networks.Config{Prefixes: prefixes("2001:db8::/64"), Ports: one}, "is more than 1048576 connections"},
		{"max_size above the hard bound", networks.Config{Prefixes: prefixes("10.0.0.0/24"), Ports: one, MaxSize: 1 << 24}, "max_size 16777216 is above the most certwatch sweeps"},
		{"overlap", networks.Config{Prefixes: prefixes("10.0.0.0/24", "10.0.0.128/25"), Ports: one}, "cidrs 10.0.0.0/24 and 10.0.0.128/25 overlap"},
		{"IPv4-mapped", networks.Config{Prefixes: prefixes("::ffff:127.0.0.0/120"), Ports: one}, "cidr ::ffff:127.0.0.0/120 is IPv4-mapped: give it as 127.0.0.0/24"},
		{"IPv4-mapped exclude", networks.Config{Prefixes: prefixes("127.0.0.0/24"), Exclude: prefixes("::ffff:127.0.0.1/128"), Ports: one}, "exclude ::ffff:127.0.0.1/128 is IPv4-mapped: give it as 127.0.0.1/32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := networks.Check(tt.c)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check = %v, want %q", err, tt.want)
			}
		})
	}
}

// newPass is a pass over the sources whose prober waits for the networks'
// rate, as internal/cli wires it.
func newPass(t testing.TB, ca *certtest.CA, timeout time.Duration, nets []*networks.Source, sources ...scan.Source) *scan.Pass {
	t.Helper()
	for _, n := range nets {
		sources = append(sources, n)
	}
	return &scan.Pass{
		Sources: sources,
		Prober: probes.New(probes.Config{
			Roots: ca.Pool(), DialTimeout: timeout, HandshakeTimeout: timeout, Attempts: 1,
			Throttle: networks.NewThrottle(nets...).Wait, Revocation: probes.RevocationConfig{Disabled: true},
		}),
		Rules: policy.DefaultRules(),
	}
}

// TestSweepRateHeld sweeps a range where every address listens and counts
// the connections each second at the listeners: the sweep's connects and
// the probes' handshakes together never exceed the rate beyond the burst.
func TestSweepRateHeld(t *testing.T) {
	t.Parallel()
	ca := certtest.MustCA("rate CA", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "rate", NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)}).TLSCertificate()
	var acc accepts
	certs := map[string]*tls.Certificate{}
	var addrs []string
	for i := range 16 {
		a := fmt.Sprintf("127.31.2.%d", i)
		addrs, certs[a] = append(addrs, a), &leaf
	}
	port := serveTLS(t, &acc, certs, addrs...)

	const rate, burst = 20, 2
	src, err := networks.New(networks.Config{Name: "rate", Prefixes: prefixes("127.31.2.0/28"), Ports: []networks.Port{{Number: port}}, Rate: rate, Burst: burst}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newPass(t, ca, 5*time.Second, []*networks.Source{src}).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	times := acc.all()
	if len(times) != 28 { // 14 addresses: a connect each, then a handshake each
		t.Fatalf("listeners accepted %d connections, want 28 (14 sweep connects, 14 probes)", len(times))
	}
	for i, start := range times {
		n := 0
		for _, at := range times[i:] {
			if at.Sub(start) < time.Second {
				n++
			}
		}
		if n > rate+burst {
			t.Errorf("%d connections in the second from %v, want at most %d (rate %d + burst %d)", n, start.Sub(times[0]), rate+burst, rate, burst)
		}
	}
	if len(r.Networks) != 1 || r.Networks[0].TLSEndpoints != 14 || r.Networks[0].Addresses != 14 {
		t.Fatalf("networks = %+v, want one with 14 addresses and 14 TLS endpoints", r.Networks)
	}
}

// sourceFunc is a source of fixed targets: names another source gives.
type sourceFunc []discovery.Target

func (s sourceFunc) Name() string { return "static" }
func (s sourceFunc) Discover(context.Context) (found.Yield, error) {
	return found.Yield{Targets: s}, nil
}

// TestAddressOnlyEndpoint sweeps a range holding a service no name points
// to, serving a certificate that expires in three days, one a named
// target also reaches, and a tarpit: the address-only certificate is
// found, named by the reverse zone, listed as address_only and judged
// (page); the named one is not address_only; the tarpit costs one probe
// timeout and no tls_broken finding.
func TestAddressOnlyEndpoint(t *testing.T) {
	t.Parallel()
	ca := certtest.MustCA("lab CA", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	expiring := ca.MustLeaf(certtest.LeafOptions{CommonName: "legacy appliance", NotBefore: now.AddDate(0, -2, 0), NotAfter: now.AddDate(0, 0, 3)}).TLSCertificate()
	named := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"svc.lab.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)}).TLSCertificate()
	var acc accepts
	port := serveTLS(t, &acc, map[string]*tls.Certificate{"127.31.3.2": &expiring, "127.31.3.3": &named}, "127.31.3.2", "127.31.3.3", "127.31.3.4")

	dns, err := dnstest.Start(dnstest.Zone{Name: "31.127.in-addr.arpa", Text: "2.3 PTR legacy.lab.example.\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })

	src, err := networks.New(networks.Config{
		Name: "lab", Prefixes: prefixes("127.31.3.0/29"), Ports: []networks.Port{{Number: port}}, Rate: 200, Burst: 5,
		Reverse: probes.NewResolver(dns.Addr(), time.Second),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	static := sourceFunc{{Name: "svc.lab.example", Port: port, Addresses: []netip.Addr{netip.MustParseAddr("127.31.3.3")}, Sources: []string{"static"}}}
	start := time.Now()
	r, err := newPass(t, ca, 300*time.Millisecond, []*networks.Source{src}, static).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the pass took %v: the tarpit stalled it", d)
	}
	if len(r.Networks) != 1 {
		t.Fatalf("networks = %+v, want one", r.Networks)
	}
	n := r.Networks[0]
	if n.TLSEndpoints != 2 || len(n.Answered) != 3 || n.AddressOnly != 1 {
		t.Errorf("tls endpoints, answered, address only = %d, %d, %d, want 2, 3, 1", n.TLSEndpoints, len(n.Answered), n.AddressOnly)
	}
	byAddr := map[string]scan.NetworkCertificate{}
	for _, c := range n.Certificates {
		byAddr[c.Endpoints[0]] = c
	}
	ep := fmt.Sprintf("127.31.3.2:%d", port)
	if c := byAddr[ep]; !c.AddressOnly || !slices.Equal(c.Names, []string{"legacy.lab.example"}) {
		t.Errorf("certificate at %s = %+v, want address_only, named legacy.lab.example by the reverse zone", ep, c)
	}
	if c := byAddr[fmt.Sprintf("127.31.3.3:%d", port)]; c.AddressOnly || !slices.Equal(c.Names, []string{"svc.lab.example"}) {
		t.Errorf("certificate at 127.31.3.3 = %+v, want not address_only, named svc.lab.example", c)
	}
	var expiry *policy.Finding
	for i, f := range r.Findings {
		if f.Kind == policy.TLSBroken {
			t.Errorf("finding %s %s: a swept port that does not speak TLS is no finding", f.Kind, f.Message)
		}
		if f.Subject == "legacy appliance" {
			expiry = &r.Findings[i]
		}
	}
	if expiry == nil || expiry.Tier != policy.Page {
		t.Fatalf("findings = %+v, want the address-only certificate judged page (3 days left)", r.Findings)
	}
	if len(expiry.Endpoints) != 1 || expiry.Endpoints[0].Address != "127.31.3.2" {
		t.Errorf("finding endpoints = %+v, want 127.31.3.2", expiry.Endpoints)
	}
}

// TestReverseZoneTimeout: a resolver that never answers costs a few
// lookups' timeouts, not one per address, and the sweep says so.
func TestReverseZoneTimeout(t *testing.T) {
	t.Parallel()
	ca := certtest.MustCA("rev CA", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "rev", NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)}).TLSCertificate()
	var acc accepts
	certs := map[string]*tls.Certificate{}
	var addrs []string
	for i := 1; i < 15; i++ {
		a := fmt.Sprintf("127.31.4.%d", i)
		addrs, certs[a] = append(addrs, a), &leaf
	}
	port := serveTLS(t, &acc, certs, addrs...)
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads queries, never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })

	const timeout = 200 * time.Millisecond
	src, err := networks.New(networks.Config{
		Name: "rev", Prefixes: prefixes("127.31.4.0/28"), Ports: []networks.Port{{Number: port}}, Rate: 1000, Burst: 10,
		Reverse: probes.NewResolver(silent.LocalAddr().String(), timeout), ReverseTimeout: timeout, ReverseConcurrency: 1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	y, err := src.Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*timeout {
		t.Errorf("the sweep took %v: the reverse zone stalled it (%d lookups of %v at most before giving up)", d, networks.ReverseBreakAfter, timeout)
	}
	n := y.Inventory.Networks[0]
	if len(n.Answered) != 14 || !strings.Contains(n.ReverseNote, "reverse lookups given up after 3 in a row timed out") {
		t.Errorf("answered %d, reverse note %q; want 14 and the lookups given up", len(n.Answered), n.ReverseNote)
	}
}

// TestSweepCutShort: a sweep whose context ends says how far it got.
func TestSweepCutShort(t *testing.T) {
	t.Parallel()
	src, err := networks.New(networks.Config{Name: "slow", Prefixes: prefixes("127.31.5.0/24"), Ports: []networks.Port{{Number: 1}}, Rate: 10, Burst: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	y, err := src.Discover(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "sweep of network slow cut short after") {
		t.Fatalf("Discover = %v, want cut short by the deadline", err)
	}
	if n := y.Inventory.Networks[0]; !n.CutShort || n.Addresses >= 254 {
		t.Errorf("network = %+v, want cut short with fewer than 254 addresses tried", n)
	}
}

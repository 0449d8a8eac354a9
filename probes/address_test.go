package probes_test

import (
	"context"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/probes"
)

// dialLog dials like net.Dialer and records every address dialled.
type dialLog struct {
	mu     sync.Mutex
	dialed []string
}

func (d *dialLog) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, address)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *dialLog) addresses() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.dialed)
}

// A zone names whatever addresses its writer likes. Those that reach
// certwatch's own host or its link are never dialled for a discovered
// name, and loopback only with AllowLoopback; each skip is an observation
// that names the address, the source and why. A TLS service bound only to
// loopback on the prober's host stands in for what such a record would
// reach.
func TestProbeBarredAddresses(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	chain := leaf(t, p.inter, "a.example", now.Add(-day), now.Add(30*day)).FullChain()

	barred := map[string]string{
		"0.0.0.0":         "unspecified",
		"0.1.2.3":         "unspecified",
		"::":              "unspecified",
		"169.254.169.254": "link-local",
		"fe80::1":         "link-local",
		"224.0.0.1":       "multicast",
		"ff02::1":         "multicast",
		"255.255.255.255": "broadcast",
		"::ffff:0.0.0.0":  "IPv4-mapped 0.0.0.0 is an unspecified",
	}
	loopback := map[string]string{
		"127.0.0.1":        "loopback",
		"::ffff:127.0.0.1": "IPv4-mapped 127.0.0.1 is a loopback",
		"::1":              "loopback",
	}
	// zoneTarget is a discovered target on port.
	zoneTarget := func(port uint16, addrs ...string) discovery.Target {
		tg := discovery.Target{Name: "a.example", Port: int(port), Sources: []string{"dnszone:example"}}
		for _, a := range addrs {
			tg.Addresses = append(tg.Addresses, netip.MustParseAddr(a))
		}
		return tg
	}
	keys := func(m ...map[string]string) []string {
		var out []string
		for _, mm := range m {
			for k := range mm {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}

	t.Run("discovered, loopback not allowed", func(t *testing.T) {
		t.Parallel()
		s := serve(t, "127.0.0.1:0", chain)
		var log dialLog
		cfg := testConfig(p.root.Pool())
		cfg.AllowLoopback = false
		cfg.Dial = log.dial
		obs := probes.New(cfg).Probe(t.Context(), zoneTarget(s.Addr().Port(), keys(barred, loopback)...))
		if got := log.addresses(); len(got) != 0 {
			t.Errorf("dialled %v; want no address dialled", got)
		}
		if got := s.ServerNames(); len(got) != 0 {
			t.Errorf("the loopback-only server saw handshakes for %v; want none", got)
		}
		if len(obs) != len(barred)+len(loopback) {
			t.Fatalf("%d observations, want one per address (%d)", len(obs), len(barred)+len(loopback))
		}
		for _, o := range obs {
			why := barred[o.Address.String()] + loopback[o.Address.String()]
			if o.Failure != probes.FailAddressSkipped || o.Attempts != 0 || o.Connected || !o.At.Equal(now) {
				t.Errorf("%s: Failure %q, Attempts %d, Connected %v, At %v; want address_skipped, no connection, at now", o.Address, o.Failure, o.Attempts, o.Connected, o.At)
			}
			for _, want := range []string{"not dialled: " + o.Address.String() + " for a.example", "dnszone:example", why} {
				if !strings.Contains(o.Error, want) {
					t.Errorf("%s: Error = %q; want it to say %q", o.Address, o.Error, want)
				}
			}
		}
	})

	t.Run("discovered, loopback allowed", func(t *testing.T) {
		t.Parallel()
		s := serve(t, "127.0.0.1:0", chain)
		var log dialLog
		cfg := testConfig(p.root.Pool())
		cfg.AllowLoopback = true
		cfg.Dial = log.dial
		obs := probes.New(cfg).Probe(t.Context(), zoneTarget(s.Addr().Port(), "127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0", "169.254.169.254"))
		got := map[string]probes.Failure{}
		for _, o := range obs {
			got[o.Address.String()] = o.Failure
		}
		want := map[string]probes.Failure{"127.0.0.1": probes.FailNone, "::ffff:127.0.0.1": probes.FailNone, "0.0.0.0": probes.FailAddressSkipped, "169.254.169.254": probes.FailAddressSkipped}
		if !maps.Equal(got, want) {
			t.Errorf("failures by address = %v, want %v", got, want)
		}
		if d := log.addresses(); len(d) != 2 {
			t.Errorf("dialled %v; want only the two loopback addresses", d)
		}
	})

	t.Run("explicit target, configured range", func(t *testing.T) {
		t.Parallel()
		s := serve(t, "127.0.0.1:0", chain)
		cfg := testConfig(p.root.Pool())
		cfg.AllowLoopback = false
		prober := probes.New(cfg)
		static := zoneTarget(s.Addr().Port(), "127.0.0.1")
		static.Sources, static.Explicit = []string{"static"}, true
		ranged := zoneTarget(s.Addr().Port(), "127.0.0.1")
		ranged.Sources, ranged.FromRange = []string{"networks:lab"}, true
		for _, tg := range []discovery.Target{static, ranged} {
			if o := probeOne(t, prober, tg); o.Failure != probes.FailNone || o.Trust != probes.Trusted {
				t.Errorf("%v at 127.0.0.1: Failure %q (%s), Trust %q; want probed: the operator chose the address", tg.Sources, o.Failure, o.Error, o.Trust)
			}
		}
	})

	t.Run("resolver answer for a discovered name", func(t *testing.T) {
		t.Parallel()
		server := dnsServer(t, map[string]netip.Addr{"lb.example": netip.MustParseAddr("127.0.0.1"), "meta.example": netip.MustParseAddr("169.254.169.254")})
		var log dialLog
		cfg := testConfig(p.root.Pool())
		cfg.AllowLoopback = false
		cfg.Dial = log.dial
		cfg.Resolver = probes.NewResolver(server, time.Second)
		prober := probes.New(cfg)
		for _, name := range []string{"lb.example", "meta.example"} {
			o := probeOne(t, prober, discovery.Target{Name: "a.example", Resolve: name, Port: 443, Sources: []string{"route53:example"}})
			if o.Failure != probes.FailAddressSkipped || !strings.Contains(o.Error, "route53:example") {
				t.Errorf("%s: Failure %q (%s); want address_skipped naming the source", name, o.Failure, o.Error)
			}
		}
		if d := log.addresses(); len(d) != 0 {
			t.Errorf("dialled %v; want nothing", d)
		}
	})
}

// A link-local IPv6 address without a zone cannot be dialled at all: the
// kernel refuses the connect (EINVAL). That is the address, not a
// handshake; an operator's explicit target gets the failure named so.
func TestProbeBadAddress(t *testing.T) {
	t.Parallel()
	tg := discovery.Target{Name: "fe80::1", Port: 443, Addresses: []netip.Addr{netip.MustParseAddr("fe80::1")}, Sources: []string{"static"}, Explicit: true}
	o := probeOne(t, probes.New(testConfig(nil)), tg)
	if o.Failure != probes.FailBadAddress || o.Attempts != 1 {
		t.Fatalf("Failure %q after %d attempts (%s); want bad_address after one", o.Failure, o.Attempts, o.Error)
	}
	if !strings.Contains(o.Error, "connect to [fe80::1]:443") || !strings.Contains(o.Error, "needs a zone") {
		t.Errorf("Error = %q; want the address and the hint about a zone", o.Error)
	}
}

package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
)

// TestScanNetwork sweeps a loopback range with --network: the service no
// name points to is found, named by the reverse zone through --resolver,
// listed as address only, and its certificate, expiring in 3 days, pages.
func TestScanNetwork(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := certtest.MustCA("Network Root", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "bmc", NotBefore: now.AddDate(0, -11, 0), NotAfter: now.AddDate(0, 0, 3)})
	s, err := certtest.Serve("127.31.8.2:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	dns, err := dnstest.Start(dnstest.Zone{Name: "8.31.127.in-addr.arpa", Text: "2 PTR bmc-2.oob.example.\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"scan", "--network", fmt.Sprintf("127.31.8.0/29,%d", s.Addr().Port()), "--resolver", dns.Addr(), "--ca-file", caFile, "--timeout", "5s"}

	stdout, stderr, code := run(t, append(args, "--output", "json")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r struct {
		Findings []struct{ Kind, Tier, Subject string }
		Networks []struct {
			Name      string
			Addresses int `json:"addresses_tried"`
			Answered  []struct {
				ReverseNames []string `json:"reverse_names"`
			}
			TLSEndpoints int `json:"tls_endpoints"`
			AddressOnly  int `json:"address_only"`
			Certificates []struct {
				Subject     string
				Names       []string
				AddressOnly bool `json:"address_only"`
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Networks) != 1 {
		t.Fatalf("networks = %+v, want one", r.Networks)
	}
	n := r.Networks[0]
	if n.Name != "127.31.8.0/29" || n.Addresses != 6 || n.TLSEndpoints != 1 || n.AddressOnly != 1 ||
		len(n.Certificates) != 1 || !n.Certificates[0].AddressOnly || !slices.Equal(n.Certificates[0].Names, []string{"bmc-2.oob.example"}) {
		t.Errorf("network = %+v, want 127.31.8.0/29: 6 addresses tried (network and broadcast never), one TLS endpoint serving an address-only certificate named bmc-2.oob.example", n)
	}
	paged := slices.ContainsFunc(r.Findings, func(f struct{ Kind, Tier, Subject string }) bool {
		return f.Kind == "expiring" && f.Tier == "page" && f.Subject == "bmc"
	})
	if !paged {
		t.Errorf("findings = %+v, want the address-only certificate expiring (page)", r.Findings)
	}

	stdout, _, _ = run(t, args...)
	for _, want := range []string{"NETWORK        CIDRS          PORTS", fmt.Sprintf("Address only in 127.31.8.0/29: \"bmc\" at 127.31.8.2:%d (reverse zone: bmc-2.oob.example), no DNS name leads there", s.Addr().Port())} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestScanNetworkTooLarge: a /8 is refused before anything is dialled,
// saying what to do.
func TestScanNetworkTooLarge(t *testing.T) {
	t.Parallel()
	_, stderr, code := run(t, "scan", "--network", "10.0.0.0/8,443")
	if code != cli.ExitUsage || !strings.Contains(stderr, "10.0.0.0/8 addresses × 1 port(s) is more than 1048576 connections, above max_size 65536: split it into the ranges that hold services: certwatch refuses to sweep it whole") {
		t.Errorf("exit %d, stderr %q; want 2 and the range refused", code, stderr)
	}
}

// acceptCounter is a plain TCP listener on one port of each of a range's
// addresses, recording when each accepted a connection.
type acceptCounter struct {
	port int
	mu   sync.Mutex // guards at
	at   map[netip.Addr][]time.Time
}

// listenRange listens on every address of p (an IPv4 range on loopback)
// on one port, network and broadcast addresses included, and closes what
// it accepts.
func listenRange(t *testing.T, p netip.Prefix) *acceptCounter {
	t.Helper()
	ac := &acceptCounter{at: map[netip.Addr][]time.Time{}}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for attempt := 0; ; attempt++ {
		var lns []net.Listener
		var err error
		for a := p.Addr(); p.Contains(a) && err == nil; a = a.Next() {
			var ln net.Listener
			ln, err = net.Listen("tcp", netip.AddrPortFrom(a, uint16(ac.port)).String())
			if err == nil {
				lns = append(lns, ln)
				ac.port = ln.Addr().(*net.TCPAddr).Port
			}
		}
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
			if attempt == 5 {
				t.Fatal(err)
			}
			ac.port = 0 // that port is taken on one address: another
			continue
		}
		for _, ln := range lns {
			t.Cleanup(func() { ln.Close() })
			a := netip.MustParseAddrPort(ln.Addr().String()).Addr()
			wg.Go(func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					ac.mu.Lock()
					ac.at[a] = append(ac.at[a], time.Now())
					ac.mu.Unlock()
					c.Close()
				}
			})
		}
		return ac
	}
}

// accepts returns the connections each address accepted and when all of
// them did, in order.
func (ac *acceptCounter) accepts() (map[netip.Addr]int, []time.Time) {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	per := map[netip.Addr]int{}
	var all []time.Time
	for a, ts := range ac.at {
		per[a] = len(ts)
		all = append(all, ts...)
	}
	slices.SortFunc(all, time.Time.Compare)
	return per, all
}

// TestScanNetworkMappedIPv4: a range written IPv4-mapped
// (::ffff:127.44.9.0/125, in --network or networks[].cidrs) is the IPv4
// range it maps: its network and broadcast addresses are never dialled, it
// is named 127.44.9.0/29, it overlaps the same range written in IPv4, and
// its rate holds for the sweep and the probes together (real listeners
// count the connections they accept).
func TestScanNetworkMappedIPv4(t *testing.T) {
	t.Parallel()
	ac := listenRange(t, netip.MustParsePrefix("127.44.9.0/29"))

	t.Run("overlap", func(t *testing.T) {
		_, stderr, code := run(t, "scan", "--network", fmt.Sprintf("::ffff:127.44.9.0/125,%d", ac.port), "--network", fmt.Sprintf("127.44.9.4/30,%d", ac.port))
		if code != cli.ExitUsage || !strings.Contains(stderr, "127.44.9.4/30 overlaps 127.44.9.0/29 of networks[0]") {
			t.Errorf("exit %d, stderr %q; want 2 and the overlap refused", code, stderr)
		}
		if per, _ := ac.accepts(); len(per) != 0 {
			t.Errorf("accepted %v before the overlap was refused, want nothing dialled", per)
		}
	})
	ac.mu.Lock()
	clear(ac.at)
	ac.mu.Unlock()

	cfg := filepath.Join(t.TempDir(), "certwatch.yaml")
	const rate = 10.0
	yaml := fmt.Sprintf("networks:\n  - cidrs: [\"::ffff:127.44.9.0/125\"]\n    ports: [%d]\n    rate: %g\n    burst: 1\n    reverse_dns: false\n", ac.port, rate)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "scan", "--config", cfg, "--timeout", "5s", "--output", "json")
	if code == cli.ExitUsage {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	var r struct {
		Networks []struct {
			Name      string
			CIDRs     []string
			Addresses int `json:"addresses_tried"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v; stdout:\n%s", err, stdout)
	}
	if len(r.Networks) != 1 || r.Networks[0].Name != "127.44.9.0/29" || !slices.Equal(r.Networks[0].CIDRs, []string{"127.44.9.0/29"}) || r.Networks[0].Addresses != 6 {
		t.Errorf("networks = %+v, want 127.44.9.0/29 with 6 addresses tried", r.Networks)
	}
	per, all := ac.accepts()
	for a := netip.MustParseAddr("127.44.9.0"); a.Compare(netip.MustParseAddr("127.44.9.7")) <= 0; a = a.Next() {
		special := a.As4()[3] == 0 || a.As4()[3] == 7
		if special && per[a] != 0 || !special && per[a] == 0 {
			t.Errorf("%s accepted %d connection(s); want none at the network and broadcast addresses, some at every other", a, per[a])
		}
	}
	// At rate 10/s with a burst of 1, n connections take at least (n-1)/10 s
	// to dial. An accept is timed when the listener's goroutine returns
	// from Accept, which under load can be a scheduling delay after the
	// connection came: the first one timed late shortens the span by up
	// to an interval, so n-2 intervals are asked for. A rate kept by the
	// sweep and the probes apart would still take about half of it.
	if n := len(all); n > 2 {
		span, least := all[n-1].Sub(all[0]), time.Duration(float64(n-2)/rate*float64(time.Second))
		if span < least*9/10 {
			t.Errorf("%d connections in %v, want at least %v at %g a second (sweep and probes together)", n, span, least, rate)
		}
		t.Logf("%d connections in %v", n, span)
	}
}

package daemon_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// reportChan hands every report the daemon notifies to the test.
type reportChan chan *scan.Report

func (c reportChan) Notify(_ context.Context, r *scan.Report) error {
	select {
	case c <- r:
	default: // the test reads what it needs
	}
	return nil
}

// reportChan keeps no silences and no outbox.
func (reportChan) MarkSilenced(context.Context, *scan.Report) error { return nil }
func (reportChan) Run(ctx context.Context) error                    { <-ctx.Done(); return nil }
func (reportChan) Flush(context.Context) error                      { return nil }

// switchDialer dials whichever server to is set to.
type switchDialer struct{ to atomic.Pointer[string] }

func (d *switchDialer) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	var nd net.Dialer
	return nd.DialContext(ctx, network, *d.to.Load())
}

// TestBrokenTransferKeepsInventory runs the daemon on a real zone
// transfer that later breaks (a closing SOA serial that differs from the
// opening one): the zone is discovery_degraded, naming what was wrong, and
// its last good targets are still probed.
func TestBrokenTransferKeepsInventory(t *testing.T) {
	const text = "a A 127.0.0.1\nb A 127.0.0.1\nc A 127.0.0.1\n"
	good, err := dnstest.Start(dnstest.Zone{Name: "flaky.example", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Close() })
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	broken, err := dnstest.Start(dnstest.Zone{Name: "flaky.example", Transfer: []dns.RR{
		rr("flaky.example. 3600 IN SOA ns1.flaky.example. hostmaster.flaky.example. 7 3600 600 86400 300"),
		rr("a.flaky.example. 3600 IN A 127.0.0.1"),
		rr("flaky.example. 3600 IN SOA ns1.flaky.example. hostmaster.flaky.example. 8 3600 600 86400 300"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broken.Close() })

	dialer := &switchDialer{}
	addr := good.Addr()
	dialer.to.Store(&addr)
	src, err := dnszone.New(dnszone.Config{Zone: "flaky.example", Nameserver: good.Addr(), Dialer: dialer, Ports: []int{closedPort(t)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pass := &scan.Pass{Sources: []scan.Source{src}, Prober: probes.New(probes.Config{AllowLoopback: true, DialTimeout: time.Second, HandshakeTimeout: time.Second})}
	reports := make(reportChan, 16)
	d, err := daemon.New(daemon.Config{Discovery: "@every 1s", Probe: "@every 1s", GracePeriod: time.Second, DropThreshold: 0.5}, pass, reports, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, d)
	defer stop()

	next := func(what string, ok func(*scan.Report) bool) *scan.Report {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case r := <-reports:
				if ok(r) {
					return r
				}
			case <-deadline:
				t.Fatalf("no report with %s within 20s", what)
			}
		}
	}
	next("the zone's 3 targets", func(r *scan.Report) bool { return r.Targets == 3 })

	addr = broken.Addr()
	dialer.to.Store(&addr)
	r := next("discovery_degraded", func(r *scan.Report) bool { return len(findingsOf(r, policy.DiscoveryDegraded)) > 0 })
	deg := findingsOf(r, policy.DiscoveryDegraded)
	if r.Targets != 3 {
		t.Errorf("report after the transfer broke probed %d targets, want the last good 3", r.Targets)
	}
	want := fmt.Sprintf("zone flaky.example: AXFR from %s: closing SOA serial 8 differs from the opening serial 7", good.Addr())
	if len(deg) != 1 || deg[0].Name != "dnszone:flaky.example" || !strings.Contains(deg[0].Message, want) {
		t.Errorf("discovery_degraded = %+v, want one for dnszone:flaky.example saying %q", deg, want)
	}
}

// closedPort returns a loopback port that refuses connections until the
// test ends.
func closedPort(t *testing.T) int {
	t.Helper()
	return int(certtest.RefusingAddr(t, netip.MustParseAddr("127.0.0.1")).Port())
}

package dnszone_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/internal/knottest"
)

// delegatingZone is corp.example as knot serves it: three delegations,
// each with glue on another loopback address: svc (a TSIG-signed child
// that transfers), closed (a child that refuses) and loop (a chain of
// children each delegating one level deeper to the same server, deeper
// than any bound).
const delegatingZone = `
@          SOA  ns1 hostmaster 1 3600 600 86400 300
@          NS   ns1
ns1        A    127.0.0.1
www        A    127.0.0.1
svc        NS   ns.svc
ns.svc     A    127.0.2.2
closed     NS   ns.closed
ns.closed  A    127.0.2.3
loop       NS   ns.loop
ns.loop    A    127.0.2.2
`

// loopZone is one level of the loop chain: a host, and a delegation of
// x.<zone> back to the same server.
const loopZone = `
@     NS  ns
ns    A   127.0.2.2
h     A   127.0.2.20
x     NS  ns.x
ns.x  A   127.0.2.2
`

// startDelegations starts knot serving corp.example (TSIG only) and two
// in-process servers for its children on 127.0.2.2 and 127.0.2.3 at one
// port, which it returns.
func startDelegations(t *testing.T) (*knottest.Knot, int) {
	t.Helper()
	k := knottest.Start(t, knottest.Zone{Name: "corp.example", Text: delegatingZone, Transfer: knottest.TransferTSIG})
	key := &dnstest.TSIG{Name: k.Key.Name, Algorithm: k.Key.Algorithm, Secret: k.Key.Secret}
	zones := []dnstest.Zone{{Name: "svc.corp.example", TSIG: key, Text: `
@    NS  ns
ns   A   127.0.2.2
api  A   127.0.2.10
*.apps A 127.0.2.11
`}}
	for z := "loop.corp.example"; strings.Count(z, "x.") < 5; z = "x." + z {
		zones = append(zones, dnstest.Zone{Name: z, Text: loopZone})
	}
	child, err := dnstest.StartAt("127.0.2.2:0", zones...)
	if err != nil {
		t.Fatalf("dnstest.StartAt: %v", err)
	}
	t.Cleanup(func() { child.Close() })
	_, portText, _ := net.SplitHostPort(child.Addr())
	port, _ := strconv.Atoi(portText)
	closed, err := dnstest.StartAt(net.JoinHostPort("127.0.2.3", portText), dnstest.Zone{Name: "closed.corp.example", RefuseTransfer: true})
	if err != nil {
		t.Fatalf("dnstest.StartAt: %v", err)
	}
	t.Cleanup(func() { closed.Close() })
	return k, port
}

// TestFollowDelegations: a zone on knot delegating to other servers
// yields its children's names as its own (transferred with its TSIG key
// from the glue addresses), a child that refuses is a coverage gap naming
// the zone, its name servers and the fix, and a chain of delegations
// deeper than the bound stops there, loudly.
func TestFollowDelegations(t *testing.T) {
	t.Parallel()
	k, port := startDelegations(t)
	key := &dnszone.TSIG{Name: k.Key.Name, Algorithm: k.Key.Algorithm, Secret: k.Key.Secret}
	base := dnszone.Config{Zone: "corp.example", Nameserver: k.Addr, TSIG: key, DelegationPort: port, FollowDelegations: true, AllowLoopback: true}

	t.Run("followed, refused and bounded", func(t *testing.T) {
		t.Parallel()
		y, err := newSource(t, base).Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		var names []string
		for _, tg := range y.Targets {
			names = append(names, tg.Name)
			if len(tg.Sources) != 1 || tg.Sources[0] != "dnszone:corp.example" {
				t.Errorf("target %s: sources %v, want the parent's", tg.Name, tg.Sources)
			}
		}
		want := []string{"*.apps.svc.corp.example", "api.svc.corp.example", "h.loop.corp.example", "h.x.loop.corp.example", "h.x.x.loop.corp.example",
			"ns.loop.corp.example", "ns.svc.corp.example", "ns.x.loop.corp.example", "ns.x.x.loop.corp.example", "ns1.corp.example", "www.corp.example"}
		if d := cmp.Diff(want, names); d != "" {
			t.Errorf("target names (-want +got):\n%s", d)
		}
		var watched []string
		for _, w := range y.Inventory.Watched {
			watched = append(watched, w.Zone+"<"+w.Parent)
		}
		wantWatched := []string{"corp.example<", "loop.corp.example<corp.example", "svc.corp.example<corp.example",
			"x.loop.corp.example<loop.corp.example", "x.x.loop.corp.example<x.loop.corp.example"}
		if d := cmp.Diff(wantWatched, watched); d != "" {
			t.Errorf("watched zones (-want +got):\n%s", d)
		}
		if len(y.Inventory.Gaps) != 2 {
			t.Fatalf("gaps = %+v, want the refused child and the loop's bound", y.Inventory.Gaps)
		}
		refused, deep := y.Inventory.Gaps[0], y.Inventory.Gaps[1]
		if refused.Zone != "closed.corp.example" || refused.Reason != found.GapDelegationRefused || refused.Parent != "corp.example" ||
			!cmp.Equal(refused.Nameservers, []string{"ns.closed.corp.example"}) || !cmp.Equal(refused.Servers, []string{net.JoinHostPort("127.0.2.3", strconv.Itoa(port))}) ||
			!strings.Contains(refused.Detail, "not authorized by 127.0.2.3") || !strings.Contains(refused.Fix, "allow transfers from this host, or add the zone with its own nameserver/tsig") {
			t.Errorf("refused child: %+v", refused)
		}
		// What failed, and once what to do: the transfer's own advice
		// (set tsig:, for a zone that has no entry to set it in) is not
		// repeated before the gap's fix.
		if strings.Contains(refused.Detail, " — ") || strings.Contains(refused.Detail, "allow transfers") {
			t.Errorf("refused child's detail %q repeats advice; its fix is %q", refused.Detail, refused.Fix)
		}
		if deep.Zone != "x.x.x.loop.corp.example" || deep.Reason != found.GapDelegationLimit || !strings.Contains(deep.Detail, "max_delegation_depth 3") {
			t.Errorf("loop bound: %+v", deep)
		}
	})

	t.Run("a child configured on its own is left to its source", func(t *testing.T) {
		t.Parallel()
		c := base
		c.Configured = []string{"corp.example", "SVC.corp.example."}
		c.OutOfScope = []string{"loop.corp.example"}
		y, err := newSource(t, c).Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		for _, tg := range y.Targets {
			if strings.HasSuffix(tg.Name, ".svc.corp.example") || strings.HasSuffix(tg.Name, "loop.corp.example") {
				t.Errorf("target %s of a child not to follow", tg.Name)
			}
		}
		if len(y.Inventory.Gaps) != 1 || y.Inventory.Gaps[0].Zone != "closed.corp.example" {
			t.Errorf("gaps = %+v, want only closed.corp.example", y.Inventory.Gaps)
		}
	})

	t.Run("not followed when turned off", func(t *testing.T) {
		t.Parallel()
		c := base
		c.FollowDelegations = false
		y, err := newSource(t, c).Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		if len(y.Targets) != 2 || len(y.Inventory.Gaps) != 0 || len(y.Inventory.Watched) != 1 {
			t.Errorf("Discover = %d targets, gaps %+v, watched %+v; want the zone's 2 names alone", len(y.Targets), y.Inventory.Gaps, y.Inventory.Watched)
		}
	})

	t.Run("loopback name servers are not asked unless allowed", func(t *testing.T) {
		t.Parallel()
		c := base
		c.AllowLoopback = false
		y, err := newSource(t, c).Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		if len(y.Inventory.Watched) != 1 || len(y.Inventory.Gaps) != 3 {
			t.Fatalf("watched %+v, gaps %+v; want the zone alone and a gap per child", y.Inventory.Watched, y.Inventory.Gaps)
		}
		for _, g := range y.Inventory.Gaps {
			if g.Reason != found.GapDelegationFailed || !strings.Contains(g.Detail, "loopback (probe.allow_loopback is off)") {
				t.Errorf("gap %+v, want one saying the loopback name server is not asked", g)
			}
		}
	})

	t.Run("count bound", func(t *testing.T) {
		t.Parallel()
		c := base
		c.MaxDelegations = 1
		y, err := newSource(t, c).Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		var limit []found.Gap
		for _, g := range y.Inventory.Gaps {
			if g.Reason == found.GapDelegationLimit && g.Parent == "corp.example" {
				limit = append(limit, g)
			}
		}
		if len(limit) != 1 || !strings.Contains(limit[0].Detail, "2 child zones beyond max_delegations 1") || !strings.Contains(limit[0].Detail, "loop.corp.example, svc.corp.example") {
			t.Errorf("count gaps = %+v", limit)
		}
	})
}

// TestDelegationWithoutGlue: a child whose only name server lies inside
// it, with no glue in the parent, can never be reached (its address is in
// the zone it serves): a gap saying so, without asking any resolver.
func TestDelegationWithoutGlue(t *testing.T) {
	t.Parallel()
	srv := startServer(t, dnstest.Zone{Name: "p.example", Text: "www A 127.0.0.1\nloopy NS ns.loopy\n"})
	y, err := newSource(t, dnszone.Config{Zone: "p.example", Nameserver: srv.Addr(), FollowDelegations: true, AllowLoopback: true, Resolver: "127.0.0.1:1"}).Discover(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if len(y.Inventory.Gaps) != 1 {
		t.Fatalf("gaps = %+v, want one for loopy.p.example", y.Inventory.Gaps)
	}
	g := y.Inventory.Gaps[0]
	if g.Zone != "loopy.p.example" || g.Reason != found.GapDelegationFailed || !strings.Contains(g.Detail, "lies in the zone it serves and the parent holds no glue") {
		t.Errorf("gap = %+v", g)
	}
}

// TestDelegationToRoute53: a child delegated to Route 53's name servers
// cannot be transferred (Route 53 answers no AXFR), so none is asked.
// Discover leaves it until every source of the pass is read
// (Yield.Delegating); Follow with nothing else read, like Stream (the zone
// alone), makes it a gap saying to read the hosted zone from Route 53
// instead.
func TestDelegationToRoute53(t *testing.T) {
	t.Parallel()
	srv := startServer(t, dnstest.Zone{Name: "p.example", Text: "www A 127.0.0.1\ncloud NS ns-1.awsdns-01.org.\ncloud NS ns-2.awsdns-02.co.uk.\n"})
	s := newSource(t, dnszone.Config{Zone: "p.example", Nameserver: srv.Addr(), FollowDelegations: true, AllowLoopback: true, Resolver: "127.0.0.1:1"})
	y, err := s.Discover(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if len(y.Inventory.Gaps) != 0 {
		t.Errorf("Discover gaps = %+v, want none before every source is read", y.Inventory.Gaps)
	}
	want := []found.Delegating{{Zone: "p.example", Source: "dnszone:p.example", Delegations: []found.Delegation{{Zone: "cloud.p.example",
		Nameservers: []found.Nameserver{{Name: "ns-1.awsdns-01.org"}, {Name: "ns-2.awsdns-02.co.uk"}}}}}}
	if d := cmp.Diff(want, y.Delegating); d != "" {
		t.Errorf("Delegating (-want +got):\n%s", d)
	}
	followed := s.Follow(context.Background(), y.Delegating, found.Read{})
	_, _, streamed, err := s.Stream(context.Background())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	for how, gaps := range map[string][]found.Gap{"Follow": followed.Inventory.Gaps, "Stream": streamed.Gaps} {
		if len(gaps) != 1 {
			t.Errorf("%s: gaps = %+v, want one for cloud.p.example", how, gaps)
			continue
		}
		g := gaps[0]
		if g.Zone != "cloud.p.example" || g.Parent != "p.example" || g.Reason != found.GapDelegationRefused || len(g.Servers) != 0 ||
			!strings.Contains(g.Detail, "Route 53's, which answer no zone transfer") || !strings.Contains(g.Fix, "read it from Route 53 instead") {
			t.Errorf("%s: gap = %+v", how, g)
		}
	}
}

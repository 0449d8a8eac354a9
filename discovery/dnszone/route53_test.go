package dnszone_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/knottest"
	"github.com/certwatch/certwatch/scan"
)

// route53Parent is p.example as knot serves it: cloud delegated to Route
// 53's name servers, and team to knot itself (glue 127.0.0.1), whose zone
// delegates cloud.team.p.example to Route 53 in turn. Host addresses are
// in 127.0.53.0/24, which no other test uses (discovery probes nothing).
const route53Parent = `
@        SOA  ns hostmaster 1 3600 600 86400 300
@        NS   ns
ns       A    127.0.53.53
www      A    127.0.53.1
cloud    NS   ns-1.awsdns-01.org.
cloud    NS   ns-2.awsdns-02.co.uk.
team     NS   ns.team
ns.team  A    127.0.0.1
`

const route53Team = `
@        SOA  ns hostmaster 1 3600 600 86400 300
@        NS   ns
ns       A    127.0.53.54
app      A    127.0.53.2
cloud    NS   ns-3.awsdns-03.com.
cloud    NS   ns-4.awsdns-04.net.
`

// TestTransferredDelegationToRoute53: a transferred zone (knot, AXFR)
// delegates cloud.p.example, and its followed child team.p.example
// delegates cloud.team.p.example, to Route 53's name servers. When the
// pass also reads those zones from Route 53 as public hosted zones, they
// are covered: listed as watched via route53 with the zone that delegates
// each, no gap. Read by no source, read only as private hosted zones, or
// held by an account whose read failed, each stays a delegation_refused
// gap saying why.
func TestTransferredDelegationToRoute53(t *testing.T) {
	awstest.Isolate(t)
	k := knottest.Start(t,
		knottest.Zone{Name: "p.example", Transfer: knottest.TransferLoopback, Text: route53Parent},
		knottest.Zone{Name: "team.p.example", Transfer: knottest.TransferLoopback, Text: route53Team})
	_, portText, _ := net.SplitHostPort(k.Addr)
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatal(err)
	}

	// discoverDepth runs a pass over the zone, following delegations at
	// most maxDepth levels deep (0: the default), and the Route 53 fake
	// srv holds (nil: the zone alone).
	discoverDepth := func(t *testing.T, srv *awstest.Server, maxDepth int) ([]scan.SourceResult, found.Inventory) {
		t.Helper()
		zone := newSource(t, dnszone.Config{Zone: "p.example", Nameserver: k.Addr, FollowDelegations: true, MaxDepth: maxDepth,
			DelegationPort: port, AllowLoopback: true, Resolver: "127.0.0.1:1"})
		sources := []scan.Source{zone}
		if srv != nil {
			cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			r53, err := route53.New(route53.Config{Endpoint: srv.URL, RateLimit: 1000}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			sources = append(sources, r53)
		}
		p := &scan.Pass{Sources: sources}
		_, results, err := p.Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		return results, p.Inventory()
	}
	discover := func(t *testing.T, srv *awstest.Server) ([]scan.SourceResult, found.Inventory) {
		t.Helper()
		return discoverDepth(t, srv, 0)
	}
	hosted := func(private bool) *awstest.Server {
		srv := awstest.NewServer()
		t.Cleanup(srv.Close)
		var vpcs []awstest.VPC
		if private {
			vpcs = []awstest.VPC{{ID: "vpc-1", Region: "eu-west-1"}}
		}
		srv.Route53.AddZone(
			awstest.Zone{ID: "ZCLOUD", Name: "cloud.p.example", Private: private, VPCs: vpcs,
				Records: []awstest.RecordSet{{Name: "api.cloud.p.example", Type: "A", TTL: 300, Values: []string{"127.0.53.3"}}}},
			awstest.Zone{ID: "ZTEAM", Name: "cloud.team.p.example", Private: private, VPCs: vpcs})
		return srv
	}
	children := []string{"cloud.p.example", "cloud.team.p.example"}

	t.Run("covered by public hosted zones", func(t *testing.T) {
		results, inv := discover(t, hosted(false))
		if len(inv.Gaps) != 0 {
			t.Errorf("gaps = %+v, want none: both children are hosted zones read in the pass", inv.Gaps)
		}
		var watched []string
		for _, w := range inv.Watched {
			watched = append(watched, strings.Join([]string{w.Zone, w.Parent, w.Via, w.Source}, " "))
		}
		slices.Sort(watched)
		want := []string{
			"cloud.p.example p.example route53 route53:cloud.p.example",
			"cloud.team.p.example team.p.example route53 route53:cloud.team.p.example",
			"p.example   dnszone:p.example",
			"team.p.example p.example  dnszone:p.example",
		}
		if d := cmp.Diff(want, watched); d != "" {
			t.Errorf("watched zones (-want +got):\n%s", d)
		}
		if results[0].Targets != 4 || results[1].Targets != 1 {
			t.Errorf("results = %+v, want ns, www, ns.team and app from the zone, api.cloud from Route 53", results)
		}
	})

	t.Run("read by no source", func(t *testing.T) {
		srv := awstest.NewServer()
		t.Cleanup(srv.Close)
		_, inv := discover(t, srv)
		checkRoute53Gaps(t, inv, children, "", "read it from Route 53 instead")
	})

	t.Run("read only as private hosted zones", func(t *testing.T) {
		_, inv := discover(t, hosted(true))
		checkRoute53Gaps(t, inv, children, " (a private one was, but Route 53's name servers answer only for public ones)", "read it from Route 53 instead")
	})

	t.Run("the account hosting them failed", func(t *testing.T) {
		srv := hosted(false)
		srv.Route53.Deny(awstest.DefaultAccount)
		results, inv := discover(t, srv)
		if !strings.Contains(results[1].Error, "AccessDenied") {
			t.Fatalf("results = %+v, want route53 failed with AccessDenied", results)
		}
		checkRoute53Gaps(t, inv, children, ", and Route 53 sources that may host it failed (route53: route53 list hosted zones: ",
			"fix the access of route53 (its error above), whose hosted zones would cover it; or read it from Route 53 instead")
	})

	t.Run("the zone alone", func(t *testing.T) {
		_, inv := discover(t, nil)
		checkRoute53Gaps(t, inv, children, "", "read it from Route 53 instead")
	})

	// A bound comes first: cloud.team.p.example, two levels down, is
	// beyond max_delegation_depth 1 wherever it is hosted.
	t.Run("beyond max_delegation_depth", func(t *testing.T) {
		_, inv := discoverDepth(t, nil, 1)
		checkRoute53Gaps(t, found.Inventory{Watched: inv.Watched, Gaps: slices.DeleteFunc(slices.Clone(inv.Gaps), func(g found.Gap) bool {
			return g.Zone == "cloud.team.p.example"
		})}, children[:1], "", "read it from Route 53 instead")
		i := slices.IndexFunc(inv.Gaps, func(g found.Gap) bool { return g.Zone == "cloud.team.p.example" })
		if i < 0 {
			t.Fatalf("gaps = %+v, want one for cloud.team.p.example", inv.Gaps)
		}
		if g := inv.Gaps[i]; g.Reason != found.GapDelegationLimit || g.Parent != "team.p.example" || !strings.Contains(g.Detail, "deeper than max_delegation_depth 1") {
			t.Errorf("gap of cloud.team.p.example = %+v, want delegation_limit: deeper than max_delegation_depth 1", g)
		}
	})
}

// checkRoute53Gaps checks that inv has a delegation_refused gap for each
// of zones, none watched, whose detail says no public hosted zone of its
// name was read and then note, and whose fix starts with fix.
func checkRoute53Gaps(t *testing.T, inv found.Inventory, zones []string, note, fix string) {
	t.Helper()
	for _, w := range inv.Watched {
		if slices.Contains(zones, w.Zone) {
			t.Errorf("%s watched (%+v), want a gap", w.Zone, w)
		}
	}
	if len(inv.Gaps) != len(zones) {
		t.Errorf("gaps = %+v, want one for each of %v", inv.Gaps, zones)
	}
	parents := map[string]string{"cloud.p.example": "p.example", "cloud.team.p.example": "team.p.example"}
	for _, zone := range zones {
		i := slices.IndexFunc(inv.Gaps, func(g found.Gap) bool { return g.Zone == zone })
		if i < 0 {
			t.Errorf("no gap for %s", zone)
			continue
		}
		g := inv.Gaps[i]
		detail := "zone " + zone + ": its name servers are Route 53's, which answer no zone transfer (AXFR); no public hosted zone " + zone + " was read in this run" + note
		if g.Reason != found.GapDelegationRefused || g.Parent != parents[zone] || g.Source != "dnszone:p.example" || len(g.Servers) != 0 ||
			!strings.HasPrefix(g.Detail, detail) || !strings.HasPrefix(g.Fix, fix) {
			t.Errorf("gap of %s = %+v\nwant detail starting %q, fix starting %q", zone, g, detail, fix)
		}
	}
}

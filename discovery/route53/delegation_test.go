package route53_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/knottest"
	"github.com/certwatch/certwatch/scan"
)

// delegatedZones are the children example.com delegates to knot:
// team.example.com (transfers, and delegates deep.team.example.com in
// turn, which transfers too) and closed.example.com (refuses).
func delegatedZones() []knottest.Zone {
	return []knottest.Zone{
		{Name: "team.example.com", Transfer: knottest.TransferLoopback, Text: `
@        SOA  ns hostmaster 1 3600 600 86400 300
@        NS   ns
ns       A    127.0.0.1
app      A    127.0.4.1
deep     NS   ns.deep
ns.deep  A    127.0.0.1
`},
		{Name: "deep.team.example.com", Transfer: knottest.TransferLoopback, Text: `
@        SOA  ns hostmaster 1 3600 600 86400 300
@        NS   ns
ns       A    127.0.0.1
db       A    127.0.4.2
`},
		{Name: "closed.example.com", Transfer: knottest.TransferDenied, Text: `
@        SOA  ns hostmaster 1 3600 600 86400 300
@        NS   ns
ns       A    127.0.0.1
secret   A    127.0.4.3
`},
	}
}

// awsNS are a Route 53 delegation set.
var awsNS = []string{"ns-1.awsdns-01.org.", "ns-2.awsdns-02.co.uk.", "ns-3.awsdns-03.com.", "ns-4.awsdns-04.net."}

// delegatingEstate is two accounts: the default one holds example.com
// (public), which delegates team and closed to knot (with glue), shop to
// a public hosted zone of the other account, internal to a zone that
// exists only as a private hosted zone, and other to Route 53 servers of a
// zone nobody reads; and corp.internal (private), which delegates
// dev.corp.internal to a private hosted zone of the same account.
func delegatingEstate(srv *awstest.Server) {
	srv.Route53.AddZone(
		awstest.Zone{ID: "ZPUB", Name: "example.com", Records: []awstest.RecordSet{
			{Name: "www.example.com", Type: "A", TTL: 300, Values: a("127.0.4.10")},
			{Name: "team.example.com", Type: "NS", TTL: 300, Values: a("ns.team.example.com.")},
			{Name: "ns.team.example.com", Type: "A", TTL: 300, Values: a("127.0.0.1")},
			{Name: "closed.example.com", Type: "NS", TTL: 300, Values: a("ns.closed.example.com.")},
			{Name: "ns.closed.example.com", Type: "A", TTL: 300, Values: a("127.0.0.1")},
			{Name: "shop.example.com", Type: "NS", TTL: 300, Values: awsNS},
			{Name: "internal.example.com", Type: "NS", TTL: 300, Values: awsNS},
			{Name: "other.example.com", Type: "NS", TTL: 300, Values: awsNS},
		}},
		awstest.Zone{ID: "ZINT", Name: "internal.example.com", Private: true, VPCs: []awstest.VPC{{ID: "vpc-1", Region: "eu-west-1"}},
			Records: []awstest.RecordSet{{Name: "db.internal.example.com", Type: "A", TTL: 300, Values: a("10.0.0.5")}}},
		awstest.Zone{ID: "ZCORP", Name: "corp.internal", Private: true, VPCs: []awstest.VPC{{ID: "vpc-1", Region: "eu-west-1"}},
			Records: []awstest.RecordSet{{Name: "dev.corp.internal", Type: "NS", TTL: 300, Values: awsNS}}},
		awstest.Zone{ID: "ZDEV", Name: "dev.corp.internal", Private: true, VPCs: []awstest.VPC{{ID: "vpc-1", Region: "eu-west-1"}},
			Records: []awstest.RecordSet{{Name: "api.dev.corp.internal", Type: "A", TTL: 300, Values: a("10.0.0.6")}}},
		awstest.Zone{Account: "222222222222", ID: "ZSHOP", Name: "shop.example.com",
			Records: []awstest.RecordSet{{Name: "api.shop.example.com", Type: "A", TTL: 300, Values: a("127.0.4.20")}}},
	)
}

// TestFollowDelegations: the delegations of Route 53 hosted zones are
// followed as a transferred zone's are. A child on another server is
// transferred from its glue address and its names are targets of the
// delegating zone (on its ports, through its filter), its own child
// too; one that refuses is a coverage gap
// naming the zone, its name server and the fix; one that is a hosted zone
// of the same kind read in the run (in the other account) is covered by
// it, no gap; one whose Route 53 servers serve a zone no source reads (or
// only a private zone of that name, which the internet never sees) is a
// gap saying to read it from Route 53, without asking those servers.
func TestFollowDelegations(t *testing.T) {
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	const role = "arn:aws:iam::222222222222:role/certwatch"
	srv.STS.AddRole(awstest.Role{ARN: role})
	delegatingEstate(srv)
	k := knottest.Start(t, delegatedZones()...)
	_, portText, _ := net.SplitHostPort(k.Addr)
	port := mustAtoi(t, portText)
	knotServer := []string{k.Addr}

	noNS, err := discovery.NewFilter(nil, []string{"ns.*"})
	if err != nil {
		t.Fatal(err)
	}
	sources := func(follow *dnszone.Config) []scan.Source {
		var out []scan.Source
		for _, ac := range []awsaccount.Config{{}, {Role: awsaccount.Role{ARN: role}, STSEndpoint: srv.URL}} {
			ac.MaxBackoff = time.Millisecond
			cfg, err := awsaccount.Load(context.Background(), ac)
			if err != nil {
				t.Fatal(err)
			}
			s, err := route53.New(route53.Config{Account: ac.Label(), Endpoint: srv.URL, RateLimit: 1000, Ports: []int{8443}, Filter: noNS, Delegations: follow}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}

	t.Run("followed, covered and refused", func(t *testing.T) {
		p := &scan.Pass{Sources: sources(&dnszone.Config{DelegationPort: port, AllowLoopback: true, Resolver: "127.0.0.1:1"})}
		targets, results, err := p.Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		var got []string
		for _, tg := range targets {
			got = append(got, tg.Name+" "+strings.Join(tg.Sources, ","))
			if tg.Port != 8443 {
				t.Errorf("target %s on port %d, want the source's 8443", tg.Name, tg.Port)
			}
		}
		want := []string{
			"api.dev.corp.internal route53:dev.corp.internal(private)",
			"api.shop.example.com route53:222222222222/shop.example.com",
			"app.team.example.com route53:example.com",
			"db.deep.team.example.com route53:example.com",
			"db.internal.example.com route53:internal.example.com(private)",
			"www.example.com route53:example.com",
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("targets (-want +got):\n%s", d)
		}
		if results[0].Targets != 5 || results[1].Targets != 1 {
			t.Errorf("results = %+v, want the children's targets counted for the delegating account", results)
		}

		inv := p.Inventory()
		var watched []string
		for _, w := range inv.Watched {
			watched = append(watched, strings.Join([]string{w.Zone, w.Parent, w.Via, w.Source, strings.Join(w.Nameservers, ",")}, " "))
		}
		slices.Sort(watched)
		wantWatched := []string{
			"deep.team.example.com team.example.com  route53:example.com " + k.Addr,
			"dev.corp.internal corp.internal route53 route53:dev.corp.internal(private) ",
			"shop.example.com example.com route53 route53:222222222222/shop.example.com ",
			"team.example.com example.com  route53:example.com " + k.Addr,
		}
		if d := cmp.Diff(wantWatched, watched); d != "" {
			t.Errorf("watched zones (-want +got):\n%s", d)
		}

		gaps := map[string]found.Gap{}
		for _, g := range inv.Gaps {
			gaps[g.Zone] = g
		}
		if len(gaps) != 3 {
			t.Errorf("gaps = %+v, want closed, internal and other.example.com", inv.Gaps)
		}
		closed := gaps["closed.example.com"]
		if closed.Reason != found.GapDelegationRefused || closed.Parent != "example.com" || closed.Source != "route53:example.com" ||
			!cmp.Equal(closed.Nameservers, []string{"ns.closed.example.com"}) || !cmp.Equal(closed.Servers, knotServer) ||
			!strings.Contains(closed.Detail, "not authorized by "+k.Addr) || closed.Fix != "allow transfers from this host, or add the zone with its own nameserver/tsig" {
			t.Errorf("refused child: %+v", closed)
		}
		for _, zone := range []string{"internal.example.com", "other.example.com"} {
			g := gaps[zone]
			if g.Reason != found.GapDelegationRefused || g.Parent != "example.com" || len(g.Servers) != 0 ||
				!strings.Contains(g.Detail, "Route 53's, which answer no zone transfer (AXFR); no public hosted zone "+zone+" was read in this run") ||
				!strings.HasPrefix(g.Fix, "read it from Route 53 instead: enable aws.route53 for the account that hosts it") {
				t.Errorf("child on Route 53 servers nobody reads: %+v", g)
			}
		}
		if g := gaps["internal.example.com"]; !strings.Contains(g.Detail, "(a private one was, but Route 53's name servers answer only for public ones)") {
			t.Errorf("child read only as a private hosted zone: detail %q does not say so", g.Detail)
		}
	})

	t.Run("bounds count from the hosted zone", func(t *testing.T) {
		p := &scan.Pass{Sources: sources(&dnszone.Config{DelegationPort: port, AllowLoopback: true, Resolver: "127.0.0.1:1", MaxDepth: 1})}
		if _, _, err := p.Discover(context.Background()); err != nil {
			t.Fatalf("Discover: %v", err)
		}
		i := slices.IndexFunc(p.Inventory().Gaps, func(g found.Gap) bool { return g.Zone == "deep.team.example.com" })
		if i < 0 {
			t.Fatalf("gaps = %+v, want deep.team.example.com beyond the depth bound", p.Inventory().Gaps)
		}
		if g := p.Inventory().Gaps[i]; g.Reason != found.GapDelegationLimit || g.Parent != "team.example.com" ||
			!strings.Contains(g.Detail, "2 levels below example.com, deeper than max_delegation_depth 1") {
			t.Errorf("depth gap = %+v", g)
		}
	})

	t.Run("not followed when turned off", func(t *testing.T) {
		p := &scan.Pass{Sources: sources(nil)}
		targets, _, err := p.Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		inv := p.Inventory()
		if len(targets) != 4 || len(inv.Watched)+len(inv.Gaps) != 0 {
			t.Errorf("Discover = %v, watched %+v, gaps %+v; want the hosted zones' 4 names alone", names(targets), inv.Watched, inv.Gaps)
		}
	})

	// Last: the fake denies the other account from here on.
	t.Run("a failed account covers nothing", func(t *testing.T) {
		srv.Route53.Deny("222222222222")
		p := &scan.Pass{Sources: sources(&dnszone.Config{DelegationPort: port, AllowLoopback: true, Resolver: "127.0.0.1:1"})}
		_, results, err := p.Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		if !strings.Contains(results[1].Error, "AccessDenied") {
			t.Fatalf("results = %+v, want route53:222222222222 failed with AccessDenied", results)
		}
		inv := p.Inventory()
		if i := slices.IndexFunc(inv.Watched, func(w found.WatchedZone) bool { return w.Zone == "shop.example.com" }); i >= 0 {
			t.Errorf("shop.example.com watched as %+v, though the account hosting it failed", inv.Watched[i])
		}
		i := slices.IndexFunc(inv.Gaps, func(g found.Gap) bool { return g.Zone == "shop.example.com" })
		if i < 0 {
			t.Fatalf("gaps = %+v, want shop.example.com, whose account failed", inv.Gaps)
		}
		g := inv.Gaps[i]
		if g.Reason != found.GapDelegationRefused || g.Parent != "example.com" ||
			!strings.Contains(g.Detail, "no public hosted zone shop.example.com was read in this run, and Route 53 sources that may host it failed (route53:222222222222: route53 list hosted zones (account 222222222222)") ||
			!strings.Contains(g.Detail, "AccessDenied") ||
			!strings.HasPrefix(g.Fix, "fix the access of route53:222222222222 (its error above), whose hosted zones would cover it; or read it from Route 53 instead") {
			t.Errorf("gap of the child whose account failed = %+v", g)
		}
	})
}

func names(ts []discovery.Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

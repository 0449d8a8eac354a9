package route53_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/probes"
)

func newSource(t *testing.T, c route53.Config) (*route53.Source, *awstest.Server) {
	t.Helper()
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	if c.Endpoint == "" {
		c.Endpoint = srv.URL
	}
	if c.RateLimit == 0 {
		c.RateLimit = 1000
	}
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := route53.New(c, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, srv
}

func a(ips ...string) []string { return ips }

func weight(w int64) *int64 { return &w }

func addrs(ips ...string) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		out = append(out, netip.MustParseAddr(ip))
	}
	return out
}

// testZones is one account's zones: a public zone with every kind of
// record, a private zone of the same name (split horizon) and a private
// internal zone.
func testZones() []awstest.Zone {
	return []awstest.Zone{
		{ID: "ZPUBLIC", Name: "example.com", Records: []awstest.RecordSet{
			{Name: "example.com", Type: "A", Alias: &awstest.Alias{DNSName: "www.example.com", HostedZoneID: "ZPUBLIC"}},
			{Name: "www.example.com", Type: "A", TTL: 300, Values: a("192.0.2.1", "192.0.2.2")},
			{Name: "www.example.com", Type: "AAAA", TTL: 300, Values: a("2001:db8::1")},
			{Name: "api.example.com", Type: "A", TTL: 60, SetIdentifier: "blue", Weight: weight(10), Values: a("192.0.2.10")},
			{Name: "api.example.com", Type: "A", TTL: 60, SetIdentifier: "green", Weight: weight(90), Values: a("192.0.2.11")},
			{Name: "geo.example.com", Type: "A", TTL: 60, SetIdentifier: "eu", Region: "eu-west-1", Values: a("192.0.2.20")},
			{Name: "geo.example.com", Type: "A", TTL: 60, SetIdentifier: "us", Region: "us-east-1", Values: a("192.0.2.21")},
			{Name: "fo.example.com", Type: "A", TTL: 60, SetIdentifier: "primary", Failover: "PRIMARY", Values: a("192.0.2.30")},
			{Name: "fo.example.com", Type: "A", SetIdentifier: "secondary", Failover: "SECONDARY",
				Alias: &awstest.Alias{DNSName: "api.example.com", HostedZoneID: "ZPUBLIC"}},
			{Name: "app.example.com", Type: "CNAME", TTL: 300, Values: a("www.example.com.")},
			{Name: "cdn.example.com", Type: "CNAME", TTL: 300, Values: a("d111111abcdef8.cloudfront.net.")},
			{Name: "lb.example.com", Type: "A", Alias: &awstest.Alias{
				DNSName: "dualstack.web-123.eu-west-1.elb.amazonaws.com", HostedZoneID: "Z32O12XQLNTSW2", EvaluateTargetHealth: true}},
			{Name: "*.example.com", Type: "A", TTL: 300, Values: a("192.0.2.99")},
			{Name: "_https._tcp.example.com", Type: "SRV", TTL: 300, Values: a("10 5 8443 svc.example.com.")},
			{Name: "_sips._tcp.example.com", Type: "SRV", TTL: 300, Values: a("10 5 5061 sip.example.com.")},
			{Name: "_ldaps._tcp.example.com", Type: "SRV", TTL: 300, Values: a("0 0 636 ldap.partner.example.")},
			{Name: "_imaps._tcp.example.com", Type: "SRV", TTL: 300, Values: a("0 0 0 .")},
			{Name: "svc.example.com", Type: "A", TTL: 300, Values: a("192.0.2.50")},
			{Name: "sub.example.com", Type: "NS", TTL: 300, Values: a("ns1.sub.example.com.")},
			{Name: "ns1.sub.example.com", Type: "A", TTL: 300, Values: a("192.0.2.53")},
			{Name: "delegated.example.com", Type: "CNAME", TTL: 300, Values: a("www.sub.example.com.")},
			{Name: "_3639ac514e785e898d2646601fa951d5.example.com", Type: "CNAME", TTL: 300,
				Values: a("_98d4ae8d6a2b4c1e.mhbtsbpdnt.acm-validations.aws.")},
			{Name: "example.com", Type: "MX", TTL: 300, Values: a("10 mail.example.com.")},
			{Name: "example.com", Type: "TXT", TTL: 300, Values: a(`"v=spf1 -all"`)},
		}},
		{ID: "ZSPLIT", Name: "example.com", Private: true,
			VPCs: []awstest.VPC{{ID: "vpc-0a1", Region: "eu-west-1"}},
			Records: []awstest.RecordSet{
				{Name: "www.example.com", Type: "A", TTL: 300, Values: a("10.1.1.1")},
			}},
		{ID: "ZINTERNAL", Name: "internal.example", Private: true,
			VPCs: []awstest.VPC{{ID: "vpc-0a1", Region: "eu-west-1"}, {ID: "vpc-0b2", Region: "us-east-1"}},
			Records: []awstest.RecordSet{
				{Name: "db.internal.example", Type: "A", TTL: 300, Values: a("10.0.0.5")},
				{Name: "_ldap._tcp.internal.example", Type: "SRV", TTL: 300, Values: a("0 0 389 db.internal.example.")},
				{Name: "_postgresql._tcp.internal.example", Type: "SRV", TTL: 300, Values: a("0 0 5432 db.internal.example.")},
				{Name: "_xmpp-client._tcp.internal.example", Type: "SRV", TTL: 300, Values: a("5 0 5222 db.internal.example.", "10 0 5222 chat.partner.example.")},
				{Name: "loop.internal.example", Type: "CNAME", TTL: 300, Values: a("loop.internal.example.")},
				{Name: "gone.internal.example", Type: "CNAME", TTL: 300, Values: a("nothing.internal.example.")},
				{Name: "elb.internal.example", Type: "CNAME", TTL: 300, Values: a("internal-web-1.eu-west-1.elb.amazonaws.com.")},
			}},
	}
}

func TestDiscover(t *testing.T) {
	s, srv := newSource(t, route53.Config{})
	srv.Route53.SetPageSizes(1, 2)
	srv.Route53.AddZone(testZones()...)

	inv, err := s.Read(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	pub := []string{"route53:example.com"}
	split := []string{"route53:example.com", "route53:example.com(private)"}
	internal := []string{"route53:internal.example(private)"}
	want := []discovery.Target{
		{Name: "*.example.com", Port: 443, Sources: pub, Skip: "wildcard owner: no single name to probe"},
		{Name: "api.example.com", Port: 443, Addresses: addrs("192.0.2.10", "192.0.2.11"), Sources: pub},
		{Name: "app.example.com", Port: 443, Addresses: addrs("192.0.2.1", "192.0.2.2", "2001:db8::1"), Sources: pub},
		{Name: "cdn.example.com", Port: 443, Resolve: "d111111abcdef8.cloudfront.net", Sources: pub},
		{Name: "db.internal.example", Port: 389, Protocol: discovery.LDAP, Addresses: addrs("10.0.0.5"), Sources: internal},
		{Name: "db.internal.example", Port: 443, Addresses: addrs("10.0.0.5"), Sources: internal},
		{Name: "db.internal.example", Port: 5432, Protocol: discovery.Postgres, Addresses: addrs("10.0.0.5"), Sources: internal},
		{Name: "delegated.example.com", Port: 443, Resolve: "www.sub.example.com", Sources: pub},
		{Name: "elb.internal.example", Port: 443, Resolve: "internal-web-1.eu-west-1.elb.amazonaws.com", Sources: internal},
		{Name: "example.com", Port: 443, Addresses: addrs("192.0.2.1", "192.0.2.2", "2001:db8::1"), Sources: pub},
		{Name: "fo.example.com", Port: 443, Addresses: addrs("192.0.2.10", "192.0.2.11", "192.0.2.30"), Sources: pub},
		{Name: "geo.example.com", Port: 443, Addresses: addrs("192.0.2.20", "192.0.2.21"), Sources: pub},
		{Name: "gone.internal.example", Port: 443, Resolve: "nothing.internal.example", Sources: internal},
		// XMPP: the domain, at each SRV target's addresses (merged).
		{Name: "internal.example", Port: 5222, Protocol: discovery.XMPPClient, Addresses: addrs("10.0.0.5"), Resolve: "chat.partner.example", Sources: internal},
		{Name: "lb.example.com", Port: 443, Resolve: "dualstack.web-123.eu-west-1.elb.amazonaws.com", Sources: pub},
		{Name: "ldap.partner.example", Port: 636, Sources: pub},
		{Name: "loop.internal.example", Port: 443, Sources: internal, Skip: "CNAME chain loops or is longer than 16 names: no address to probe"},
		{Name: "mail.example.com", Port: 25, Protocol: discovery.SMTP, Sources: pub},
		{Name: "sip.example.com", Port: 5061, Sources: pub},
		{Name: "svc.example.com", Port: 443, Addresses: addrs("192.0.2.50"), Sources: pub},
		{Name: "svc.example.com", Port: 8443, Addresses: addrs("192.0.2.50"), Sources: pub},
		{Name: "www.example.com", Port: 443, Addresses: addrs("10.1.1.1", "192.0.2.1", "192.0.2.2", "2001:db8::1"), Sources: split},
	}
	if diff := cmp.Diff(want, inv.Targets, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}

	wantZones := []hostedzone.Zone{
		{ID: "ZPUBLIC", Name: "example.com", RecordSets: 26, ValidationRecords: []hostedzone.Record{{
			Name: "_3639ac514e785e898d2646601fa951d5.example.com", Type: "CNAME", Value: "_98d4ae8d6a2b4c1e.mhbtsbpdnt.acm-validations.aws"}},
			AWSTargets: []hostedzone.Record{
				{Name: "cdn.example.com", Type: "CNAME", Value: "d111111abcdef8.cloudfront.net"},
				{Name: "lb.example.com", Type: "ALIAS", Value: "dualstack.web-123.eu-west-1.elb.amazonaws.com"},
			}},
		{ID: "ZSPLIT", Name: "example.com", Private: true, VPCs: []hostedzone.VPC{{ID: "vpc-0a1", Region: "eu-west-1"}}, RecordSets: 3},
		{ID: "ZINTERNAL", Name: "internal.example", Private: true, RecordSets: 9,
			AWSTargets: []hostedzone.Record{{Name: "elb.internal.example", Type: "CNAME", Value: "internal-web-1.eu-west-1.elb.amazonaws.com"}},
			VPCs:       []hostedzone.VPC{{ID: "vpc-0a1", Region: "eu-west-1"}, {ID: "vpc-0b2", Region: "us-east-1"}}},
	}
	if diff := cmp.Diff(wantZones, inv.Zones); diff != "" {
		t.Errorf("zones (-want +got):\n%s", diff)
	}
	if v, ok := inv.Zones[0].CNAME("_3639AC514E785E898D2646601FA951D5.example.com."); !ok || v != "_98d4ae8d6a2b4c1e.mhbtsbpdnt.acm-validations.aws" {
		t.Errorf("CNAME lookup = %q, %v", v, ok)
	}

	// What Route 53 saw: every page of every listing, GetHostedZone only
	// for private zones, every request signed for us-east-1.
	ops := map[string]int{}
	var markers, next []string
	for _, r := range srv.Requests("route53") {
		ops[r.Operation]++
		if !r.SignatureValid || r.Region != "us-east-1" {
			t.Errorf("%s %s: signature valid %v, region %q", r.Operation, r.Path, r.SignatureValid, r.Region)
		}
		switch r.Operation {
		case "ListHostedZones":
			markers = append(markers, r.Query.Get("marker"))
		case "GetHostedZone":
			if r.Path == "/2013-04-01/hostedzone/ZPUBLIC" {
				t.Errorf("GetHostedZone for the public zone")
			}
		case "ListResourceRecordSets":
			if strings.HasSuffix(r.Path, "/ZPUBLIC/rrset") && r.Query.Get("identifier") != "" {
				next = append(next, r.Query.Get("name")+" "+r.Query.Get("type")+" "+r.Query.Get("identifier"))
			}
		}
	}
	if want := []string{"", "ZSPLIT", "ZINTERNAL"}; !slices.Equal(markers, want) {
		t.Errorf("ListHostedZones markers = %q, want %q", markers, want)
	}
	if want := map[string]int{"ListHostedZones": 3, "GetHostedZone": 2, "ListResourceRecordSets": 13 + 2 + 5}; !maps(ops, want) {
		t.Errorf("operations = %v, want %v", ops, want)
	}
	// Pages that start inside a routing set carry its identifier.
	if len(next) == 0 {
		t.Errorf("no page started with NextRecordIdentifier")
	}
	if s.Zones() != nil {
		t.Errorf("Zones before Targets = %v", s.Zones())
	}
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestTargetsKeepZones(t *testing.T) {
	s, srv := newSource(t, route53.Config{Account: "111111111111"})
	srv.Route53.AddZone(testZones()...)
	targets, err := s.Targets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) == 0 || targets[1].Sources[0] != "route53:111111111111/example.com" || s.Name() != "route53:111111111111" {
		t.Errorf("targets = %v, name %q", targets, s.Name())
	}
	if z := s.Zones(); len(z) != 3 || z[0].Account != "111111111111" {
		t.Errorf("Zones() = %+v", z)
	}
}

func TestFilters(t *testing.T) {
	zones, err := discovery.NewFilter([]string{"*.example"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names, err := discovery.NewFilter(nil, []string{"elb.*", "loop.*"})
	if err != nil {
		t.Fatal(err)
	}
	s, srv := newSource(t, route53.Config{Zones: zones, Filter: names, Ports: []int{443, 8443}})
	srv.Route53.AddZone(testZones()...)
	inv, err := s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, t := range inv.Targets {
		got = append(got, t.Key())
	}
	want := []string{"db.internal.example:389", "db.internal.example:443", "db.internal.example:5432", "db.internal.example:8443", "gone.internal.example:443", "gone.internal.example:8443", "internal.example:5222"}
	if !slices.Equal(got, want) {
		t.Errorf("targets = %v, want %v", got, want)
	}
	for _, r := range srv.Requests("route53") {
		if strings.Contains(r.Path, "ZPUBLIC") || strings.Contains(r.Path, "ZSPLIT") {
			t.Errorf("request %s for a filtered-out zone", r.Path)
		}
	}
}

func TestThrottledRunCompletes(t *testing.T) {
	s, srv := newSource(t, route53.Config{})
	srv.Route53.SetPageSizes(1, 5)
	srv.Route53.AddZone(testZones()...)
	srv.Route53.Throttle(7)
	inv, err := s.Read(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if len(inv.Zones) != 3 || len(inv.Targets) != 22 {
		t.Errorf("got %d zones, %d targets after throttling; want 3, 22", len(inv.Zones), len(inv.Targets))
	}
	var throttled int
	for _, r := range srv.Requests("route53") {
		if r.Status == 400 {
			throttled++
		}
	}
	if throttled != 7 {
		t.Errorf("%d throttled requests, want 7", throttled)
	}
}

func TestFailingZoneDoesNotStopOthers(t *testing.T) {
	tests := []struct {
		name, deny, zone, hint string
	}{
		{"record sets", "ZPUBLIC", "zone example.com (ZPUBLIC", "grant route53:ListResourceRecordSets"},
		{"private zone details", "ZINTERNAL", "zone internal.example (ZINTERNAL", "grant route53:GetHostedZone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := newSource(t, route53.Config{})
			srv.Route53.AddZone(testZones()...)
			srv.Route53.Deny(tt.deny)
			inv, err := s.Read(context.Background())
			var ze *route53.ZoneError
			if !errors.As(err, &ze) || ze.ID != tt.deny {
				t.Fatalf("err = %v, want a *ZoneError for %s", err, tt.deny)
			}
			for _, want := range []string{tt.zone, "AccessDenied", tt.hint} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if len(inv.Zones) != 2 {
				t.Errorf("%d zones, want the 2 healthy ones", len(inv.Zones))
			}
			for _, z := range inv.Zones {
				if z.ID == tt.deny {
					t.Errorf("failed zone %s listed", z.ID)
				}
			}
			if len(inv.Targets) == 0 {
				t.Errorf("no targets from the healthy zones")
			}
		})
	}
}

func TestAccountDenied(t *testing.T) {
	s, srv := newSource(t, route53.Config{Account: awstest.DefaultAccount})
	srv.Route53.AddZone(testZones()...)
	srv.Route53.Deny(awstest.DefaultAccount)
	inv, err := s.Read(context.Background())
	if err == nil || len(inv.Targets) != 0 {
		t.Fatalf("Discover = %d targets, %v; want an error", len(inv.Targets), err)
	}
	for _, want := range []string{"list hosted zones", "account 111111111111", "grant route53:ListHostedZones"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestEndpointFromEnvironment(t *testing.T) {
	for _, env := range []string{"AWS_ENDPOINT_URL_ROUTE_53", "AWS_ENDPOINT_URL"} {
		t.Run(env, func(t *testing.T) {
			awstest.Isolate(t)
			srv := awstest.NewServer()
			t.Cleanup(srv.Close)
			srv.Route53.AddZone(awstest.Zone{Name: "example.com", Records: []awstest.RecordSet{
				{Name: "www.example.com", Type: "A", TTL: 60, Values: a("192.0.2.1")}}})
			t.Setenv(env, srv.URL)
			cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			s, err := route53.New(route53.Config{RateLimit: 1000}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			inv, err := s.Read(context.Background())
			if err != nil || len(inv.Targets) != 1 {
				t.Errorf("Discover = %v, %v; want www.example.com", inv.Targets, err)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	s, srv := newSource(t, route53.Config{})
	srv.Route53.AddZone(testZones()...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if inv, err := s.Read(ctx); err == nil || len(inv.Targets) != 0 {
		t.Errorf("Discover(cancelled) = %d targets, %v; want an error", len(inv.Targets), err)
	}
}

func TestZoneContains(t *testing.T) {
	z := hostedzone.Zone{Name: "example.com"}
	for name, want := range map[string]bool{"example.com": true, "A.Example.com.": true, "badexample.com": false, "com": false} {
		if got := z.Contains(name); got != want {
			t.Errorf("Contains(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestAssumedRoleSeesItsAccount(t *testing.T) {
	const role = "arn:aws:iam::222222222222:role/certwatch"
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	srv.STS.AddRole(awstest.Role{ARN: role})
	srv.Route53.AddZone(
		awstest.Zone{Name: "default.example", Records: []awstest.RecordSet{{Name: "www.default.example", Type: "A", TTL: 60, Values: a("192.0.2.1")}}},
		awstest.Zone{Account: "222222222222", Name: "role.example", Records: []awstest.RecordSet{{Name: "www.role.example", Type: "A", TTL: 60, Values: a("192.0.2.2")}}},
	)
	ac := awsaccount.Config{Role: awsaccount.Role{ARN: role}, STSEndpoint: srv.URL, MaxBackoff: time.Millisecond}
	cfg, err := awsaccount.Load(context.Background(), ac)
	if err != nil {
		t.Fatal(err)
	}
	s, err := route53.New(route53.Config{Account: ac.Label(), Endpoint: srv.URL, RateLimit: 1000}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	targets, err := s.Targets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].Name != "www.role.example" || targets[0].Sources[0] != "route53:222222222222/role.example" {
		t.Errorf("targets = %+v, want the role account's only", targets)
	}
	session := srv.STS.Sessions()[0]
	if session.SessionName != awsaccount.DefaultSessionName {
		t.Errorf("session name %q, want the default", session.SessionName)
	}
	for _, r := range srv.Requests("route53") {
		if r.AccessKeyID != session.AccessKeyID || !r.SignatureValid {
			t.Errorf("%s signed by %q, want the assumed role's key", r.Operation, r.AccessKeyID)
		}
	}
}

func TestPublicZoneFor(t *testing.T) {
	zones := []hostedzone.Zone{
		{ID: "Z1", Name: "example.com"},
		{ID: "Z2", Name: "dev.example.com"},
		{ID: "Z3", Name: "dev.example.com", Private: true},
		{ID: "Z4", Name: "internal.example", Private: true},
	}
	tests := []struct {
		name string
		want string
	}{
		{"_abc.www.dev.example.com.", "Z2"},
		{"_ABC.example.com", "Z1"},
		{"_abc.db.internal.example", ""},
		{"_abc.example.org", ""},
	}
	for _, tt := range tests {
		z, ok := hostedzone.PublicZoneFor(zones, tt.name)
		if ok != (tt.want != "") || z.ID != tt.want {
			t.Errorf("PublicZoneFor(%q) = %q, %v; want %q", tt.name, z.ID, ok, tt.want)
		}
	}
}

// TestZoneResolvers: two private zones associated with different VPCs
// each resolve the names leaving them through their own VPC's resolver (a
// real DNS server on loopback); a zone without one is left to the prober.
func TestZoneResolvers(t *testing.T) {
	vpc1, err := dnstest.Start(dnstest.Zone{Name: "eu-west-1.elb.amazonaws.com", Text: "internal-app-1 A 10.1.0.7\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vpc1.Close() })
	vpc2, err := dnstest.Start(dnstest.Zone{Name: "eu-west-1.elb.amazonaws.com", Text: "internal-app-1 A 10.2.0.7\ninternal-app-1 AAAA fd00::7\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vpc2.Close() })
	keep := func(globs ...string) discovery.Filter {
		f, err := discovery.NewFilter(globs, nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	s, srv := newSource(t, route53.Config{Resolvers: []route53.ZoneResolver{
		{Zones: keep("vpc1.internal"), Server: vpc1.Addr(), Resolver: probes.NewResolver(vpc1.Addr(), time.Second)},
		{Zones: keep("*.vpc2.internal"), Server: vpc2.Addr(), Resolver: probes.NewResolver(vpc2.Addr(), time.Second)},
	}})
	app := []awstest.RecordSet{{Name: "app", Type: "CNAME", TTL: 60, Values: a("internal-app-1.eu-west-1.elb.amazonaws.com.")}}
	for _, z := range []string{"vpc1.internal", "prod.vpc2.internal", "other.internal"} {
		var recs []awstest.RecordSet
		for _, r := range app {
			r.Name += "." + z
			recs = append(recs, r)
		}
		srv.Route53.AddZone(awstest.Zone{Name: z, Private: true, VPCs: []awstest.VPC{{ID: "vpc-" + z, Region: "eu-west-1"}}, Records: recs})
	}
	ts, err := s.Targets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]netip.Addr{}
	for _, tg := range ts {
		got[tg.Name] = tg.Addresses
	}
	want := map[string][]netip.Addr{
		"app.vpc1.internal":      addrs("10.1.0.7"),
		"app.prod.vpc2.internal": addrs("10.2.0.7", "fd00::7"),
		"app.other.internal":     nil,
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("addresses by name (-want +got):\n%s", diff)
	}
}

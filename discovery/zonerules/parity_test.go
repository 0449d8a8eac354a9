package zonerules_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/internal/knottest"
)

// parityZone has a record for every rule that turns zone data into
// targets: address and CNAME owners, CNAME chains inside and out of the
// zone (dangling, looping, at and past the length bound), SRV records of
// TLS, STARTTLS, plain and UDP services and "." targets, XMPP domains
// served by two hosts, MX and null MX, a delegation with glue and a CNAME
// into it, wildcards, service-label owners, and records that name a
// configured port's protocol.
const parityZone = `
@                  NS    ns1
ns1                A     192.0.2.250
www                A     192.0.2.1
www                A     192.0.2.2
www                AAAA  2001:db8::1
app                CNAME www
chain              CNAME app
ext                CNAME host.other.example.
dangling           CNAME nowhere
loop1              CNAME loop2
loop2              CNAME loop1
self               CNAME self
*.wild             A     192.0.2.9
*                  CNAME www
_https._tcp        SRV   0 0 8443 svc
svc                A     192.0.2.3
_imap._tcp         SRV   0 0 143 mail
_imaps._tcp        SRV   0 0 0 .
_ldaps._tcp        SRV   0 0 636 ldap.partner.example.
_sip._udp          SRV   0 0 5060 sip
_http._tcp         SRV   0 0 80 www
_submission._tcp   SRV   0 0 443 www
_ldap._tcp.app     SRV   0 0 8443 app
mail               A     192.0.2.4
@                  MX    10 mail
@                  MX    20 mx.other.example.
nomail             MX    0 .
nomail             A     192.0.2.6
_xmpp-client._tcp  SRV   0 0 5222 xmpp1
_xmpp-client._tcp  SRV   0 0 5222 xmpp2
_xmpp-server._tcp.chat SRV 0 0 5269 xmpp1
_xmpp-server._tcp.out  SRV 0 0 5269 xmpp.other.example.
xmpp1              A     192.0.2.5
xmpp2              CNAME xmpp1
sub                NS    ns.sub
ns.sub             A     192.0.2.53
host.sub           A     192.0.2.54
intosub            CNAME host.sub
_acme-challenge    CNAME _x.validation.example.
_svc               A     192.0.2.7
`

// chains appends CNAME chains of n names ending at an address, for n on
// both sides of the bound on chain length.
func chains() string {
	var b strings.Builder
	for _, n := range []int{14, 15, 16, 17} {
		for i := range n {
			fmt.Fprintf(&b, "c%d-%d CNAME c%d-%d\n", n, i, n, i+1)
		}
		fmt.Fprintf(&b, "c%d-%d A 192.0.2.%d\n", n, n, 100+n)
	}
	return b.String()
}

// TestZoneParity: one zone transferred over AXFR (dnszone) and read from
// Route 53 as record sets (route53) gives the same targets: both sources
// apply the same rules.
func TestZoneParity(t *testing.T) {
	const apex = "parity.example"
	text := parityZone + chains()
	ports := []int{443, 143, 8443}

	// AXFR from an authoritative server.
	ns, err := dnstest.Start(dnstest.Zone{Name: apex, Text: text})
	if err != nil {
		t.Fatalf("dnstest.Start: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	zs, err := dnszone.New(dnszone.Config{Zone: apex, Nameserver: ns.Addr(), Ports: ports}, nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := zs.Discover(context.Background())
	if err != nil {
		t.Fatalf("dnszone: %v", err)
	}
	fromAXFR := y.Targets

	// The same records as Route 53 record sets, one set per (name, type).
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	srv.Route53.AddZone(awstest.Zone{ID: "ZPARITY", Name: apex, Records: recordSets(t, apex, text)})
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := route53.New(route53.Config{Endpoint: srv.URL, RateLimit: 1000, Ports: ports}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	fromRoute53, err := rs.Targets(context.Background())
	if err != nil {
		t.Fatalf("route53: %v", err)
	}

	got, want := probed(fromRoute53), probed(fromAXFR)
	if len(want) < 40 {
		t.Fatalf("the zone gave only %d targets over AXFR: %v", len(want), want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Route 53 targets differ from the AXFR ones (-axfr +route53):\n%s", diff)
	}
}

// probed returns ts as a pass probes them (merged by name and port), one
// line each, without the sources, which name each source.
func probed(ts []discovery.Target) []string {
	var out []string
	for _, t := range discovery.Merge(ts) {
		out = append(out, fmt.Sprintf("%s %s addrs=%v resolve=%q skip=%q", t.Key(), t.Protocol, t.Addresses, t.Resolve, t.Skip))
	}
	return out
}

// recordSets parses zone-file text for apex into Route 53 record sets:
// one set per owner name and type, values in presentation format.
func recordSets(t *testing.T, apex, text string) []awstest.RecordSet {
	t.Helper()
	zp := dns.NewZoneParser(strings.NewReader(text), apex+".", "")
	zp.SetDefaultTTL(300)
	var sets []awstest.RecordSet
	index := map[string]int{}
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		typ := dns.TypeToString[h.Rrtype]
		value := strings.TrimPrefix(rr.String(), h.String())
		k := h.Name + " " + typ
		if i, ok := index[k]; ok {
			sets[i].Values = append(sets[i].Values, value)
			continue
		}
		index[k] = len(sets)
		sets = append(sets, awstest.RecordSet{Name: h.Name, Type: typ, TTL: int64(h.Ttl), Values: []string{value}})
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("parse zone: %v", err)
	}
	return sets
}

// TestZoneFileParity: one zone transferred from Knot and read from the
// very file Knot serves it from gives the same targets and the same
// coverage: the same children followed (kid, which Knot transfers), the
// same gaps (shut, which Knot refuses) with the same details.
func TestZoneFileParity(t *testing.T) {
	const apex = "parity.example"
	text := "@ SOA ns1 hostmaster 1 3600 600 86400 300\n" + parityZone + chains() + `
kid      NS  ns.kid
ns.kid   A   127.0.0.1
shut     NS  ns.shut
ns.shut  A   127.0.0.1
`
	const child = "@ SOA ns1 hostmaster 1 3600 600 86400 300\n@ NS ns1\nns1 A 127.0.0.1\nhost A 192.0.2.77\n"
	k := knottest.Start(t,
		knottest.Zone{Name: apex, Text: text, Transfer: knottest.TransferLoopback},
		knottest.Zone{Name: "kid." + apex, Text: child, Transfer: knottest.TransferLoopback},
		knottest.Zone{Name: "shut." + apex, Text: child},
	)
	_, portText, _ := net.SplitHostPort(k.Addr)
	port, _ := strconv.Atoi(portText)
	base := dnszone.Config{Zone: apex, Ports: []int{443, 143, 8443}, FollowDelegations: true, DelegationPort: port, AllowLoopback: true,
		// sub's glue is a documentation address, never dialled in a test.
		OutOfScope: []string{"sub." + apex}}

	discover := func(c dnszone.Config) ([]string, found.Inventory) {
		t.Helper()
		s, err := dnszone.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		y, err := s.Discover(context.Background())
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		return probed(y.Targets), y.Inventory
	}
	axfr := base
	axfr.Nameserver = k.Addr
	fromAXFR, axfrInv := discover(axfr)
	file := base
	file.File = filepath.Join(k.Dir, "zones", apex+".zone") // what knotd serves
	fromFile, fileInv := discover(file)

	if len(fromAXFR) < 41 || !slices.ContainsFunc(fromAXFR, func(s string) bool { return strings.HasPrefix(s, "host.kid."+apex) }) {
		t.Fatalf("the transfer gave %d targets, want the zone's and its child's: %v", len(fromAXFR), fromAXFR)
	}
	if len(axfrInv.Watched) != 2 || len(axfrInv.Gaps) != 1 || axfrInv.Gaps[0].Zone != "shut."+apex {
		t.Fatalf("the transfer's coverage: %+v, want the zone and kid watched, shut a gap", axfrInv)
	}
	if diff := cmp.Diff(fromAXFR, fromFile); diff != "" {
		t.Errorf("targets from the zone file differ from the transferred ones (-axfr +file):\n%s", diff)
	}
	if diff := cmp.Diff(axfrInv, fileInv); diff != "" {
		t.Errorf("coverage from the zone file differs from the transfer's (-axfr +file):\n%s", diff)
	}
}

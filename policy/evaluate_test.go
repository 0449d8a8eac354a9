package policy_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// observe builds the observation a probe of name at addr would make of the
// served chain, verified against roots at now by the prober's own Verify.
func observe(name, addr string, served []*x509.Certificate, roots *x509.CertPool, now time.Time) probes.Observation {
	v := probes.Verify(served, name, roots, now)
	return probes.Observation{
		Name: name, Port: 443, Address: netip.MustParseAddr(addr),
		Chain: served, Trust: v.Trust, TrustError: v.Error, Paths: v.Paths, NameMatch: v.NameMatch,
	}
}

func TestEvaluate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	inter := root.MustIntermediate("Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	oldRoot := certtest.MustCA("Old Root", now.AddDate(-10, 0, 0), now.AddDate(0, 0, -30))
	crossSign, err := oldRoot.CrossSign(root, now.AddDate(-5, 0, 0), now.AddDate(0, 0, -30))
	if err != nil {
		t.Fatal(err)
	}
	roots := root.Pool()
	leaf := func(notAfter time.Time, names ...string) *certtest.Leaf {
		return inter.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.AddDate(0, 0, -300), NotAfter: notAfter})
	}
	chain := func(l *certtest.Leaf, extra ...*x509.Certificate) []*x509.Certificate {
		return append([]*x509.Certificate{l.Cert}, extra...)
	}
	healthy := leaf(now.AddDate(0, 0, 200), "ok.example")
	wildcard := leaf(now.AddDate(0, 0, 5), "*.example")

	tests := []struct {
		name string
		obs  []probes.Observation
		want []string // "kind tier endpoints" per finding, most urgent first
	}{
		{
			name: "healthy chain has no finding",
			obs:  []probes.Observation{observe("ok.example", "10.0.0.1", chain(healthy, inter.Cert), roots, now)},
		},
		{
			name: "shared wildcard is one finding listing every endpoint",
			obs: []probes.Observation{
				observe("a.example", "10.0.0.1", chain(wildcard, inter.Cert), roots, now),
				observe("b.example", "10.0.0.2", chain(wildcard, inter.Cert), roots, now),
				observe("c.example", "10.0.0.3", chain(wildcard, inter.Cert), roots, now),
			},
			want: []string{"expiring page a.example,b.example,c.example", "renewal_missed warning a.example,b.example,c.example"},
		},
		{
			name: "expired extra cross-sign beside a valid path is only a notice",
			obs:  []probes.Observation{observe("ok.example", "10.0.0.1", chain(healthy, inter.Cert, crossSign), roots, now)},
			want: []string{"bundle_expired notice ok.example"},
		},
		{
			name: "missing intermediate is untrusted, not expired",
			obs:  []probes.Observation{observe("ok.example", "10.0.0.1", chain(healthy), roots, now)},
			want: []string{"chain_untrusted page ok.example"},
		},
		{
			name: "expired leaf is critical with its own deadline",
			obs:  []probes.Observation{observe("old.example", "10.0.0.1", chain(leaf(now.AddDate(0, 0, -3), "old.example"), inter.Cert), roots, now)},
			want: []string{"expired critical old.example"},
		},
		{
			name: "addresses of one name disagree",
			obs: []probes.Observation{
				observe("ok.example", "10.0.0.1", chain(healthy, inter.Cert), roots, now),
				observe("ok.example", "10.0.0.2", chain(leaf(now.AddDate(0, 0, 300), "ok.example"), inter.Cert), roots, now),
			},
			want: []string{"inconsistent_deployment warning ok.example,ok.example"},
		},
		{
			name: "an address that serves nothing does not make a name inconsistent",
			obs: []probes.Observation{
				observe("ok.example", "10.0.0.1", chain(healthy, inter.Cert), roots, now),
				{Name: "ok.example", Port: 443, Address: netip.MustParseAddr("10.0.0.2"), Failure: probes.FailRefused, Error: "connection refused"},
				observe("ok.example", "10.0.0.3", chain(healthy, inter.Cert), roots, now),
			},
		},
		{
			name: "addresses that disagree around one that serves nothing",
			obs: []probes.Observation{
				{Name: "ok.example", Port: 443, Address: netip.MustParseAddr("10.0.0.1"), Failure: probes.FailTimeout, Error: "no answer"},
				observe("ok.example", "10.0.0.2", chain(healthy, inter.Cert), roots, now),
				{Name: "ok.example", Port: 443, Address: netip.MustParseAddr("10.0.0.3"), Failure: probes.FailRefused, Error: "connection refused"},
				observe("ok.example", "10.0.0.4", chain(leaf(now.AddDate(0, 0, 300), "ok.example"), inter.Cert), roots, now),
			},
			want: []string{"inconsistent_deployment warning ok.example,ok.example"},
		},
		{
			name: "a target given as an IP address is not checked against the certificate's names",
			obs:  []probes.Observation{observe("10.0.0.9", "10.0.0.9", chain(healthy, inter.Cert), roots, now)},
		},
		{
			name: "wrong host",
			obs:  []probes.Observation{observe("other.example", "10.0.0.1", chain(healthy, inter.Cert), roots, now)},
			want: []string{"hostname_mismatch page other.example"},
		},
		{
			name: "unreachable explicit target is a finding, zone name is not",
			obs: []probes.Observation{
				{Name: "static.example", Port: 443, Address: netip.MustParseAddr("10.0.0.1"), Explicit: true, Failure: probes.FailRefused, Error: "connection refused"},
				{Name: "zone.example", Port: 443, Address: netip.MustParseAddr("10.0.0.2"), Failure: probes.FailRefused, Error: "connection refused"},
			},
			want: []string{"unreachable warning static.example"},
		},
		{
			name: "addresses discovery named that were not dialled are one info finding per name",
			obs: []probes.Observation{
				{Name: "zone.example", Port: 443, Address: netip.MustParseAddr("127.0.0.1"), Failure: probes.FailAddressSkipped, Error: "not dialled: 127.0.0.1 for zone.example (found by dnszone:example) is a loopback address"},
				{Name: "zone.example", Port: 443, Address: netip.MustParseAddr("169.254.169.254"), Failure: probes.FailAddressSkipped, Error: "not dialled: 169.254.169.254 …"},
				{Name: "zone.example", Port: 443, Address: netip.MustParseAddr("10.0.0.2"), Failure: probes.FailRefused, Error: "connection refused"},
			},
			want: []string{"address_skipped info zone.example,zone.example"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := policy.Evaluate(tt.obs, policy.DefaultRules(), now).Findings
			var gotS []string
			for _, f := range got {
				var names []string
				for _, ep := range f.Endpoints {
					names = append(names, ep.Name)
				}
				gotS = append(gotS, string(f.Kind)+" "+f.Tier.String()+" "+strings.Join(names, ","))
			}
			if strings.Join(gotS, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(gotS, "\n"), strings.Join(tt.want, "\n"))
				for _, f := range got {
					t.Logf("  %s: %s", f.Kind, f.Message)
				}
			}
		})
	}
}

// TestResultEndpoints checks the endpoint list a report shows: every
// observation, sorted by name, port and address, with the leaf's
// fingerprint or the failure.
func TestResultEndpoints(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	l := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example", "b.example"}, NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 200)})
	served := []*x509.Certificate{l.Cert}
	obs := []probes.Observation{
		observe("b.example", "10.0.0.2", served, root.Pool(), now),
		{Name: "a.example", Port: 443, Address: netip.MustParseAddr("10.0.0.9"), Failure: probes.FailRefused, Error: "connect to 10.0.0.9:443: connection refused"},
		observe("a.example", "10.0.0.1", served, root.Pool(), now),
		{Name: "c.example", Port: 443, Failure: probes.FailResolve, Error: "lookup c.example: no such host"},
	}
	fp := probes.Fingerprint(l.Cert)
	want := []policy.Probed{
		{Name: "a.example", Port: 443, Address: "10.0.0.1", Certificate: fp},
		{Name: "a.example", Port: 443, Address: "10.0.0.9", Failed: &policy.Failed{Error: "connect to 10.0.0.9:443: connection refused", Failure: "refused"}},
		{Name: "b.example", Port: 443, Address: "10.0.0.2", Certificate: fp},
		{Name: "c.example", Port: 443, Failed: &policy.Failed{Error: "lookup c.example: no such host", Failure: "resolve"}},
	}
	got := policy.Evaluate(obs, policy.DefaultRules(), now).Endpoints
	if len(got) != len(want) {
		t.Fatalf("got %d endpoints, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("endpoint %d = %+v (%+v), want %+v (%+v)", i, got[i], got[i].Fault(), want[i], want[i].Fault())
		}
	}
}

func TestEndpointString(t *testing.T) {
	for _, tt := range []struct {
		ep   policy.Endpoint
		want string
	}{
		{policy.Endpoint{Name: "www.example", Port: 443, Address: "10.0.0.1"}, "www.example:443 (10.0.0.1)"},
		{policy.Endpoint{Name: "www.example", Port: 443, Address: "2001:db8::1"}, "www.example:443 (2001:db8::1)"},
		{policy.Endpoint{Name: "2001:db8::7", Port: 8443, Address: "2001:db8::7"}, "[2001:db8::7]:8443"},
		{policy.Endpoint{Name: "www.example", Port: 443}, "www.example:443"},
	} {
		if got := tt.ep.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.ep, got, tt.want)
		}
	}
}

// TestFarDates judges certificates whose dates lie beyond the ±292 years a
// time.Duration holds: one valid until 9999-12-31 has no finding, one that
// expired in 1700 is expired with the exact number of days in its message
// and DaysLeft.
func TestFarDates(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	noExpiry := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	ancient := time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
	longAgo := time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Far Root", ancient, noExpiry)
	forever := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"forever.example"}, NotBefore: ancient, NotAfter: noExpiry})
	dead := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"dead.example"}, NotBefore: ancient, NotAfter: longAgo})

	r := policy.Evaluate([]probes.Observation{
		observe("forever.example", "10.0.0.1", []*x509.Certificate{forever.Cert}, root.Pool(), now),
		observe("dead.example", "10.0.0.2", []*x509.Certificate{dead.Cert}, root.Pool(), now),
	}, policy.DefaultRules(), now)
	if len(r.Findings) != 1 || r.Findings[0].Kind != policy.Expired {
		t.Fatalf("findings %+v, want one: dead.example expired", r.Findings)
	}
	f := r.Findings[0]
	const daysAgo = 120530 // 1700-01-01 to 2030-01-01
	if got := f.DaysLeft(now); got != -daysAgo {
		t.Errorf("DaysLeft = %d, want %d", got, -daysAgo)
	}
	if want := fmt.Sprintf("expired %d days ago (1700-01-01T00:00:00Z)", daysAgo); !strings.Contains(f.Message, want) {
		t.Errorf("message %q, want it to say %q", f.Message, want)
	}
	if got, want := policy.DaysUntil(noExpiry, now), 2910981; got != want {
		t.Errorf("DaysUntil(9999-12-31) = %d, want %d", got, want)
	}
}

// TestReportKeyExchangeAndSignature: the report says which key exchange
// each endpoint negotiated, whether it took the post-quantum hybrid when
// one was offered (and nothing when none was), and what each certificate
// is signed with.
func TestReportKeyExchangeAndSignature(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	l := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example", "b.example", "c.example"}, NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 200)})
	served := []*x509.Certificate{l.Cert}
	a := observe("a.example", "10.0.0.1", served, root.Pool(), now)
	a.KeyExchange, a.HybridOffered = probes.KeyExchange(tls.X25519MLKEM768), true
	b := observe("b.example", "10.0.0.2", served, root.Pool(), now)
	b.KeyExchange, b.HybridOffered = probes.KeyExchange(tls.CurveP256), true
	c := observe("c.example", "10.0.0.3", served, root.Pool(), now)
	c.KeyExchange = probes.KeyExchange(tls.CurveP256)
	r := policy.Evaluate([]probes.Observation{a, b, c}, policy.DefaultRules(), now)
	var got []string
	for _, ep := range r.Endpoints {
		j, err := json.Marshal(ep)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(j))
	}
	for i, want := range []string{`"key_exchange":"X25519MLKEM768","post_quantum":true`, `"key_exchange":"secp256r1","post_quantum":false`, `"key_exchange":"secp256r1"}`} {
		if !strings.Contains(got[i], want) {
			t.Errorf("endpoint %d: %s lacks %s", i, got[i], want)
		}
	}
	if len(r.Certificates) != 1 || r.Certificates[0].SignatureAlgorithm != "ECDSA-SHA256" {
		t.Errorf("certificates %+v: want one signed with ECDSA-SHA256", r.Certificates)
	}
}

// TestSourceCoverageCountsDistinctLeaves: a source's certificates are the
// distinct leaves its endpoints served, whatever the number of endpoints
// serving each.
func TestSourceCoverageCountsDistinctLeaves(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	var leaves []*x509.Certificate
	for i := range 130 { // more than two words of bits
		leaves = append(leaves, root.MustLeaf(certtest.LeafOptions{DNSNames: []string{fmt.Sprintf("n%d.example", i)}, NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 200)}).Cert)
	}
	e := policy.NewEvaluator(policy.DefaultRules(), now)
	add := func(name string, leaf *x509.Certificate, sources ...string) {
		o := observe(name, "10.0.0.1", []*x509.Certificate{leaf}, root.Pool(), now)
		o.Sources = sources
		e.Add(&o)
	}
	for i, l := range leaves {
		add(fmt.Sprintf("n%d.example", i), l, "zone")
	}
	add("n129.example", leaves[129], "zone", "list") // zone's again
	add("n0.example", leaves[0], "list")
	down := probes.Observation{Name: "down.example", Port: 443, Sources: []string{"list"}, Failure: probes.FailRefused, Error: "refused"}
	e.Add(&down)
	got := fmt.Sprint(e.Result().Sources)
	if want := "[{list 3 2} {zone 131 130}]"; got != want {
		t.Errorf("sources = %s, want %s", got, want)
	}
}

// TestEndpointsKeepSourcesAndDuration: each endpoint of the result says
// which sources led to it and how long its probe took, whether it served
// a certificate or not, as the observation said: the status page and the
// metrics read them there. The sources are the observation's list, not a
// copy of it for each of a fleet's endpoints.
func TestEndpointsKeepSourcesAndDuration(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	leaf := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"ok.example"}, NotBefore: now.AddDate(0, 0, -30), NotAfter: now.AddDate(0, 0, 200)})
	zone := []string{"dnszone:example", "static"}
	served := observe("ok.example", "10.0.0.1", []*x509.Certificate{leaf.Cert}, root.Pool(), now)
	served.Sources, served.Duration = zone, 40*time.Millisecond
	refused := probes.Observation{Name: "down.example", Port: 443, Address: netip.MustParseAddr("10.0.0.2"),
		Failure: probes.FailRefused, Error: "connection refused", Sources: zone[:1], Duration: 2 * time.Millisecond}
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	ev.Add(&served)
	ev.Add(&refused)
	res := ev.Result()
	if len(res.Endpoints) != 2 {
		t.Fatalf("%d endpoints, want 2", len(res.Endpoints))
	}
	for i, want := range []struct {
		sources  []string
		duration time.Duration
	}{{zone[:1], 2 * time.Millisecond}, {zone, 40 * time.Millisecond}} {
		ep := res.Endpoints[i]
		if !slices.Equal(ep.Sources, want.sources) || ep.Duration != want.duration {
			t.Errorf("%s: sources %q, duration %v; want %q, %v", ep.Name, ep.Sources, ep.Duration, want.sources, want.duration)
		}
		if len(ep.Sources) > 0 && &ep.Sources[0] != &zone[0] {
			t.Errorf("%s: its sources are a copy of the observation's", ep.Name)
		}
	}
}

package policy_test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestTLSBrokenThroughScan transfers a real zone whose names point at
// loopback servers that accept the connection and then fail TLS in each
// way seen in the field, probes them with the real prober and checks the
// report: one tls_broken warning per name and port, none for a name where
// nothing listens, none for a healthy name.
func TestTLSBrokenThroughScan(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Broken TLS Root", now.Add(-time.Hour), now.AddDate(5, 0, 0))
	const zone = "broken.example"
	name := func(label string) string { return label + "." + zone }
	healthy := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name("ok")}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0)})
	huge := hugeLeaf(t, ca, name("huge"), now)
	port := freePort(t)

	serveOn := func(addr string, start func(string) (*certtest.Server, error)) {
		t.Helper()
		s, err := start(fmt.Sprintf("%s:%d", addr, port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
	}
	// alert: no certificate for the name asked for, so crypto/tls alerts.
	serveOn("127.0.21.1", func(a string) (*certtest.Server, error) {
		return certtest.ServeSNI(a, map[string]tls.Certificate{"other.example": healthy.TLSCertificate()})
	})
	serveOn("127.0.21.2", certtest.ServeBadHello)
	serveOn("127.0.21.3", certtest.ServeGarbage)
	serveOn("127.0.21.4", func(a string) (*certtest.Server, error) { return certtest.Serve(a, huge) })
	serveOn("127.0.21.5", certtest.ServeSilent)
	// 127.0.21.6: nothing listens (refused).
	serveOn("127.0.21.7", func(a string) (*certtest.Server, error) { return certtest.Serve(a, healthy.TLSCertificate()) })
	// two addresses of one name, both alerting: one finding, two endpoints.
	serveOn("127.0.21.8", func(a string) (*certtest.Server, error) {
		return certtest.ServeSNI(a, map[string]tls.Certificate{"other.example": healthy.TLSCertificate()})
	})

	dns, err := dnstest.Start(dnstest.Zone{Name: zone, Text: `
alert A 127.0.21.1
alert2 A 127.0.21.1
alert2 A 127.0.21.8
handshake A 127.0.21.2
garbage A 127.0.21.3
huge A 127.0.21.4
stall A 127.0.21.5
refused A 127.0.21.6
ok A 127.0.21.7
`})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	src, err := dnszone.New(dnszone.Config{Zone: zone, Nameserver: dns.Addr(), Ports: []int{port}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pass := &scan.Pass{
		Sources: []scan.Source{src},
		Prober: probes.New(probes.Config{
			AllowLoopback: true,
			Roots:         ca.Pool(), Attempts: 1,
			DialTimeout: 2 * time.Second, HandshakeTimeout: 2 * time.Second, // a stall costs it; the huge chain needs the time under the race detector
		}),
		Rules: policy.DefaultRules(),
		Now:   func() time.Time { return now },
	}
	r, err := pass.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]struct {
		failure probes.Failure
		addrs   []string
		has     string
	}{
		name("alert"):     {probes.FailAlert, []string{"127.0.21.1"}, "remote error: tls"},
		name("alert2"):    {probes.FailAlert, []string{"127.0.21.1", "127.0.21.8"}, "remote error: tls"},
		name("handshake"): {probes.FailHandshake, []string{"127.0.21.2"}, "tls handshake with 127.0.21.2"},
		name("garbage"):   {probes.FailNotTLS, []string{"127.0.21.3"}, "plain HTTP"},
		name("huge"):      {probes.FailHandshake, []string{"127.0.21.4"}, "exceeds maximum"},
		name("stall"):     {probes.FailTimeout, []string{"127.0.21.5"}, "no answer within 2s"},
	}
	got := map[string]policy.Finding{}
	for _, f := range r.Findings {
		if f.Kind != policy.TLSBroken {
			t.Errorf("unexpected finding %s %s %s: %s", f.Kind, f.Tier, f.Name, f.Message)
			continue
		}
		host, _, _ := net.SplitHostPort(f.Name)
		if _, dup := got[host]; dup {
			t.Errorf("two tls_broken findings for %s", host)
		}
		got[host] = f
	}
	for host, w := range want {
		f, ok := got[host]
		if !ok {
			t.Errorf("no tls_broken finding for %s", host)
			continue
		}
		nameKey := net.JoinHostPort(host, fmt.Sprint(port))
		if f.Tier != policy.Warning || f.Name != nameKey || f.ID() != "tls_broken:"+nameKey || f.Certificate != "" {
			t.Errorf("%s: tier %s, name %q, id %q, certificate %q; want a warning about %s", host, f.Tier, f.Name, f.ID(), f.Certificate, nameKey)
		}
		var addrs []string
		for _, ep := range f.Endpoints {
			addrs = append(addrs, ep.Address)
		}
		if !slices.Equal(addrs, w.addrs) {
			t.Errorf("%s: endpoints %v, want %v", host, addrs, w.addrs)
		}
		if !strings.Contains(f.Message, string(w.failure)+": ") || !strings.Contains(f.Message, w.has) || !strings.Contains(f.Message, nameKey+" accepts connections") {
			t.Errorf("%s: message %q, want it to name %s, the failure %s and %q", host, f.Message, nameKey, w.failure, w.has)
		}
	}
	for _, host := range []string{name("refused"), name("ok")} {
		if f, ok := got[host]; ok {
			t.Errorf("%s has a finding %q, want none", host, f.Message)
		}
	}
	refused := slices.IndexFunc(r.Endpoints, func(p scan.Endpoint) bool { return p.Name == name("refused") })
	if refused < 0 || r.Endpoints[refused].Fault().Failure != string(probes.FailRefused) {
		t.Errorf("the refused name is not in the report's endpoints as refused: %+v", r.Endpoints)
	}
}

// TestTLSBrokenTier checks the tier comes from the rules, that None turns
// the check off, and that explicit targets stay unreachable findings.
func TestTLSBrokenTier(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	broken := func(explicit bool) probes.Observation {
		return probes.Observation{Name: "a.example", Port: 443, Explicit: explicit, Connected: true,
			Failure: probes.FailAlert, Error: "tls handshake with 10.0.0.1:443: remote error: tls: internal error"}
	}
	tests := []struct {
		name string
		tier policy.Tier
		obs  probes.Observation
		want string // "kind tier", or "" for no finding
	}{
		{"default rules", policy.DefaultRules().TLSBroken, broken(false), "tls_broken warning"},
		{"raised to page", policy.Page, broken(false), "tls_broken page"},
		{"turned off", policy.None, broken(false), ""},
		{"explicit target is unreachable instead", policy.Warning, broken(true), "unreachable warning"},
		{"dial timeout is not a finding", policy.Warning, probes.Observation{Name: "a.example", Port: 443, Failure: probes.FailTimeout, Error: "connect to 10.0.0.1:443: no answer within 5s"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := policy.DefaultRules()
			rules.TLSBroken = tt.tier
			r := policy.Evaluate([]probes.Observation{tt.obs}, rules, now)
			var got []string
			for _, f := range r.Findings {
				got = append(got, fmt.Sprintf("%s %s", f.Kind, f.Tier))
			}
			if strings.Join(got, "; ") != tt.want {
				t.Errorf("findings = %q, want %q", got, tt.want)
			}
		})
	}
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago; the
// test's servers bind it on other loopback addresses.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// hugeLeaf returns a leaf for name carrying a 1 MB extension: its
// Certificate message is larger than any TLS client accepts.
func hugeLeaf(t *testing.T, ca *certtest.CA, name string, now time.Time) tls.Certificate {
	t.Helper()
	l := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0)})
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		ExtraExtensions: []pkix.Extension{{
			Id:    asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 55555, 1},
			Value: make([]byte, 1<<20),
		}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &l.Key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: l.Key}
}

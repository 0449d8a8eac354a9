package serve_test

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
)

// TestBidiCertificate serves a certificate whose subject carries a
// right-to-left override and whose issuer and DNS name carry terminal
// escapes, scans it with the real prober, and checks that neither the
// status page nor a /metrics label value carries them raw, while both
// show them as visible escapes.
func TestBidiCertificate(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Evil\x1b[31m CA\x07", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "invoice\u202efdp.exe", DNSNames: []string{"bidi\x1b[2J.example"},
		NotBefore: now.AddDate(0, 0, -30), NotAfter: now.AddDate(0, 0, 10)})
	s, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	target := discovery.Target{Name: "bidi.example", Port: int(s.Addr().Port()), Addresses: []netip.Addr{s.Addr().Addr()}, Sources: []string{"static"}}

	srv := serve.New(serve.Options{Now: func() time.Time { return now }})
	pass := &scan.Pass{
		Prober:        probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), Now: func() time.Time { return now }}),
		Rules:         policy.DefaultRules(),
		Now:           func() time.Time { return now },
		OnObservation: srv.ObserveProbe,
	}
	r := pass.Probe(t.Context(), []discovery.Target{target}, now)
	if len(r.Findings) == 0 {
		t.Fatal("no finding for a certificate that expires in 10 days and does not match its name")
	}
	srv.RecordReport(r)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	_, _, page := get(t, hs.URL+"/")
	_, _, metrics := get(t, hs.URL+"/metrics")
	for what, body := range map[string]string{"status page": page, "/metrics": metrics} {
		if strings.ContainsAny(body, "\u202e\x1b\x07") {
			t.Errorf("%s carries raw control or format characters", what)
		}
	}
	for _, want := range []string{`invoice\u202efdp.exe`, `Evil\x1b[31m CA\x07`} {
		if !strings.Contains(page, want) {
			t.Errorf("status page does not show %s", want)
		}
	}
	if !strings.Contains(page, `bidi\x1b[2J.example`) {
		t.Error("status page does not show the certificate's DNS name with a visible escape")
	}
	// The text format escapes a backslash in a label value as \\.
	for _, want := range []string{`subject_cn="invoice\\u202efdp.exe"`, `issuer_cn="Evil\\x1b[31m CA\\x07"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

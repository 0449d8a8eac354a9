package cli

import (
	"bytes"
	"crypto/x509"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestTableNeutralisesControlCharacters: a server chooses its certificate's
// subject; escape sequences in it must not reach the operator's terminal.
func TestTableNeutralisesControlCharacters(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	evil := "evil\x1b]0;pwned\x07\x1b[2J.example"
	r := &scan.Report{GeneratedAt: now, Findings: []policy.Finding{{
		Kind: policy.HostnameMismatch, Tier: policy.Page, Subject: evil, Deadline: policy.At(now),
		Message:   "certificate " + evil + " is not valid",
		Endpoints: []policy.Endpoint{{Name: "[::1]", Port: 443, Address: "::1"}},
	}}}
	var out bytes.Buffer
	if err := writeTable(&out, r, false); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07") {
		t.Errorf("table output carries control characters:\n%q", out.String())
	}
	if !strings.Contains(out.String(), `evil\x1b]0;pwned\x07\x1b[2J.example`) {
		t.Errorf("subject not shown with control characters replaced:\n%s", out.String())
	}
}

// TestTableFarDates: a certificate that expired in 1700 (valid from year
// 0001) shows its exact age in days, not the 106751 days a saturated
// time.Duration holds.
func TestTableFarDates(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ancient := time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Far Root", ancient, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	dead := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"dead.example"}, NotBefore: ancient, NotAfter: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)})
	v := probes.Verify([]*x509.Certificate{dead.Cert}, "dead.example", root.Pool(), now)
	ev := policy.Evaluate([]probes.Observation{{Name: "dead.example", Port: 443, Address: netip.MustParseAddr("10.0.0.2"),
		Chain: []*x509.Certificate{dead.Cert}, Trust: v.Trust, Paths: v.Paths, NameMatch: v.NameMatch}}, policy.DefaultRules(), now)
	r := &scan.Report{GeneratedAt: now, Findings: ev.Findings, Certificates: ev.Certificates, Endpoints: ev.Endpoints}
	var out bytes.Buffer
	if err := writeTable(&out, r, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "1700-01-01 00:00  -120530d  expired") || strings.Contains(out.String(), "106751") {
		t.Errorf("table does not show the exact age of a certificate that expired in 1700:\n%s", out.String())
	}
}

// TestTableBidiCertificate: a certificate whose subject carries a
// right-to-left override is listed with the override as a visible escape,
// so the table reads in the order it is written.
func TestTableBidiCertificate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root\u2066", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	leaf := root.MustLeaf(certtest.LeafOptions{CommonName: "invoice\u202efdp.exe", DNSNames: []string{"bidi.example"}, NotBefore: now.AddDate(0, 0, -30), NotAfter: now.AddDate(0, 0, 5)})
	v := probes.Verify([]*x509.Certificate{leaf.Cert}, "bidi.example", root.Pool(), now)
	ev := policy.Evaluate([]probes.Observation{{Name: "bidi.example", Port: 443, Address: netip.MustParseAddr("10.0.0.2"),
		Chain: []*x509.Certificate{leaf.Cert}, Trust: v.Trust, Paths: v.Paths, NameMatch: v.NameMatch}}, policy.DefaultRules(), now)
	r := &scan.Report{GeneratedAt: now, Findings: ev.Findings, Certificates: ev.Certificates, Endpoints: ev.Endpoints}
	var out bytes.Buffer
	if err := writeTable(&out, r, false); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\u202e\u2066") {
		t.Errorf("table carries raw bidirectional controls:\n%q", out.String())
	}
	if n := strings.Count(out.String(), `invoice\u202efdp.exe`); n < 2 {
		t.Errorf("subject shown with a visible escape %d times, want in the table and the detail:\n%s", n, out.String())
	}
}

// TestTableAtRest: a finding about a certificate held at rest says where
// it is held (WHERE column when no endpoint serves it, and its places in
// the details), and the summary counts the certificates held at rest.
func TestTableAtRest(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	loc := atrest.Location{Kind: atrest.Secret, Where: "mtls/client", Key: "tls.crt"}
	r := &scan.Report{GeneratedAt: now, Findings: []policy.Finding{{
		Kind: policy.Expiring, Tier: policy.Page, Certificate: strings.Repeat("c1", 32), Subject: "client.example", Deadline: policy.At(now.AddDate(0, 0, 4)),
		Endpoints: []policy.Endpoint{}, Records: &policy.Records{Locations: []atrest.Location{loc, {Kind: atrest.File, Where: "/etc/ssl/client.pem"}}}, Message: "held at rest, expires in 4 days",
	}}, AtRest: []policy.AtRestCertificate{{Certificate: atrest.Certificate{SHA256: strings.Repeat("c1", 32), Locations: []atrest.Location{loc}}}}}
	var out bytes.Buffer
	if err := writeTable(&out, r, false); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"0          secret mtls/client tls.crt and 1 more\n", "held at rest in 2 place(s): secret mtls/client tls.crt, file /etc/ssl/client.pem", "1 certificate(s) (0 served, 1 held at rest, 0 both);"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

// TestTableRenewalCadence: a renewal_missed finding in the table says when
// the certificate was to be renewed and when it last changed.
func TestTableRenewalCadence(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fp := strings.Repeat("a", 64)
	r := &scan.Report{GeneratedAt: at,
		Certificates: []policy.Certificate{{SHA256: fp, Subject: "api.example", NotAfter: policy.At(at.AddDate(0, 0, 40)),
			ExpectedRenewal: policy.At(at.AddDate(0, 0, -10)), Lineage: &policy.Lineage{FirstSeen: at.AddDate(0, 0, -100), LastChanged: at.AddDate(0, 0, -100)}}},
		Findings: []policy.Finding{{Kind: policy.RenewalMissed, Tier: policy.Warning, Certificate: fp, Subject: "api.example", Deadline: policy.At(at.AddDate(0, 0, 40)), Message: "renewal overdue: …"}},
	}
	var b strings.Builder
	if err := writeTable(&b, r, false); err != nil {
		t.Fatal(err)
	}
	if want := "renewal: expected by 2029-12-22; last changed 2029-09-23"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
}

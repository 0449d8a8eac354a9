package cli

import (
	"bytes"
	"crypto/x509"
	"net/netip"
	"strings"
	"testing"
	"time"

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
		Kind: policy.HostnameMismatch, Tier: policy.Page, Subject: evil, Deadline: now,
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
	if !strings.Contains(out.String(), "evil?]0;pwned??[2J.example") {
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

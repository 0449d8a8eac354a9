package serve_test

import (
	"crypto/x509"
	"html"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
)

// TestStatusPageRenewalIsPolicys: the status page says a certificate was
// renewed only when policy says so (policy.Certificate.RenewedBy), never by
// a rule of its own. A newer certificate for the same names that policy
// rightly ignores (self-signed, so no replacement for anything) leaves the
// old one due; a newer trusted one served elsewhere renews it.
func TestStatusPageRenewalIsPolicys(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	issuing := root.MustIntermediate("Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	names := []string{"shop.example.com"}
	old := issuing.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.Add(-300 * day), NotAfter: now.Add(4 * day)})
	trusted := issuing.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.Add(-day), NotAfter: now.Add(300 * day)})
	selfSigned := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: names, NotBefore: now.Add(-day), NotAfter: now.Add(300 * day)})
	observe := func(port int, addr string, chain ...*x509.Certificate) probes.Observation {
		v := probes.Verify(chain, "shop.example.com", root.Pool(), now)
		return probes.Observation{
			Name: "shop.example.com", Port: port, Address: netip.MustParseAddr(addr),
			Chain: chain, Trust: v.Trust, TrustError: v.Error, Paths: v.Paths, NameMatch: v.NameMatch,
		}
	}
	tests := []struct {
		name  string
		newer probes.Observation
		want  string
	}{
		{"a self-signed newer certificate renews nothing: the old one's renewal is missed", observe(8443, "10.0.0.2", selfSigned.Cert), "renewal missed"},
		{"a trusted newer certificate served elsewhere", observe(8443, "10.0.0.2", trusted.Cert, issuing.Cert), "renewed, but not deployed on these endpoints"},
	}
	cell := regexp.MustCompile(`<td data-label="Renewal" class="renewal">([^<]*)<`)
	shaCell := regexp.MustCompile(`sha256 ([0-9a-f]{16})…`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := policy.Evaluate([]probes.Observation{observe(443, "10.0.0.1", old.Cert, issuing.Cert), tt.newer}, policy.DefaultRules(), now)
			s := serve.New(serve.Options{Now: func() time.Time { return now }})
			s.RecordReport(&scan.Report{GeneratedAt: now, Endpoints: res.Endpoints, Certificates: res.Certificates, Findings: res.Findings})
			hs := httptest.NewServer(s.Handler())
			defer hs.Close()
			_, _, body := get(t, hs.URL+"/?q=shop.example.com")
			renewal := map[string]string{} // by the first 16 hex digits of the fingerprint
			for _, tr := range strings.Split(body, "<tr class=\"tier-")[1:] {
				sha, cell := shaCell.FindStringSubmatch(tr), cell.FindStringSubmatch(tr)
				if sha != nil && cell != nil {
					renewal[sha[1]] = html.UnescapeString(cell[1])
				}
			}
			if got := renewal[probes.Fingerprint(old.Cert)[:16]]; got != tt.want {
				t.Errorf("renewal of the old certificate = %q, want %q (policy's findings: %v)", got, tt.want, kindsOf(res.Findings))
			}
		})
	}
}

func kindsOf(fs []policy.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Kind)+"/"+f.Tier.String())
	}
	return out
}

package cli_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestScanLegacyAppliances: an appliance that signs its TLS 1.2 handshakes
// only with SHA-1, and one that speaks only TLS 1.0, still have their
// expiring certificate reported, as one finding for both.
func TestScanLegacyAppliances(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Appliance Root CA", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	inter := ca.MustIntermediate("Appliance Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	leaf := inter.MustLeaf(certtest.LeafOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now.AddDate(0, 0, -300), NotAfter: now.Add(5*24*time.Hour + time.Hour)})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	sha1Only := leaf.FullChain()
	sha1Only.SupportedSignatureAlgorithms = []tls.SignatureScheme{tls.ECDSAWithSHA1}
	configs := []*tls.Config{
		{MaxVersion: tls.VersionTLS12, Certificates: []tls.Certificate{sha1Only}},
		{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10, Certificates: []tls.Certificate{leaf.FullChain()}},
	}
	args := []string{"scan", "--ca-file", caFile, "--timeout", "1500ms", "--output", "json"}
	var want []policy.Endpoint
	for _, cfg := range configs {
		s, err := certtest.ServeConfig("127.0.0.1:0", cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		args = append(args, "--target", s.Addr().String())
		want = append(want, policy.Endpoint{Name: "127.0.0.1", Port: int(s.Addr().Port()), Address: "127.0.0.1"})
	}

	stdout, stderr, code := run(t, args...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d (a page); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("decode JSON report: %v\n%s", err, stdout)
	}
	i := slices.IndexFunc(r.Findings, func(f policy.Finding) bool { return f.Kind == policy.Expiring })
	if i < 0 {
		t.Fatalf("no expiring finding: %+v", r.Findings)
	}
	f := r.Findings[i]
	slices.SortFunc(want, func(a, b policy.Endpoint) int { return a.Port - b.Port })
	if f.Tier != policy.Page || !f.Deadline.Equal(leaf.Cert.NotAfter) || !slices.Equal(f.Endpoints, want) {
		t.Errorf("expiring finding: tier %v, deadline %v, endpoints %v; want page, %v, %v", f.Tier, f.Deadline, f.Endpoints, leaf.Cert.NotAfter, want)
	}
	for _, f := range r.Findings {
		if f.Kind == policy.Unreachable || f.Kind == policy.ChainUntrusted {
			t.Errorf("unexpected %s finding: %s", f.Kind, f.Message)
		}
	}
}

// TestScanWeakCertificates: a SHA-1 leaf, which crypto/x509 refuses to
// verify, is weak_signature with its expiry judged, not an unexplained
// chain_untrusted; an RSA 1024 leaf is weak_key.
func TestScanWeakCertificates(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Weak Root CA", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	inter := ca.MustIntermediate("Weak Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0))
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	ip := []net.IP{net.IPv4(127, 0, 0, 1)}
	sha1Leaf := inter.MustLeaf(certtest.LeafOptions{CommonName: "sha1 appliance", IPs: ip, NotBefore: now.AddDate(0, 0, -300), NotAfter: now.Add(5*24*time.Hour + time.Hour), SignatureAlgorithm: x509.ECDSAWithSHA1})
	rsaLeaf := inter.MustLeaf(certtest.LeafOptions{CommonName: "rsa1024 appliance", IPs: ip, NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 60), RSABits: 1024})
	args := []string{"scan", "--ca-file", caFile, "--timeout", "1500ms", "--output", "json"}
	for _, l := range []*certtest.Leaf{sha1Leaf, rsaLeaf} {
		s, err := certtest.Serve("127.0.0.1:0", l.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		args = append(args, "--target", s.Addr().String())
	}
	stdout, stderr, code := run(t, args...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d (the SHA-1 leaf expires in 5 days); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("decode JSON report: %v\n%s", err, stdout)
	}
	var got []string
	for _, f := range r.Findings {
		got = append(got, string(f.Kind)+" "+f.Tier.String()+" "+f.Subject)
	}
	want := []string{"expiring page sha1 appliance", "weak_key warning rsa1024 appliance", "weak_signature warning sha1 appliance"}
	if !slices.Equal(got, want) {
		t.Errorf("findings %q, want %q", got, want)
	}
}

package cli_test

import (
	"crypto/x509"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// testScanRevocation scans endpoints under a CA that publishes CRLs on
// loopback: a revoked leaf is critical, a revoked intermediate pages, a CRL
// host that is down is an info note (never a page), and an expired CRL is
// info, or a warning when configured so. Turning revocation off fetches
// nothing.
func testScanRevocation(t *testing.T) {
	now := time.Now()
	srv, err := certtest.ServeRevocation("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	root := certtest.MustCA("Revocation Root CA", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	inter := certtest.Must(root.IntermediateWith("Issuing CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0), certtest.Revocation{CRL: []string{srv.URL("/root.crl")}}))
	badInter := certtest.Must(root.IntermediateWith("Compromised CA", now.AddDate(-1, 0, 0), now.AddDate(2, 0, 0), certtest.Revocation{CRL: []string{srv.URL("/root.crl")}}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String() + "/down.crl"
	ln.Close()

	ip := []net.IP{net.IPv4(127, 0, 0, 1)}
	mint := func(ca *certtest.CA, cn, crl string) *certtest.Leaf {
		return ca.MustLeaf(certtest.LeafOptions{CommonName: cn, IPs: ip, NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 60), Revocation: certtest.Revocation{CRL: []string{crl}}})
	}
	good := mint(inter, "good", srv.URL("/inter.crl"))
	revoked := mint(inter, "revoked", srv.URL("/inter.crl"))
	under := mint(badInter, "under compromised", srv.URL("/bad.crl"))
	down := mint(inter, "crl host down", downURL)
	stale := mint(inter, "stale crl", srv.URL("/stale.crl"))
	publishCRL := func(path string, ca *certtest.CA, list []*x509.Certificate, thisUpdate, nextUpdate time.Time) {
		srv.PublishCRL(path, certtest.Must(ca.CRL(list, thisUpdate, nextUpdate)))
	}
	publishCRL("/root.crl", root, []*x509.Certificate{badInter.Cert}, now.Add(-time.Hour), now.Add(24*time.Hour))
	publishCRL("/inter.crl", inter, []*x509.Certificate{revoked.Cert}, now.Add(-time.Hour), now.Add(24*time.Hour))
	publishCRL("/bad.crl", badInter, nil, now.Add(-time.Hour), now.Add(24*time.Hour))
	publishCRL("/stale.crl", inter, nil, now.AddDate(0, 0, -10), now.AddDate(0, 0, -3))

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, root.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"scan", "--ca-file", caFile, "--timeout", "5s", "--output", "json"}
	var downTarget string
	for _, l := range []*certtest.Leaf{good, revoked, under, down, stale} {
		s, err := certtest.Serve("127.0.0.1:0", l.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		args = append(args, "--target", s.Addr().String())
		if l == down {
			downTarget = s.Addr().String()
		}
	}

	// A CRL host that is down never fails a scan, whatever --fail-on
	// short of info.
	stdout, stderr, code := run(t, "scan", "--ca-file", caFile, "--timeout", "5s", "--output", "json", "--fail-on", "notice", "--target", downTarget)
	if code != cli.ExitOK || !strings.Contains(stdout, `"revocation_unavailable"`) || !strings.Contains(stdout, `"tier": "info"`) {
		t.Errorf("scan of an endpoint whose CRL host is down: exit %d, want 0 with an info note; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	config := func(yaml string) string {
		f := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}

	tests := []struct {
		name   string
		config string
		code   int
		want   []string
	}{
		{
			name: "defaults", code: cli.ExitFindings,
			want: []string{"revoked critical revoked", "revoked page under compromised", "revocation_stale info stale crl", "revocation_unavailable info crl host down"},
		},
		{
			name: "stale crl a warning", config: "revocation:\n  stale: warning\n", code: cli.ExitFindings,
			want: []string{"revoked critical revoked", "revoked page under compromised", "revocation_stale warning stale crl", "revocation_unavailable info crl host down"},
		},
		{name: "off", config: "revocation:\n  enabled: false\n", code: cli.ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := args
			if tt.config != "" {
				a = append(slices.Clone(args), "--config", config(tt.config))
			}
			before := srv.Requests("/inter.crl")
			stdout, stderr, code := run(t, a...)
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			var r scan.Report
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatalf("decode JSON report: %v\n%s", err, stdout)
			}
			var got []string
			for _, f := range r.Findings {
				got = append(got, string(f.Kind)+" "+f.Tier.String()+" "+f.Subject)
				if f.Kind == policy.Revoked && !strings.Contains(f.Message, "key compromise") {
					t.Errorf("revoked finding does not say why: %s", f.Message)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			fetches := srv.Requests("/inter.crl") - before
			if want := min(len(tt.want), 1); fetches != want {
				t.Errorf("the shared CRL was fetched %d times in one scan, want %d", fetches, want)
			}
		})
	}
}

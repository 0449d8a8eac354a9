package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/internal/knottest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestScanFollowsDelegations: corp.example on knot delegates
// svc.corp.example to a server on 127.0.0.2 and closed.corp.example to
// one on 127.0.0.3 that refuses transfers. The scan of corp.example alone
// finds the wildcard certificate of the child, about to expire, as one
// finding listing both of its endpoints, and says the refused child is
// not watched: a coverage_gap naming the zone, its name server and the fix.
func TestScanFollowsDelegations(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := certtest.MustCA("Delegation Test Root", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	wildcard := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"*.svc.corp.example"}, NotBefore: now.AddDate(0, -3, 0), NotAfter: now.Add(3 * 24 * time.Hour)})
	a, err := certtest.Serve("127.0.0.21:0", wildcard.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	tlsPort := fmt.Sprint(a.Addr().Port())
	b, err := certtest.Serve(net.JoinHostPort("127.0.0.22", tlsPort), wildcard.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	k := knottest.Start(t, knottest.Zone{Name: "corp.example", Transfer: knottest.TransferLoopback, Text: `
@          SOA  ns1 hostmaster 1 3600 600 86400 300
@          NS   ns1
ns1        A    127.0.0.1
svc        NS   ns.svc
ns.svc     A    127.0.0.2
closed     NS   ns.closed
ns.closed  A    127.0.0.3
`})
	child, err := dnstest.StartAt("127.0.0.2:0", dnstest.Zone{Name: "svc.corp.example", Text: "a A 127.0.0.21\nb A 127.0.0.22\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Close() })
	_, dnsPort, _ := net.SplitHostPort(child.Addr())
	closed, err := dnstest.StartAt(net.JoinHostPort("127.0.0.3", dnsPort), dnstest.Zone{Name: "closed.corp.example", RefuseTransfer: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closed.Close() })

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, fmt.Sprintf(`zones:
  - name: corp.example
    nameserver: %s
ports: [%s]
ca_files: [%q]
probe: {timeout: 2s, allow_loopback: true}
coverage: {delegation_port: %s}
`, k.Addr, tlsPort, caFile, dnsPort))

	stdout, stderr, code := run(t, "scan", "--config", cfg, "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	var expiring, gap *policy.Finding
	for i, f := range r.Findings {
		switch {
		case f.Kind == policy.Expiring && f.Subject == "*.svc.corp.example":
			expiring = &r.Findings[i]
		case f.Kind == policy.CoverageGap:
			if gap != nil {
				t.Errorf("second coverage gap: %+v", f)
			}
			gap = &r.Findings[i]
		}
	}
	if expiring == nil || expiring.Tier != policy.Page || len(expiring.Endpoints) != 2 ||
		expiring.Endpoints[0].Name != "a.svc.corp.example" || expiring.Endpoints[1].Name != "b.svc.corp.example" {
		t.Errorf("expiring wildcard of the followed child = %+v, want one page finding with a.svc and b.svc", expiring)
	}
	if gap == nil || gap.Tier != policy.Warning || gap.Name != "closed.corp.example" ||
		!strings.Contains(gap.Message, "ns.closed.corp.example") || !strings.Contains(gap.Message, "allow transfers from this host, or add the zone with its own nameserver/tsig") {
		t.Errorf("refused child = %+v, want a warning coverage_gap naming closed.corp.example, its name server and the fix", gap)
	}
	if len(r.Sources) != 1 || r.Sources[0].Error != "" {
		t.Errorf("sources = %+v, want corp.example without error: a refused child is a gap, not a failed source", r.Sources)
	}
}

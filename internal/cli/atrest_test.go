package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestScanFileRenewalNotDeployed: an endpoint serves a certificate that a
// file (--file) holds the renewal of; the scan reports it stale_deployment
// naming the file and saying to reload, lists the file's certificates at
// rest, and a file that cannot be read fails the source loudly.
func TestScanFileRenewalNotDeployed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	day := 24 * time.Hour
	root := certtest.MustCA("Rest Root", now.Add(-365*day), now.Add(3650*day))
	inter := root.MustIntermediate("Rest Issuing", now.Add(-365*day), now.Add(1000*day))
	old := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"localhost"}, NotBefore: now.Add(-300 * day), NotAfter: now.Add(60 * day)})
	renewed := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"localhost"}, NotBefore: now.Add(-day), NotAfter: now.Add(400 * day)})
	srv, err := certtest.Serve("127.0.0.1:0", old.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	dir := t.TempDir()
	caFile := filepath.Join(dir, "root.pem")
	newFile := filepath.Join(dir, "etc", "api.pem")
	for p, b := range map[string][]byte{caFile: root.PEM(), newFile: certtest.PEM(renewed.Cert, inter.Cert)} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := strconv.Itoa(int(srv.Addr().Port()))
	stdout, stderr, code := run(t, "scan", "--target", "localhost:"+port, "--ca-file", caFile, "--file", filepath.Join(dir, "etc", "**"), "--timeout", "2s", "--output", "json", "--fail-on", "warning")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d, want %d (a stale deployment is a warning at least); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	var stale *policy.Finding
	for i, f := range r.Findings {
		if f.Kind == policy.StaleDeployment {
			stale = &r.Findings[i]
		}
	}
	if stale == nil || !strings.HasPrefix(stale.Message, "renewed in file "+newFile+" on ") || !strings.Contains(stale.Message, "still serves the old one") ||
		!strings.Contains(stale.Message, "reload or restart what serves it") || len(stale.Endpoints) != 1 {
		t.Fatalf("stale deployment = %+v, want one naming %s; report:\n%s", stale, newFile, stdout)
	}
	if len(r.AtRest) != 2 || r.Sources[len(r.Sources)-1].Certificates != 2 {
		t.Errorf("at rest: %d certificates, sources %+v; want the renewed leaf and its intermediate", len(r.AtRest), r.Sources)
	}

	// A file that cannot be read: the source fails, loudly.
	if err := os.Symlink(filepath.Join(dir, "gone.pem"), filepath.Join(dir, "etc", "dangling.pem")); err != nil {
		t.Fatal(err)
	}
	stdout, _, _ = run(t, "scan", "--target", "localhost:"+port, "--ca-file", caFile, "--file", filepath.Join(dir, "etc", "**"), "--timeout", "2s", "--output", "json")
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	failed := false
	for _, f := range r.Findings {
		failed = failed || (f.Kind == policy.DiscoveryFailed && strings.Contains(f.Message, "dangling.pem"))
	}
	if !failed {
		t.Errorf("no discovery_failed naming dangling.pem; report:\n%s", stdout)
	}
}

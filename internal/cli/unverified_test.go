package cli_test

import (
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
)

// TestScanNothingAnswered scans zones whose endpoints did not answer, or
// that had nothing to probe: each must exit 3 with one line saying so,
// never 0 with "no findings". The failure share is the daemon's storm
// guard's (notify.storm.max_failure_share).
func TestScanNothingAnswered(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := certtest.MustCA("Unverified Test Root", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"*.share.example", "*.mostly.example", "*.hung.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 6, 0)})
	tlsSrv, err := certtest.Serve("127.0.0.1:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tlsSrv.Close() })
	port := tlsSrv.Addr().Port() // nothing listens on it at 127.0.0.2: refused
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	// A listener nobody accepts on: the TCP handshake completes (backlog),
	// the TLS handshake never does, as on a hung load balancer.
	tarpit, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tarpit.Close() })
	// The same on 127.0.0.4 at the port the zones are probed on.
	hung, err := net.Listen("tcp", fmt.Sprintf("127.0.0.4:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Close() })
	garbage, err := certtest.ServeGarbage("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { garbage.Close() })

	names := func(n int, addr string, prefix string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s%d A %s\n", prefix, i, addr)
		}
		return b.String()
	}
	srv, err := dnstest.Start(
		dnstest.Zone{Name: "refused.example", Text: names(3, "127.0.0.2", "down")},
		dnstest.Zone{Name: "share.example", Text: names(4, "127.0.0.1", "up") + names(6, "127.0.0.2", "down")},
		dnstest.Zone{Name: "mostly.example", Text: names(6, "127.0.0.1", "up") + names(4, "127.0.0.2", "down")},
		dnstest.Zone{Name: "hung.example", Text: names(4, "127.0.0.1", "up") + names(6, "127.0.0.4", "hung")},
		dnstest.Zone{Name: "empty.example", Text: "@ NS ns1.elsewhere.example.\n@ TXT \"nothing here\"\n"},
		dnstest.Zone{Name: "wild.example", Text: "* A 127.0.0.1\n"},
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `zones:
  - name: empty.example
    nameserver: %s
    allow_empty: true
notify:
  storm:
    max_failure_share: 0.7
`, srv.Addr()), 0o600); err != nil {
		t.Fatal(err)
	}

	const network = "likely a network problem on this host"
	tests := []struct {
		name string
		args []string
		code int
		line string // the first line of stderr; empty: stderr is empty
	}{
		{
			name: "every endpoint refused", args: []string{"--zone", "refused.example"}, code: cli.ExitUnverified,
			line: "certwatch: no certificate from any of the 3 endpoint(s) (3 refused), so nothing was checked: " + network + ", or the services are down",
		},
		{
			name: "every endpoint timed out", args: []string{"--target", tarpit.Addr().String(), "--timeout", "200ms"}, code: cli.ExitUnverified,
			line: "certwatch: no certificate from any of the 1 endpoint(s) (1 timeout), so nothing was checked",
		},
		{
			name: "every endpoint answered, none with TLS", args: []string{"--target", garbage.Addr().String()}, code: cli.ExitUnverified,
			line: "certwatch: no certificate from any of the 1 endpoint(s) (1 not_tls), so nothing was checked: the servers answered, but no TLS handshake completed",
		},
		{
			// A refused port is an answer: most names of a zone scanned
			// on extra ports refuse them.
			name: "6 of 10 refused", args: []string{"--zone", "share.example"}, code: cli.ExitOK,
		},
		{
			// 1s, not less: the answering endpoints must answer in time
			// on a loaded machine under -race.
			name: "6 of 10 unanswered", args: []string{"--zone", "hung.example", "--timeout", "1s"}, code: cli.ExitUnverified,
			line: "certwatch: 6 of 10 endpoints (60%) went unanswered (6 timeout), more than notify.storm.max_failure_share (0.5): " + network + " or an outage",
		},
		{
			name: "4 of 10 refused", args: []string{"--zone", "mostly.example"}, code: cli.ExitOK,
		},
		{
			name: "6 of 10 unanswered, share raised in the config", args: []string{"--config", cfg, "--zone", "hung.example", "--timeout", "1s"}, code: cli.ExitOK,
		},
		{
			name: "zone with no name to probe", args: []string{"--zone", "empty.example"}, code: cli.ExitUnverified,
			line: "certwatch: zone empty.example transferred with no name to probe, so nothing in it was checked; if that is expected, pass --allow-empty (or allow_empty: true on the zone)",
		},
		{
			name: "zone with no name to probe, --allow-empty", args: []string{"--zone", "empty.example", "--allow-empty"}, code: cli.ExitOK,
		},
		{
			name: "zone with no name to probe, allow_empty in the config", args: []string{"--config", cfg}, code: cli.ExitOK,
		},
		{
			name: "empty zone beside a working one", args: []string{"--zone", "empty.example", "--zone", "mostly.example"}, code: cli.ExitUnverified,
			line: "certwatch: zone empty.example transferred with no name to probe",
		},
		{
			name: "only wildcards", args: []string{"--zone", "wild.example"}, code: cli.ExitUnverified,
			line: "certwatch: nothing was probed: the sources found 1 targets, none of them probeable (1 skipped), so nothing was checked",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"scan", "--nameserver", srv.Addr(), "--ports", fmt.Sprint(port), "--ca-file", caFile, "--allow-loopback"}, tt.args...)
			if tt.args[0] == "--target" {
				args = append([]string{"scan", "--ca-file", caFile}, tt.args...)
			}
			stdout, stderr, code := run(t, args...)
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d; stderr:\n%s\nstdout:\n%s", code, tt.code, stderr, stdout)
			}
			if tt.line == "" {
				if stderr != "" {
					t.Errorf("stderr = %q, want nothing", stderr)
				}
				return
			}
			if !strings.HasPrefix(stderr, tt.line) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("stderr = %q\nwant one line starting %q", stderr, tt.line)
			}
			if stdout == "" {
				t.Errorf("no report printed")
			}
		})
	}
}

package cli_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
)

// TestScanNotifyDeadChannel runs scan --notify against a Slack that is
// not there: it gives up after --notify-timeout, saying so in one line, and
// exits 1, instead of hanging for minutes.
func TestScanNotifyDeadChannel(t *testing.T) {
	now := time.Now()
	self := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: []string{"printer.example"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 6, 0)})
	s, err := certtest.Serve("127.0.0.1:0", self.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	dead := certtest.RefusingAddr(t, netip.MustParseAddr("127.0.0.1")).String()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `targets: [%q]
notify:
  state: %q
  channels:
    - name: certs
      kind: slack
      slack: {channel: "#certs", token_env: CW_DEAD_SLACK_TOKEN, api_url: "http://%s/"}
  routes:
    - tiers: [page, critical]
      channels: [certs]
`, s.Addr().String(), filepath.Join(dir, "state.db"), dead), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CW_DEAD_SLACK_TOKEN", "xoxb-dead")
	start := time.Now()
	_, stderr, code := run(t, "scan", "--config", cfg, "--notify", "--notify-timeout", "1s")
	elapsed := time.Since(start)
	if code != cli.ExitFindings {
		t.Errorf("exit code = %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	if want := "outbox not drained within notify.flush_timeout (1s, --notify-timeout); the rest is delivered on the next run"; !strings.Contains(stderr, want) {
		t.Errorf("stderr = %q, want it to say %q", stderr, want)
	}
	if elapsed > 10*time.Second {
		t.Errorf("scan --notify took %v against a dead channel, want about the 1s --notify-timeout", elapsed)
	}
}

// freeAddr returns a loopback address nothing listens on, for a daemon
// to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

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
	"github.com/certwatch/certwatch/internal/slacktest"
)

// TestScanNotifyTargetLabels: a route matching a static target's label
// (targets[].labels) sends that target's finding to its channel, and only
// there; an unlabelled target's finding takes the routes without a match.
func TestScanNotifyTargetLabels(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("labels test root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func(cn string) string {
		leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: cn, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: now.Add(-80 * 24 * time.Hour), NotAfter: now.Add(10 * 24 * time.Hour)}) // warning
		s, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s.Addr().String()
	}
	payAddr, plainAddr := serve("pay-vault"), serve("plain-web")

	sl := slacktest.New(t, slackToken, "#certs", "#payments")
	t.Setenv("CW_E2E_SLACK_TOKEN", slackToken)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`targets:
  - {address: %q, labels: {team: payments}}
  - %q
ca_files: [%q]
probe: {timeout: 2s, retries: 0, allow_loopback: true}
notify:
  state: %q
  channels:
    - name: certs
      kind: slack
      slack: {channel: "#certs", token_env: CW_E2E_SLACK_TOKEN, api_url: %q}
    - name: payments
      kind: slack
      slack: {channel: "#payments", token_env: CW_E2E_SLACK_TOKEN, api_url: %q}
  routes:
    - tiers: [warning]
      channels: [certs]
    - tiers: [warning]
      match: {labels: {team: payments}}
      channels: [payments]
`, payAddr, plainAddr, caFile, filepath.Join(dir, "state.db"), sl.URL(), sl.URL())), 0o600); err != nil {
		t.Fatal(err)
	}

	_, stderr, code := run(t, "scan", "--config", cfg, "--notify")
	if code != cli.ExitOK {
		t.Fatalf("scan exit code = %d, want 0 (two warnings); stderr:\n%s", code, stderr)
	}
	text := func(channel string) string {
		var b strings.Builder
		for _, m := range sl.TopLevel(channel) {
			b.WriteString(m.Text + m.Blocks + "\n")
		}
		return b.String()
	}
	pay, certs := text("#payments"), text("#certs")
	if n := len(sl.TopLevel("#payments")); n != 1 || !strings.Contains(pay, "pay-vault") || strings.Contains(pay, "plain-web") {
		t.Errorf("#payments has %d posts, want the labelled target's finding (pay-vault) alone:\n%s", n, pay)
	}
	if !strings.Contains(certs, "plain-web") || strings.Contains(certs, "pay-vault") {
		t.Errorf("#certs, want the unlabelled target's finding (plain-web) and not the labelled one (its label route wins):\n%s", certs)
	}
}

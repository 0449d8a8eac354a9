package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/slacktest"
)

// TestNotifyTestReadsOnlyThatChannelsSecret: a channel whose secret is
// missing does not stop another from being tested; testing it says which
// secret is missing.
func TestNotifyTestReadsOnlyThatChannelsSecret(t *testing.T) {
	sl := slacktest.New(t, slackToken, "#certs")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	conf := fmt.Sprintf(`notify:
  state: %q
  channels:
    - name: certs
      kind: slack
      slack: {channel: "#certs", token_env: CW_TEST_SLACK_TOKEN, api_url: %q}
    - name: oncall
      kind: pagerduty
      pagerduty: {routing_key_env: CW_TEST_PD_KEY_NOT_SET}
  routes:
    - {tiers: [warning], channels: [certs]}
    - {tiers: [page], channels: [oncall]}
`, filepath.Join(dir, "state.db"), sl.URL())
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CW_TEST_SLACK_TOKEN", slackToken)
	os.Unsetenv("CW_TEST_PD_KEY_NOT_SET")

	stdout, stderr, code := run(t, "notify", "test", "--config", cfg, "--channel", "certs")
	if code != 0 || !strings.Contains(stdout, "delivered to certs") {
		t.Fatalf("notify test certs with oncall's key missing: code %d, stdout %q, stderr %q; want it delivered", code, stdout, stderr)
	}
	if got := sl.TopLevel("#certs"); len(got) != 1 || !strings.Contains(got[0].Text, "test message") {
		t.Errorf("#certs got %d messages, want the test message", len(got))
	}
	_, stderr, code = run(t, "notify", "test", "--config", cfg, "--channel", "oncall")
	if code != 2 || !strings.Contains(stderr, "channel oncall") || !strings.Contains(stderr, "CW_TEST_PD_KEY_NOT_SET is not set") || strings.Contains(stderr, "certs") {
		t.Errorf("notify test oncall without its key: code %d, stderr %q; want 2 naming oncall's missing variable only", code, stderr)
	}
}

package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/pagerdutytest"
	"github.com/certwatch/certwatch/internal/slacktest"
)

// TestScanNotify runs 'certwatch scan --notify' twice against the lab with
// Slack and PagerDuty fakes: the first run pages once per paging finding, the
// second announces nothing new, and 'alerts' lists what is open. It runs on
// a SQLite state file and on a PostgreSQL database.
func TestScanNotify(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { testScanNotify(t, func(cfg string) string { return cfg }) })
	t.Run("postgres", func(t *testing.T) {
		srv := pgPW.Server(t)
		url := srv.CreateDatabase(t)
		pw := secretFile(t, stateDBPassword)
		testScanNotify(t, func(cfg string) string {
			if !stateLine.MatchString(cfg) {
				t.Fatal("the configuration has no notify.state line to point at PostgreSQL")
			}
			return stateLine.ReplaceAllString(cfg, fmt.Sprintf("  state: %q\n  state_password_file: %q\n", url, pw))
		})
	})
}

// secretFile writes secret to a file of its own and returns its path.
func secretFile(t *testing.T, secret string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// channelSecretsInFiles rewrites runConfig's channels to read their
// secrets from files rather than this process's environment, which a
// test running beside others must not set.
func channelSecretsInFiles(t *testing.T, cfg string) string {
	return strings.NewReplacer(
		"token_env: CW_E2E_SLACK_TOKEN", fmt.Sprintf("token_file: %q", secretFile(t, slackToken)),
		"routing_key_env: CW_E2E_PD_KEY", fmt.Sprintf("routing_key_file: %q", secretFile(t, pdKey)),
	).Replace(cfg)
}

var stateLine = regexp.MustCompile(`(?m)^  state: .*\n`)

func testScanNotify(t *testing.T, edit func(cfg string) string) {
	l := startLab(t)
	sl := slacktest.New(t, slackToken, "#certs")
	pd := pagerdutytest.New(t, pdKey)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	// A scan has no sweep to fit in: a longer probe timeout than the
	// daemon tests' 2s, as a handshake of the lab took more than 2s on a
	// loaded CI machine (the race detector, every package at once on 2
	// cores) and the revoked leaf was first seen by the second scan.
	text := strings.Replace(runConfig(l, dir, sl.URL(), pd.URL()), "probe:\n  timeout: 2s\n", "probe:\n  timeout: 4s\n", 1)
	if !strings.Contains(text, "timeout: 4s") {
		t.Fatal("runConfig has no probe timeout of 2s to lengthen")
	}
	if err := os.WriteFile(cfg, []byte(edit(channelSecretsInFiles(t, text))), 0o600); err != nil {
		t.Fatal(err)
	}

	_, stderr, code := run(t, "scan", "--config", cfg, "--notify", "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("first scan exit code = %d, want 1; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "Notified:") {
		t.Errorf("stderr lacks the notification summary:\n%s", stderr)
	}
	alerts := pd.Alerts()
	if len(alerts) < len(pagedSubjects) {
		t.Errorf("%d PagerDuty alerts, want at least %d (one per paging finding)", len(alerts), len(pagedSubjects))
	}
	for _, s := range pagedSubjects {
		found := false
		for _, a := range alerts {
			found = found || strings.Contains(a.Summary, s)
		}
		if !found {
			t.Errorf("no PagerDuty alert for %s", s)
		}
	}
	posts := len(sl.TopLevel("#certs"))
	if posts == 0 {
		t.Fatal("no Slack post in #certs")
	}

	// A second run of the same state announces nothing new.
	if _, stderr, code = run(t, "scan", "--config", cfg, "--notify", "--output", "json"); code != cli.ExitFindings {
		t.Fatalf("second scan exit code = %d; stderr:\n%s", code, stderr)
	}
	for _, a := range pd.Alerts() {
		if a.Opened != 1 {
			t.Errorf("PagerDuty alert %q opened %d times, want once", a.Summary, a.Opened)
		}
	}
	if got := len(sl.TopLevel("#certs")); got != posts {
		t.Errorf("Slack posts after the second run = %d, want still %d", got, posts)
	}
	if secret := slackToken + pdKey; strings.Contains(stderr, slackToken) || strings.Contains(stderr, pdKey) {
		t.Errorf("a secret of %q appears in stderr", secret)
	}

	stdout, stderr, code := run(t, "alerts", "--config", cfg, "--output", "json")
	if code != 0 {
		t.Fatalf("alerts exit code = %d; stderr: %s", code, stderr)
	}
	var open []struct {
		Tier    string `json:"tier"`
		Finding struct {
			Kind string `json:"kind"`
		} `json:"finding"`
	}
	if err := json.Unmarshal([]byte(stdout), &open); err != nil {
		t.Fatalf("alerts JSON: %v\n%s", err, stdout)
	}
	if len(open) < len(pagedSubjects) {
		t.Errorf("alerts lists %d open alerts, want at least %d", len(open), len(pagedSubjects))
	}
	if strings.Contains(stdout, "resolved_at") || strings.Contains(stdout, "0001-01-01") {
		t.Errorf("open alerts carry resolved_at or a zero time:\n%.800s", stdout)
	}

	// The table names each alert's channels in a stable order.
	table, _, _ := run(t, "alerts", "--config", cfg)
	for _, line := range strings.Split(table, "\n") {
		if strings.Contains(line, "expired.internal.example") && !strings.HasSuffix(strings.TrimSpace(line), "certs,oncall") {
			t.Errorf("alerts row %q, want channels listed as certs,oncall", line)
		}
	}

	// notify test reaches the channel at once.
	if _, stderr, code := run(t, "notify", "test", "--config", cfg, "--channel", "certs"); code != 0 {
		t.Fatalf("notify test exit code = %d; stderr: %s", code, stderr)
	}
	if got := len(sl.TopLevel("#certs")); got != posts+1 {
		t.Errorf("Slack posts after notify test = %d, want %d", got, posts+1)
	}
	if _, stderr, code := run(t, "notify", "test", "--config", cfg, "--channel", "nope"); code != cli.ExitUsage || !strings.Contains(stderr, "certs, oncall") {
		t.Errorf("notify test of an unknown channel: code %d, stderr %q; want 2 naming the configured channels", code, stderr)
	}
}

func TestScanNotifyNeedsChannels(t *testing.T) {
	_, stderr, code := run(t, "scan", "--target", "127.0.0.1:1", "--notify")
	if code != cli.ExitUsage || !strings.Contains(stderr, "no channels configured") {
		t.Errorf("code %d, stderr %q; want 2 and a hint about notify.channels", code, stderr)
	}
}

// TestNotifyTestRefused: a channel that refuses the test message exits 1
// with one error line naming the channel once and the service's answer.
func TestNotifyTestRefused(t *testing.T) {
	pd := pagerdutytest.New(t, pdKey)
	pd.Script(pagerdutytest.Response{Status: 400})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	conf := fmt.Sprintf(`notify:
  state: %q
  channels:
    - name: oncall
      kind: pagerduty
      pagerduty: {routing_key_env: CW_E2E_PD_KEY, url: %q}
  routes:
    - {tiers: [page], channels: [oncall]}
`, filepath.Join(dir, "state.db"), pd.URL())
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CW_E2E_PD_KEY", pdKey)
	_, stderr, code := run(t, "notify", "test", "--config", cfg, "--channel", "oncall")
	if code != 1 || strings.Count(stderr, "notify test oncall") != 1 || !strings.Contains(stderr, "http 400") {
		t.Errorf("notify test refused: code %d, stderr %q; want 1 and one error naming the channel once", code, stderr)
	}
	if strings.Contains(stderr, pdKey) {
		t.Error("stderr contains the routing key")
	}
}

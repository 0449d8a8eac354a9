package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigWarnsPlainHTTPSecrets: a channel whose URL is plain
// http:// sends its token or routing key readable on the way; check-config
// says so (the file is still valid), and leaves https and loopback alone.
// A plain http:// webhook sends no secret but each finding, and is warned
// of too; an Alertmanager URL, which carries neither a secret nor leaves
// the cluster as a rule, is not.
func TestCheckConfigWarnsPlainHTTPSecrets(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte(`zones: [{name: internal.example}]
notify:
  channels:
    - {name: proxied, kind: slack, slack: {channel: "#certs", token_env: SLACK_TOKEN, api_url: "http://slack-proxy.corp.example:8080/api/"}}
    - {name: pd-plain, kind: pagerduty, pagerduty: {routing_key_env: PD_KEY, url: "http://pd-relay.corp.example/v2/enqueue?x=1"}}
    - {name: tls, kind: slack, slack: {channel: "#certs", token_env: SLACK_TOKEN, api_url: "https://slack-proxy.corp.example/api/"}}
    - {name: sidecar, kind: pagerduty, pagerduty: {routing_key_env: PD_KEY, url: "http://127.0.0.1:9000/v2/enqueue"}}
    - {name: default, kind: pagerduty, pagerduty: {routing_key_env: PD_KEY}}
    - {name: hook-plain, kind: webhook, webhook: {url: "http://hooks.corp.example/certwatch", secret_env: HOOK_SECRET}}
    - {name: hook-tls, kind: webhook, webhook: {url: "https://hooks.corp.example/certwatch", secret_env: HOOK_SECRET}}
    - {name: am, kind: alertmanager, alertmanager: {url: "http://alertmanager.monitoring:9093"}}
  routes:
    - {tiers: [warning], channels: [proxied, pd-plain, tls, sidecar, default, hook-plain, hook-tls, am]}
`), 0o600)
	_, stderr, code := run(t, "check-config", file)
	if code != 0 {
		t.Fatalf("exit code = %d, want 0 (valid, with warnings); stderr:\n%s", code, stderr)
	}
	want := []string{
		"certwatch: warning: notify: channel proxied: slack: api_url: plain http (http://slack-proxy.corp.example:8080): the bot token would cross the network unencrypted; use https://",
		"certwatch: warning: notify: channel pd-plain: pagerduty: url: plain http (http://pd-relay.corp.example): the routing key would cross the network unencrypted; use https://",
		"certwatch: warning: notify: channel hook-plain: webhook: url: plain http (http://hooks.corp.example): each finding (names, addresses, deadlines) would cross the network unencrypted, readable on the path (the signing secret is never sent, and the signature proves who sent a body, not that nobody else read it); use https://",
	}
	if got := strings.TrimSpace(stderr); got != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

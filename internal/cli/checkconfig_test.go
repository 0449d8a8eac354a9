package cli_test

import (
	"fmt"
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

// TestCheckConfigRefuses: check-config refuses what run would refuse, at
// the key's line, and never repeats a credential from the file: each case
// is a file, the exit code, what stderr says and what neither output may
// hold.
func TestCheckConfigRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name   string
		yaml   string
		code   int
		stderr []string // "" when valid
		stdout []string
		never  []string
		token  string // written to {dir}/token-N when set
	}{
		{name: "acme directory with a password and a query",
			yaml: "acme:\n  directories:\n    - url: \"https://acct:hunter2@acme.example/directory?token=s3cret\"\n      issuers: [Example CA]\n",
			code: 2, stderr: []string{`line 3: acme: directories[0]: url "https://acme.example/directory?redacted": remove the user and password`},
			never: []string{"hunter2", "acct", "s3cret"}},
		{name: "acme directory url not https",
			yaml: "acme:\n  directories:\n    - url: \"http://acme.example/directory?token=s3cret\"\n      issuers: [Example CA]\n",
			code: 2, stderr: []string{`line 3: acme: directories[0]: url "http://acme.example/directory?redacted": want the https URL`},
			never: []string{"s3cret"}},
		{name: "acme directory with a query",
			yaml: "acme:\n  directories:\n    - url: \"https://acme.example/directory?token=s3cret\"\n      issuers: [Example CA]\n",
			code: 0, stdout: []string{"url: https://acme.example/directory?redacted"}, never: []string{"s3cret"}},
		{name: "silence token of one byte",
			yaml: "serve:\n  silence_token_file: {token}\n", token: "Z\n",
			code: 2, stderr: []string{"line 2: serve.silence_token_file: the token has 1 bytes, fewer than the 16 required: make a random one (openssl rand -hex 16)"}},
		{name: "silence token file empty",
			yaml: "serve:\n  silence_token_file: {token}\n", token: " \n",
			code: 2, stderr: []string{"line 2: serve.silence_token_file: secret file ", "is empty"}},
		{name: "silence token file missing",
			yaml: "serve:\n  silence_token_file: /nonexistent/certwatch-token\n",
			code: 2, stderr: []string{"line 2: serve.silence_token_file: read secret file: open /nonexistent/certwatch-token: no such file or directory"}},
		{name: "silence token variable not set",
			yaml: "serve:\n  silence_token_env: CERTWATCH_TEST_UNSET_SILENCE_TOKEN\n",
			code: 2, stderr: []string{"line 2: serve.silence_token_env: environment variable CERTWATCH_TEST_UNSET_SILENCE_TOKEN is not set"}},
		{name: "silence token of 16 bytes",
			yaml: "serve:\n  silence_token_file: {token}\n", token: "0123456789abcdef\n",
			code: 0, never: []string{"0123456789abcdef"}},
		{name: "acme issuer empty",
			yaml: "acme:\n  directories:\n    - url: https://acme.example/directory\n      issuers: [\"\"]\n",
			code: 2, stderr: []string{"line 4: acme: directories[0]: issuers[0]: empty"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
			if tt.token != "" {
				tok := filepath.Join(dir, fmt.Sprintf("token-%d", i))
				if err := os.WriteFile(tok, []byte(tt.token), 0o600); err != nil {
					t.Fatal(err)
				}
				tt.yaml = strings.ReplaceAll(tt.yaml, "{token}", tok)
			}
			if err := os.WriteFile(file, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := run(t, "check-config", file)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, secret := range tt.never {
				if strings.Contains(stdout+stderr, secret) {
					t.Errorf("check-config repeated %q:\n%s%s", secret, stdout, stderr)
				}
			}
		})
	}
}

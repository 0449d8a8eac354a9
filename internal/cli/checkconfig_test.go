package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/cli"
)

// TestCheckConfigWarnsPlainHTTPSecrets: a channel whose URL is plain
// http:// sends its token or routing key readable on the way; check-config
// says so (the file is still valid), and leaves https and loopback alone.
// A plain http:// webhook sends no secret but each finding, and is warned
// of too; an Alertmanager URL, which carries neither a secret nor leaves
// the cluster as a rule, is not.
func TestCheckConfigWarnsPlainHTTPSecrets(t *testing.T) {
	// The secrets must be there: check-config reads them as run does.
	for _, v := range []string{"SLACK_TOKEN", "PD_KEY", "HOOK_SECRET"} {
		t.Setenv(v, "a-secret")
	}
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
			code: 2, stderr: []string{"line 2: serve.silence_token_file: secret file /nonexistent/certwatch-token does not exist"}},
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

// TestCheckConfigRefusesWhatRunRefuses: every configuration `certwatch
// run` refuses at start for a variable, a file or a secret is refused by
// check-config too, with the same line naming the key, and run refuses it
// before it creates the state file.
func TestCheckConfigRefusesWhatRunRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty-secret", "\n")
	notBase64 := write("tsig-not-base64", "!!not base64!!\n")
	notPEM := write("not-a-ca.pem", "hello\n")
	slack := `  channels:
    - {name: certs, kind: slack, slack: {channel: "#certs", %s}}
  routes:
    - {tiers: [warning], channels: [certs]}
`
	tests := []struct {
		name string
		body string // after "notify:\n  state: STATE\n" and a zone
		want string
	}{
		{"ca_files entry missing", "ca_files: [/nonexistent/root.pem]\n",
			"line 7: ca_files: /nonexistent/root.pem does not exist"},
		{"ca_files entry without a certificate", "ca_files: [" + notPEM + "]\n",
			"line 7: ca_files: " + notPEM + ": no PEM certificate found"},
		{"token_env unset", "notify:\n" + fmt.Sprintf(slack, "token_env: CW_CHECKCFG_UNSET_TOKEN"),
			"line 8: notify: channel certs: slack token: environment variable CW_CHECKCFG_UNSET_TOKEN is not set"},
		{"token_file empty", "notify:\n" + fmt.Sprintf(slack, "token_file: "+empty),
			"line 8: notify: channel certs: slack token: secret file " + empty + " is empty"},
		{"routing_key_file missing", `notify:
  channels:
    - name: oncall
      kind: pagerduty
      pagerduty:
        routing_key_file: /nonexistent/pd-key
  routes:
    - {tiers: [page], channels: [oncall]}
`, "line 11: notify: channel oncall: pagerduty routing key: secret file /nonexistent/pd-key does not exist"},
		{"webhook secret_env unset", `notify:
  channels:
    - {name: hooks, kind: webhook, webhook: {url: "https://hooks.example/certwatch", secret_env: CW_CHECKCFG_UNSET_HOOK}}
  routes:
    - {tiers: [page], channels: [hooks]}
`, "line 8: notify: channel hooks: webhook secret: environment variable CW_CHECKCFG_UNSET_HOOK is not set"},
		{"tsig secret_file missing", `zones:
  - name: signed.example
    nameserver: 127.0.0.1:53
    tsig:
      name: transfer-key
      algorithm: hmac-sha256
      secret_file: /nonexistent/tsig
`, "line 13: zone signed.example: tsig: secret file /nonexistent/tsig does not exist"},
		{"tsig secret_file not base64", `zones:
  - name: signed.example
    nameserver: 127.0.0.1:53
    tsig: {name: transfer-key, algorithm: hmac-sha256, secret_file: ` + notBase64 + `}
`, "line 10: zone signed.example: secret_file " + notBase64 + ": tsig key transfer-key: secret is not valid base64"},
		{"tsig secret_env unset", `zones:
  - name: signed.example
    nameserver: 127.0.0.1:53
    tsig: {name: transfer-key, algorithm: hmac-sha256, secret_env: CW_CHECKCFG_UNSET_TSIG}
`, "line 10: zone signed.example: tsig: environment variable CW_CHECKCFG_UNSET_TSIG is not set"},
		{"files passphrase_env unset", `files:
  - paths: ["/nonexistent/*.p12"]
    passphrase_env: CW_CHECKCFG_UNSET_PASS
`, "line 9: files[0]: passphrase: environment variable CW_CHECKCFG_UNSET_PASS is not set"},
		{"kubeconfig missing", `kubernetes:
  - name: prod
    kubeconfig: /nonexistent/prod.kubeconfig
    context: prod
`, "line 9: kubernetes prod: kubeconfig: /nonexistent/prod.kubeconfig does not exist"},
		{"kubeconfig without the context", `kubernetes:
  - name: prod
    kubeconfig: ` + write("kubeconfig", "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n") + `
    context: prod
`, "line 8: config: kubernetes prod: kubeconfig"},
		{"heartbeat url_env unset", "daemon:\n  heartbeat: {url_env: CW_CHECKCFG_UNSET_BEAT}\n",
			"line 8: daemon: heartbeat: url: environment variable CW_CHECKCFG_UNSET_BEAT is not set"},
		{"state directory missing", "notify:\n  state: /nonexistent/certwatch/state.db\n",
			"line 7: notify: state: directory /nonexistent/certwatch does not exist"},
		{"silence token file missing", "serve:\n  silence_token_file: /nonexistent/token\n",
			"line 8: serve.silence_token_file: secret file /nonexistent/token does not exist"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			state := filepath.Join(dir, fmt.Sprintf("state-%d", i), "state.db")
			os.Mkdir(filepath.Dir(state), 0o700)
			// The target is a source, so that run gets as far as it can;
			// a body with notify: adds its channels to the same section.
			// Either way the body starts at line 7.
			head := fmt.Sprintf("targets: [127.0.0.1:1]\nnotify:\n  state: %q\n", state)
			body := tt.body
			if strings.HasPrefix(body, "notify:\n  state: ") {
				head = "targets: [127.0.0.1:1]\nnotify:\n  # the state is the case's\n"
			}
			if rest, ok := strings.CutPrefix(body, "notify:\n"); ok {
				body = rest
			}
			cfg := write(fmt.Sprintf("case-%d.yaml", i), head+"\n\n\n"+strings.TrimPrefix(body, "\n"))
			_, stderr, code := run(t, "check-config", cfg)
			if code != cli.ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("check-config: exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, tt.want)
			}
			_, runErr, code := run(t, "run", "--config", cfg)
			if code != cli.ExitUsage || !strings.Contains(runErr, tt.want) {
				t.Errorf("run: exit %d, stderr:\n%s\nwant exit 2 and %q", code, runErr, tt.want)
			}
			if _, err := os.Stat(state); err == nil {
				t.Errorf("run created the state %s before refusing the configuration", state)
			}
		})
	}
}

// exampleSecrets are the secrets config.example.yaml reads outside
// itself: the key that names each, and where.
var exampleSecrets = []string{
	"token_env: SLACK_BOT_TOKEN ",
	"slack: {channel: \"#incidents\", token_env: SLACK_BOT_TOKEN}",
	"routing_key_file: /run/secrets/pagerduty-routing-key",
	"secret_file: /run/secrets/certwatch-webhook-secret",
}

// exampleLine returns the line of config.example.yaml holding s.
func exampleLine(t *testing.T, example, s string) int {
	t.Helper()
	before, _, ok := strings.Cut(example, s)
	if !ok {
		t.Fatalf("config.example.yaml no longer holds %q", s)
	}
	return strings.Count(before, "\n") + 1
}

// TestCheckConfigExampleWithoutSecrets: config.example.yaml, in an
// environment without its secrets, is refused by check-config with each
// missing secret at its line, as run refuses it.
func TestCheckConfigExampleWithoutSecrets(t *testing.T) {
	data, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLACK_BOT_TOKEN", "")
	example := string(data)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml") // notify.state is relative: a file beside it
	if err := os.WriteFile(cfg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("line %d: notify: channel certs: slack token: environment variable SLACK_BOT_TOKEN is not set", exampleLine(t, example, exampleSecrets[0])),
		fmt.Sprintf("line %d: notify: channel incidents: slack token: environment variable SLACK_BOT_TOKEN is not set", exampleLine(t, example, exampleSecrets[1])),
		fmt.Sprintf("line %d: notify: channel oncall: pagerduty routing key: secret file /run/secrets/pagerduty-routing-key does not exist", exampleLine(t, example, exampleSecrets[2])),
		fmt.Sprintf("line %d: notify: channel hooks: webhook secret: secret file /run/secrets/certwatch-webhook-secret does not exist", exampleLine(t, example, exampleSecrets[3])),
	}
	for _, args := range [][]string{{"check-config", cfg}, {"run", "--config", cfg}} {
		_, stderr, code := run(t, args...)
		if code != cli.ExitUsage {
			t.Errorf("%s: exit %d, want 2; stderr:\n%s", args[0], code, stderr)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", args[0], w, stderr)
			}
		}
		if n := strings.Count(stderr, "\n"); n != len(want) {
			t.Errorf("%s: %d lines of stderr, want the %d missing secrets only:\n%s", args[0], n, len(want), stderr)
		}
	}
}

// TestCheckConfigExampleWithSecrets: config.example.yaml passes
// check-config once its secrets are there: the variable set, the files
// (moved to a temporary directory) written.
func TestCheckConfigExampleWithSecrets(t *testing.T) {
	data, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	example := string(data)
	for _, f := range []string{"/run/secrets/pagerduty-routing-key", "/run/secrets/certwatch-webhook-secret"} {
		local := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(local, []byte("a-secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		example = strings.ReplaceAll(example, f, local)
	}
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-example")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "check-config", cfg)
	if code != 0 || !strings.Contains(stdout, "is valid") {
		t.Errorf("check-config of config.example.yaml with its secrets: exit %d, stderr:\n%s", code, stderr)
	}
	if strings.Contains(stdout+stderr, "a-secret") || strings.Contains(stdout+stderr, "xoxb-example") {
		t.Errorf("check-config printed a secret:\n%s%s", stdout, stderr)
	}
}

// TestFlagErrorsNameTheFlag: a run given by flags alone is told about the
// flag at fault, as it was written, never about a configuration key it
// did not write; a duration without a unit says so.
func TestFlagErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
		not  string
	}{
		{[]string{"--timeout", "5"}, "scan: --timeout 5: a duration needs a unit, e.g. 5s", "parse error"},
		{[]string{"--timeout", "0s"}, "--timeout 0s: must be above 0 and at most 2m0s, got 0s", "probe"},
		{[]string{"--timeout", "10m"}, "--timeout 10m: must be above 0 and at most 2m0s, got 10m0s", "probe"},
		{[]string{"--concurrency", "0"}, "--concurrency 0: must be 1 to 10000, got 0", "probe"},
		{[]string{"--fail-on", "loud"}, `--fail-on loud: unknown tier "loud"`, "fail_on"},
		{[]string{"--output", "xml"}, `--output xml: unknown format "xml" (want table or json)`, "output:"},
		{[]string{"--delegation-port", "0"}, "--delegation-port 0: invalid port 0: want 1 to 65535", "delegation_port"},
		{[]string{"--notify-timeout", "2h"}, "--notify-timeout 2h: must be above 0 and at most 1h, got 2h0m0s", "flush_timeout"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			_, stderr, code := run(t, append([]string{"scan", "--target", "127.0.0.1:1"}, tt.args...)...)
			if code != cli.ExitUsage || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, tt.not) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2, %q and no %q", code, stderr, tt.want, tt.not)
			}
		})
	}
}

package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/config"
)

const notifyYAML = `
notify:
  state: /var/lib/certwatch/state.db
  runbook_url: https://wiki.example/certs
  channels:
    - name: certs
      kind: slack
      slack: {channel: "#certs", token_env: SLACK_BOT_TOKEN}
    - name: oncall
      kind: pagerduty
      pagerduty: {routing_key_file: /run/secrets/pd}
    - name: stdout
      kind: log
  routes:
    - {tiers: [notice], channels: [certs], digest: true}
    - {tiers: [warning], channels: [certs]}
    - {tiers: [page, critical], channels: [oncall]}
    - tiers: [warning, page, critical]
      channels: [stdout]
      match: {zones: [team-a.example], names: ["*.a.example"]}
  reminders:
    warning: 12h
`

func TestDecodeNotify(t *testing.T) {
	c, err := config.Decode(strings.NewReader(notifyYAML))
	if err != nil {
		t.Fatal(err)
	}
	n := c.Notify
	if len(n.Channels) != 3 || len(n.Routes) != 4 {
		t.Fatalf("channels, routes = %d, %d, want 3, 4", len(n.Channels), len(n.Routes))
	}
	if got := n.Channels[0].Slack.Channel; got != "#certs" {
		t.Errorf("slack channel = %q, want #certs", got)
	}
	if got, want := time.Duration(n.Reminders["warning"]), 12*time.Hour; got != want {
		t.Errorf("warning reminder = %v, want %v", got, want)
	}
	if got, want := time.Duration(n.Reminders["notice"]), 7*24*time.Hour; got != want {
		t.Errorf("notice reminder kept from defaults = %v, want %v", got, want)
	}
	if n.ResolveAfter != 2 || n.Storm.MaxNewFindings != 20 || n.Storm.MaxFailureShare != 0.5 {
		t.Errorf("defaults not applied: resolve_after %d, storm %+v", n.ResolveAfter, n.Storm)
	}
	if time.Duration(n.SendTimeout) != 30*time.Second {
		t.Errorf("send_timeout = %v, want the default 30s", n.SendTimeout)
	}
	if time.Duration(n.DigestInterval) != 24*time.Hour || time.Duration(n.Retry.AlertAfter) != 15*time.Minute {
		t.Errorf("defaults not applied: digest_interval %v, retry %+v", n.DigestInterval, n.Retry)
	}
}

func TestDecodeNotifyErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown kind", "notify:\n  channels: [{name: x, kind: email}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{`channel x: unknown kind "email"`}},
		{"slack needs one token source", "notify:\n  channels: [{name: x, kind: slack, slack: {channel: '#c', token_env: A, token_file: /b}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"exactly one of token_env or token_file"}},
		{"pagerduty needs a key source", "notify:\n  channels: [{name: x, kind: pagerduty, pagerduty: {}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"exactly one of routing_key_env or routing_key_file"}},
		{"no inline routing key", "notify:\n  channels: [{name: x, kind: pagerduty, pagerduty: {routing_key: abc}}]\n", []string{"routing_key"}},
		{"route to unknown channel", "notify:\n  channels: [{name: x, kind: log}]\n  routes: [{tiers: [page], channels: [y]}]\n", []string{`no channel named "y"`}},
		{"bad tier", "notify:\n  channels: [{name: x, kind: log}]\n  routes: [{tiers: [info], channels: [x]}]\n", []string{`unknown tier "info"`}},
		{"digest to pagerduty", "notify:\n  channels: [{name: x, kind: pagerduty, pagerduty: {routing_key_env: K}}]\n  routes: [{tiers: [notice], channels: [x], digest: true}]\n", []string{"cannot take a digest"}},
		{"channels without routes", "notify:\n  channels: [{name: x, kind: log}]\n", []string{"no route sends anything"}},
		{"duplicate channel", "notify:\n  channels: [{name: x, kind: log}, {name: x, kind: log}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"channel x: listed twice"}},
		{"bad share", "notify:\n  storm: {max_failure_share: 2}\n", []string{"max_failure_share"}},
		{"bad reminder tier", "notify:\n  reminders: {urgent: 1h}\n", []string{`reminders: unknown tier "urgent"`}},
		{"password in the state URL", "notify:\n  state: postgres://cw:hunter2@db:5432/certwatch\n", []string{"must not carry a password"}},
		{"password parameter in the state URL", "notify:\n  state: postgres://cw@db/certwatch?password=hunter2\n", []string{"must not carry a password"}},
		{"state password for a file", "notify:\n  state: state.db\n  state_password_env: PGPW\n", []string{"only for a PostgreSQL state"}},
		{"two state password sources", "notify:\n  state: postgres://cw@db/certwatch\n  state_password_env: A\n  state_password_file: /b\n", []string{"set at most one"}},
		{"digest to alertmanager", "notify:\n  channels: [{name: x, kind: alertmanager, alertmanager: {url: 'http://am:9093'}}]\n  routes: [{tiers: [notice], channels: [x], digest: true}]\n", []string{"channel x is alertmanager, which cannot take a digest"}},
		{"alertmanager needs a url", "notify:\n  channels: [{name: x, kind: alertmanager, alertmanager: {}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"alertmanager: url: invalid url"}},
		{"alertmanager ends before the next post", "notify:\n  channels: [{name: x, kind: alertmanager, alertmanager: {url: 'http://am:9093', resend_interval: 5m, ends_after: 5m}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"ends_after (5m0s) must be longer than resend_interval (5m0s)"}},
		{"alertmanager url with a password", "notify:\n  channels: [{name: x, kind: alertmanager, alertmanager: {url: 'http://u:p@am:9093'}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"must not carry user information"}},
		{"webhook needs one secret source", "notify:\n  channels: [{name: x, kind: webhook, webhook: {url: 'https://h.example/x'}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"exactly one of secret_env or secret_file"}},
		{"webhook url with a token", "notify:\n  channels: [{name: x, kind: webhook, webhook: {url: 'https://h.example/x?token=abc', secret_env: S}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"must not carry a query"}},
		{"webhook settings on a log channel", "notify:\n  channels: [{name: x, kind: log, webhook: {url: 'https://h.example/x', secret_env: S}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"webhook: only allowed with kind webhook"}},
		{"bad status url", "notify:\n  status_url: 'certwatch.example'\n", []string{"status_url"}},
		{"send timeout too long", "notify:\n  send_timeout: 11m\n", []string{"send_timeout must be above 0 and at most 10m, got 11m0s"}},
		{"send timeout shorter than a default channel timeout", "notify:\n  send_timeout: 5s\n  channels: [{name: x, kind: slack, slack: {channel: '#c', token_env: A}}]\n  routes: [{tiers: [page], channels: [x]}]\n",
			[]string{"channel x: its request timeout 10s is longer than send_timeout 5s, which would cut a slow request short: lower the channel's timeout or raise send_timeout"}},
		{"send timeout shorter than a channel's timeout", "notify:\n  send_timeout: 20s\n  channels: [{name: x, kind: log}, {name: y, kind: webhook, webhook: {url: 'https://h.example/x', secret_env: S, timeout: 25s}}]\n  routes: [{tiers: [page], channels: [x, y]}]\n",
			[]string{"channel y: its request timeout 25s is longer than send_timeout 20s"}},
		{"bad api url", "notify:\n  channels: [{name: x, kind: slack, slack: {channel: '#c', token_env: A, api_url: 'ftp://x'}}]\n  routes: [{tiers: [page], channels: [x]}]\n", []string{"api_url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("Decode = nil error, want one mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Decode error = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

// TestSendTimeoutFitsChannels: channels whose requests fit in send_timeout
// are accepted, a log channel makes none, and the setting reaches the
// checked configuration.
func TestSendTimeoutFitsChannels(t *testing.T) {
	c, err := config.Decode(strings.NewReader("notify:\n  send_timeout: 5s\n  channels: [{name: x, kind: log}, {name: y, kind: slack, slack: {channel: '#c', token_env: A, timeout: 5s}}]\n  routes: [{tiers: [page], channels: [x, y]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(c.Notify.SendTimeout); got != 5*time.Second {
		t.Errorf("send_timeout = %v, want 5s", got)
	}
	if got := c.Notify.Channels[0].RequestTimeout(); got != 0 {
		t.Errorf("log channel's request timeout = %v, want 0", got)
	}
}

func TestChannelSecret(t *testing.T) {
	t.Setenv("CERTWATCH_TEST_SLACK", "xoxb-not-a-real-token")
	c := config.Channel{Name: "certs", Kind: config.ChannelSlack, Slack: &config.SlackChannel{Channel: "#certs", TokenEnv: "CERTWATCH_TEST_SLACK"}}
	s, err := c.Secret()
	if err != nil {
		t.Fatal(err)
	}
	if s.Reveal() != "xoxb-not-a-real-token" {
		t.Errorf("Secret() = %q, want the environment value", s.Reveal())
	}
	c.Slack.TokenEnv = "CERTWATCH_TEST_UNSET"
	if _, err := c.Secret(); err == nil || !strings.Contains(err.Error(), "CERTWATCH_TEST_UNSET") {
		t.Errorf("Secret() with unset variable: err = %v, want it to name the variable", err)
	}
}

// TestNotifyDefaultsKeepRemindersLeftOut: a hand-built Notify that sets
// one tier's reminder keeps the default of the others, as it does when
// loaded from a file.
func TestNotifyDefaultsKeepRemindersLeftOut(t *testing.T) {
	n := config.Notify{Reminders: map[string]config.Duration{"warning": config.Duration(12 * time.Hour)}}.Defaults()
	want := map[string]time.Duration{"notice": 7 * 24 * time.Hour, "warning": 12 * time.Hour, "page": 0, "critical": 0}
	for tier, d := range want {
		if got, ok := n.Reminders[tier]; !ok || time.Duration(got) != d {
			t.Errorf("reminders[%s] = %v (set %v), want %v", tier, time.Duration(got), ok, d)
		}
	}
}

// TestStateNotAPath: a notify.state that is neither a file path nor a
// PostgreSQL URL (a libpq key/value string, another database's URL) is
// refused, with the URL form to use instead, and the error never repeats
// the password the value carried. Taken as a path, it became a local
// SQLite file named after the connection string.
func TestStateNotAPath(t *testing.T) {
	tests := []struct {
		name  string
		state string
		want  []string // in the error; nil: accepted
	}{
		{"libpq key/value", "host=db user=certwatch password=hunter2 dbname=certwatch",
			[]string{"key/value", "postgres://certwatch@db/certwatch?sslmode=verify-full", "state_password_env"}},
		{"libpq key/value with port and sslmode", "host=db.internal port=5433 dbname=cw user=cw sslmode=require password='hunter2'",
			[]string{"postgres://cw@db.internal:5433/cw?sslmode=require"}},
		{"libpq key/value spaced and quoted", "dbname = 'cw' password = 'hunter2 x' host=db",
			[]string{"postgres://db/cw?sslmode=verify-full"}},
		{"one pair", "password=hunter2", []string{"key/value", "postgres://USER@HOST/DB?sslmode=verify-full"}},
		{"another database's URL", "mysql://cw:hunter2@db/cw", []string{"mysql", "not a file path"}},
		{"sqlite URL", "sqlite:///var/lib/certwatch/state.db", []string{"sqlite", "/var/lib/certwatch/state.db"}},
		{"file path", "/var/lib/certwatch/state.db", nil},
		{"relative file path", "certwatch.db", nil},
		{"path with a space", "/srv/cert watch/state.db", nil},
		{"path with '=' written as a path", "./a=b.db", nil},
		{"absolute path with '='", "/srv/a=b/state.db", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Notify{State: tt.state}.Defaults()
			err := errors.Join(c.Validate()...)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate(state %q) = %v, want nil", tt.state, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(state %q) = nil, want an error", tt.state)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate(state %q) = %q, want it to mention %q", tt.state, err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("Validate(state %q) = %q: it repeats the password", tt.state, err)
			}
		})
	}
}

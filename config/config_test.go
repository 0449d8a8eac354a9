package config_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
)

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown key with line", "zones:\n  - name: a.example\n    nameservr: 127.0.0.1:53\n", []string{"line 3", "nameservr"}},
		{"bad duration", "probe:\n  timeout: 5 seconds\n", []string{"line 2", `invalid duration "5 seconds"`}},
		{"NaN days", "probe:\n  timeout: NaNd\n", []string{"line 2", `invalid duration "NaNd"`}},
		{"infinite weeks", "policy:\n  tiers:\n    notice: {within: Infw}\n", []string{"line 3", `invalid duration "Infw"`}},
		{"days beyond a Duration", "policy:\n  tiers:\n    notice: {within: 1e300d}\n", []string{"line 3", `invalid duration "1e300d"`}},
		{"bad address", "zones:\n  - name: a.example\n    nameserver: 127.0.0.1\n", []string{"line 3", "want HOST:PORT"}},
		{"bad port in address", "resolver: 127.0.0.1:99999\n", []string{"line 1", "invalid port"}},
		{"bad tier name", "fail_on: loud\n", []string{"fail_on", `unknown tier "loud"`}},
		{"bad output", "output: xml\n", []string{"output", "xml"}},
		{"missing zone name", "zones:\n  - nameserver: 127.0.0.1:53\n", []string{"zones[0]: name is required"}},
		{"tsig needs one secret", "zones:\n  - name: a.example\n    tsig: {name: k, algorithm: hmac-sha256}\n", []string{"set exactly one of"}},
		{"fraction out of range", "policy:\n  tiers:\n    warning: {lifetime_fraction: 1.5}\n", []string{"lifetime_fraction must be between 0 and 1"}},
		{"sweep shorter than one unanswered address", "daemon:\n  schedules: {probe: \"@every 5s\"}\n  jitter: 2s\n", []string{"sweep"}},
		{"several problems at once", "output: xml\nfail_on: loud\nprobe:\n  concurrency: 0\n", []string{"output", "fail_on", "concurrency"}},
		{"bad target port", "targets:\n  - a.example\n  - a.example:99999\n", []string{"line 3: ", `invalid port "99999"`}},
		{"url as target", "targets: [\"https://a.example/\"]\n", []string{"line 1: ", "not a URL"}},
		{"wildcard target", "targets:\n  - \"*.a.example\"\n", []string{"line 2: ", "wildcard"}},
		{"empty target", "targets: [a.example, \" \"]\n", []string{"line 1: ", "empty entry"}},
		{"unknown protocol of a target", "targets:\n  - a.example\n  - {address: db.example:6432, protocol: oracle}\n", []string{"line 3: ", `unknown protocol "oracle"`}},
		{"unknown key of a target", "targets:\n  - {address: db.example:6432, proto: postgres}\n", []string{"line 2", `"proto" is not a known key`}},
		{"target without address", "targets:\n  - {protocol: postgres}\n", []string{"line 2", "address is required"}},
		{"unknown protocol of a port", "protocols:\n  6432: oracle\n", []string{"line 2", `unknown protocol "oracle"`}},
		{"protocol of a bad port", "protocols: {70000: smtp}\n", []string{"protocols: invalid port 70000"}},
		{"unknown protocol in a zone", "zones:\n  - name: a.example\n    protocols: {2525: smpt}\n", []string{"line 3", `unknown protocol "smpt"`}},
		{"bad zone name", "zones:\n  - name: bad..example\n", []string{"line 2: ", `"bad..example" is not a valid domain name`}},
		{"bad tsig algorithm", "zones:\n  - name: a.example\n    tsig: {name: k, algorithm: hmac-sha257, secret_env: TSIG}\n", []string{"line 3: ", `unsupported algorithm "hmac-sha257"`}},
		{"silence longer than silence_max", "silences:\n  - match: {kind: expiring}\n    until: 2999-01-01\n    reason: later\n", []string{"line 3: ", "more than notify.silence_max (90d) from now"}},
		{"silence without a reason", "silences:\n  - match: {name: \"*.a.example\"}\n    until: 2000-01-01\n", []string{"line 2: ", "silences[0]: reason: required"}},
		{"silence without a matcher", "silences:\n  - until: 2000-01-01\n    reason: x\n", []string{"silences[0]: match: at least one of"}},
		{"silence of an unknown kind", "silences:\n  - match: {kind: expirng}\n    until: 2000-01-01\n    reason: x\n", []string{"line 2: ", `unknown finding kind "expirng"`}},
		{"silence with a bad date", "silences:\n  - match: {kind: expiring}\n    until: friday\n    reason: x\n", []string{"line 3", `invalid date "friday"`}},
		{"silence up to an unknown tier", "silences:\n  - match: {zone: a.example}\n    up_to: loud\n    until: 2000-01-01\n    reason: x\n", []string{"line 3: ", `up_to: unknown tier "loud"`}},
		{"acme issuer empty", "acme:\n  directories:\n    - url: https://acme.example/directory\n      issuers: [Example CA, \" \"]\n", []string{"line 4: ", "acme: directories[0]: issuers[1]: empty: it would match every issuing certificate without an organization or common name"}},
		{"acme url with a password", "acme:\n  directories:\n    - url: https://acct:hunter2@acme.example/directory\n      issuers: [Example CA]\n", []string{"line 3: ", `url "https://acme.example/directory": remove the user and password`}},
		{"silence token from two places", "serve:\n  silence_token_env: A\n  silence_token_file: /b\n", []string{"line 2: ", "set at most one"}},
		{"tiers quoted, listed and beside other problems", "policy:\n  broken: \"fatal\"\n  weak_key: 'nope'\nrevocation: {stale: page, revoked: loud}\nnotify:\n  channels: [{name: x, kind: log}]\n  routes:\n    - tiers:\n        - page\n        - urgent\n      channels: [x]\nsilences:\n  - {match: {zone: a.example}, up_to: info, until: 2000-01-01, reason: x}\nprobe: {concurrency: 0, colour: blue}\n",
			[]string{`line 2: policy: broken: unknown tier "fatal" (want one of none`, `line 3: policy: weak_key: unknown tier "nope"`, `line 4: revocation: revoked: unknown tier "loud"`,
				"line 4: revocation: stale: at most warning, got page", `line 10: notify: routes[0]: tiers: unknown tier "urgent" (want notice, warning, page or critical)`,
				`line 13: silences[0]: up_to: unknown tier "info"`, "line 14: probe: colour is not a known key", "line 14: probe: concurrency must be 1"}},
		{"empty tier", "fail_on:\n", []string{`line 1: fail_on: unknown tier ""`}},
		{"tsig secret not base64", "zones:\n  - name: a.example\n    tsig:\n      name: k\n      algorithm: hmac-sha256\n      secret: not-base64!\n", []string{"line 3: ", "secret is not valid base64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("Decode(%q) = nil error, want one mentioning %q", tt.yaml, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Decode error = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestDecodeProtocols(t *testing.T) {
	c, err := config.Decode(strings.NewReader(`
ports: [443, 6432]
protocols: {6432: postgres, 25: tls}
targets:
  - mail.example:25
  - {address: db.example:6433, protocol: PostgreSQL}
  - ldap.example:389/tls
zones:
  - name: a.example
    protocols: {25: smtp, 2525: smtp}
  - name: b.example
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(c.Targets), "[mail.example:25 db.example:6433/PostgreSQL ldap.example:389/tls]"; got != want {
		t.Errorf("targets = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(c.PortProtocols(nil)), "map[25:tls 6432:postgres]"; got != want {
		t.Errorf("protocols = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(c.PortProtocols(&c.Zones[0])), "map[25:smtp 2525:smtp 6432:postgres]"; got != want {
		t.Errorf("zone a.example protocols = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(c.PortProtocols(&c.Zones[1])), "map[25:tls 6432:postgres]"; got != want {
		t.Errorf("zone b.example protocols = %s, want %s", got, want)
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "protocols:\n    25: tls\n    6432: postgres\n") && !strings.Contains(string(out), "protocols:\n  25: tls\n  6432: postgres\n") {
		t.Errorf("marshalled config does not list the protocols by name:\n%s", out)
	}
}

func TestDecodeDefaultsAndOverrides(t *testing.T) {
	c, err := config.Decode(strings.NewReader("ports: [443, 8443]\npolicy:\n  tiers:\n    warning: {within: 21d, lifetime_fraction: 0.33}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := time.Duration(c.Policy.Tiers["warning"].Within), 21*24*time.Hour; got != want {
		t.Errorf("warning within = %v, want %v", got, want)
	}
	if got, want := time.Duration(c.Policy.Tiers["notice"].Within), 30*24*time.Hour; got != want {
		t.Errorf("notice within kept from defaults = %v, want %v", got, want)
	}
	if c.Probe.Concurrency != 100 || c.FailOn != policy.Page || len(c.Ports) != 2 {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := config.Secret("hunter2")
	for _, out := range []string{s.String(), strings.TrimSpace(func() string { b, _ := s.MarshalText(); return string(b) }())} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("secret leaked: %q", out)
		}
	}
	if s.Reveal() != "hunter2" {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
}

func TestExampleConfigValidates(t *testing.T) {
	if _, err := config.Load("../config.example.yaml"); err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
}

// TestValidateOrdersByLine: problems found after decoding name their line
// and come in file order, so the first line printed is the first to fix.
func TestValidateOrdersByLine(t *testing.T) {
	yaml := "targets:\n  - a.example:0\n" + strings.Repeat("# padding\n", 8) + "zones:\n  - name: x..example\n"
	_, err := config.Decode(strings.NewReader(yaml))
	if err == nil {
		t.Fatal("Decode = nil error, want a bad target and a bad zone name")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "line 2: ") || !strings.HasPrefix(lines[1], "line 12: ") {
		t.Errorf("Decode error =\n%s\nwant the line 2 problem, then the line 12 one", err)
	}
}

// TestValidateWithoutFile: a config built without a file (flags) is
// checked the same way, just without lines.
func TestValidateWithoutFile(t *testing.T) {
	c := config.Default()
	c.Targets = []config.Target{{Spec: "a.example:99999"}}
	c.Zones = []config.Zone{{Name: "a.example", TSIG: &config.TSIG{Name: "k", Algorithm: "hmac-sha256", Secret: "c2VjcmV0!"}}}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate = nil error, want a bad target and a bad TSIG secret")
	}
	for _, want := range []string{`static target "a.example:99999": invalid port`, "zone a.example: tsig key k: secret is not valid base64"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error = %q, want it to mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "c2VjcmV0") || strings.Contains(err.Error(), "line ") {
		t.Errorf("Validate error = %q: shows the secret or a line it cannot know", err)
	}
}

func TestDecodeTargetLabels(t *testing.T) {
	c, err := config.Decode(strings.NewReader(`
targets:
  - {address: vault.example:8200, labels: {team: security, env: prod}}
  - {address: db.example:6433, protocol: postgres, labels: {team: data}}
  - plain.example
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(c.Targets), "[vault.example:8200 db.example:6433/postgres plain.example]"; got != want {
		t.Errorf("targets = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(c.Targets[0].Labels, c.Targets[1].Labels, c.Targets[2].Labels), "map[env:prod team:security] map[team:data] map[]"; got != want {
		t.Errorf("labels = %s, want %s", got, want)
	}
	out, err := yaml.Marshal(c.Targets)
	if err != nil {
		t.Fatal(err)
	}
	var back []config.Target
	if err := yaml.Unmarshal(out, &back); err != nil || fmt.Sprint(back, back[1].Labels) != fmt.Sprint(c.Targets, c.Targets[1].Labels) {
		t.Errorf("targets do not survive a round trip (%v):\n%s", err, out)
	}

	for _, tt := range []struct{ yaml, want string }{
		{"targets:\n  - {address: a.example, labels: [team]}\n", "line 2: target labels: want a mapping"},
		{"targets:\n  - {address: a.example, labels: {}}\n", "line 2: target labels: no labels"},
		{"targets:\n  - {address: a.example, label: x}\n", `line 2: target: "label" is not a known key (want address, protocol and labels)`},
	} {
		if _, err := config.Decode(strings.NewReader(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%q) error = %v, want it to contain %q", tt.yaml, err, tt.want)
		}
	}
}

func TestDecodeSilences(t *testing.T) {
	until := time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly)
	c, err := config.Decode(strings.NewReader("silences:\n  - match: {name: \"*.legacy.example\", labels: {team: web}}\n    until: " + until + "\n    reason: CHG-1\n" +
		"  - match: {certificate: \"AB:CD:EF:01\"}\n    up_to: critical\n    until: 2000-01-01T10:00:00Z\n    reason: ended long ago, harmless\n    author: bob\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Silences) != 2 || c.Silences[0].UpToTier() != policy.Page || c.Silences[1].UpToTier() != policy.Critical ||
		c.Silences[0].Until.Format(time.DateOnly) != until || c.Silences[0].Match.Labels["team"] != "web" {
		t.Errorf("silences = %+v; want two, the first up to page (the default) until %s", c.Silences, until)
	}
	if c.Notify.SilenceMax != config.Duration(90*24*time.Hour) {
		t.Errorf("notify.silence_max = %v, want 90d by default", c.Notify.SilenceMax)
	}
}

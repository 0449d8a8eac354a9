package config_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// badConfig breaks nearly every check Validate makes, most of them on a
// line of their own, so that where each problem is reported is pinned.
const badConfig = `ports: [0, 70000]
protocols: {99999: smtp}
zones:
  - name: a.example
    timeout: -5s
    ports: [0]
    protocols: {0: smtp}
    include: [""]
  - name: b..example
    tsig: {name: k, algorithm: hmac-sha256, secret: "!!notbase64"}
  - name: ""
  - name: a.example
    exclude: [""]
  - name: c.example
    tsig: {secret: x, secret_env: Y}
targets:
  - "bad host:port:x"
probe:
  timeout: 0s
  concurrency: 0
  per_address: 0
  retries: 9
  break_after: -1
policy:
  tiers:
    urgent: {within: 1d}
    notice: {within: -1d, lifetime_fraction: 2}
    warning: {within: 30d}
  broken: fatal
  weak_key: nope
fail_on: sometimes
output: xml
aws:
  acm: true
  regions: [nowhere, eu-west-1, eu-west-1]
  roles:
    - {arn: "arn:bad", external_id: "x", session_name: "!"}
    - {arn: "arn:bad"}
  endpoints: {acm: "ftp://x", sts: "not a url"}
  route53_zones: [""]
  route53_resolvers: {"": "127.0.0.1:53"}
  route53_labels: {"*.example.com": {}}
  include: [""]
  route53_rate_limit: 0
  acm_rate_limit: -1
  acm_concurrency: 0
  max_attempts: 50
  timeout: -1s
  renewal_margin: 90d
notify:
  state: "postgres://u:pw@db/certwatch"
  state_password_file: /a
  state_password_env: B
  channels:
    - {name: "bad name!", kind: log}
    - {name: certs, kind: slack, slack: {channel: "#", api_url: "https://x", timeout: -1s}, pagerduty: {routing_key_env: X}, rate_per_second: -1, burst: -1}
    - {name: certs, kind: pagerduty}
    - {name: oncall, kind: pagerduty, pagerduty: {url: "gopher://x", timeout: -1s}}
    - {name: weird, kind: carrier-pigeon}
  routes:
    - {tiers: [], channels: []}
    - {tiers: [urgent], channels: [nobody, oncall], digest: true, match: {zones: [""], names: [""], labels: {"": x}}}
  reminders: {urgent: 1h, page: -1h}
  resolve_after: 0
  flush_timeout: 2h
  digest_interval: 1s
  runbook_url: "mailto:x"
  storm: {max_new_findings: 0, max_failure_share: 2, top: 99}
  retry: {initial: 0s, max: -1s, alert_after: 0s}
daemon:
  listen: ":99999"
  schedules: {discovery: "@every 10s", probe: "not a schedule"}
  jitter: -1s
  sweep_timeout: -1s
  grace_period: 0s
  leader_lease: 1h
  site: "bad site!"
  shard_size: 0
  site_stale_after: 1s
  drop_threshold: 1
  metrics_series_limit: 0
  heartbeat: {url: "ftp://x", url_env: Y, timeout: 0s}
revocation:
  timeout: 0s
  max_crl_bytes: 10
  retry_after: 0s
  revoked: nope
  stale: critical
`

// TestEveryProblemAtItsLine pins every problem of badConfig and the line
// it is reported at (testdata/problems.golden; -update rewrites it).
func TestEveryProblemAtItsLine(t *testing.T) {
	_, err := config.Decode(strings.NewReader(badConfig))
	if err == nil {
		t.Fatal("Decode accepted a config that breaks every rule")
	}
	got := err.Error() + "\n"
	path := filepath.Join("testdata", "problems.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatalf("%v (run go test ./config -run %s -update to create it)", rerr, t.Name())
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var a, b string
		if i < len(gl) {
			a = gl[i]
		}
		if i < len(wl) {
			b = wl[i]
		}
		if a != b {
			t.Errorf("problem %d:\n got: %s\nwant: %s", i+1, a, b)
		}
	}
	for _, l := range gl[:len(gl)-1] {
		if !strings.HasPrefix(l, "line ") {
			t.Errorf("problem without a line: %s", l)
		}
	}
}

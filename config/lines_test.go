package config_test

import (
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
)

// TestDecodeErrorLines checks the errors an operator meets first: each
// names its line and what to do, and every one is reported at once.
func TestDecodeErrorLines(t *testing.T) {
	long := strings.Repeat("x", 128<<10)
	tests := []struct {
		name string
		yaml string
		want []string // each a whole line of the error
	}{
		{
			name: "second document",
			yaml: "probe:\n  retries: 1\n---\nprobe:\n  bogus: 1\n",
			want: []string{"line 3: a second YAML document starts here; certwatch reads one document per file: merge it into the first or remove it"},
		},
		{
			name: "float for an integer",
			yaml: "probe:\n  retries: 2.5\n  concurrency: 1e3\n",
			want: []string{"line 2: probe.retries: want a whole number, got 2.5", "line 3: probe.concurrency: want a whole number, got 1e3"},
		},
		{
			name: "float in a list of integers",
			yaml: "zones:\n  - name: a.example\n    ports: [443, 8443.5]\n",
			want: []string{"line 3: zones[0].ports[1]: want a whole number, got 8443.5"},
		},
		{
			name: "sub-second schedule cron rounds up",
			yaml: "daemon:\n  schedules:\n    discovery: \"@every 100ms\"\n    probe: \"@every 0s\"\n",
			want: []string{
				`line 3: daemon: schedules: discovery: "@every 100ms" runs every 100ms, more often than the minimum of 1m0s (each run transfers every zone and lists every AWS account)`,
				`line 4: daemon: schedules: probe: "@every 0s" runs every 0s, more often than the minimum of 5s (each run connects to every endpoint)`,
			},
		},
		{
			name: "cron every second",
			yaml: "daemon:\n  schedules:\n    probe: \"* * * * *\"\n    discovery: \"@every 10s\"\n",
			want: []string{`line 4: daemon: schedules: discovery: "@every 10s" runs every 10s, more often than the minimum of 1m0s (each run transfers every zone and lists every AWS account)`},
		},
		{
			name: "inverted tiers",
			yaml: "policy:\n  tiers:\n    notice: {within: 1d}\n    warning: {within: 12h}\n    page: {within: 6h}\n    critical: {within: 60d}\n",
			want: []string{
				"line 6: policy: tiers: critical: within (60d) must be shorter than notice's (1d): a more urgent tier starts closer to the deadline",
				"line 6: policy: tiers: critical: within (60d) must be shorter than page's (6h0m0s): a more urgent tier starts closer to the deadline",
			},
		},
		{
			name: "inverted lifetime fractions",
			yaml: "policy:\n  tiers:\n    warning: {within: 14d, lifetime_fraction: 0.1}\n    page: {within: 7d, lifetime_fraction: 0.2}\n",
			want: []string{"line 4: policy: tiers: page: lifetime_fraction (0.2) must be below warning's (0.1): a more urgent tier starts closer to the deadline"},
		},
		{
			name: "absurd values",
			yaml: "probe:\n  concurrency: 100000000\n  per_address: 100000\n  timeout: 1h\n  break_after: 5000\n",
			want: []string{
				"line 2: probe: concurrency must be 1 to 10000, got 100000000",
				"line 3: probe: per_address must be 1 to 64, got 100000",
				"line 4: probe: timeout must be above 0 and at most 2m0s, got 1h0m0s",
				"line 5: probe: break_after must be 0 (never give up on an address) to 1000, got 5000",
			},
		},
		{
			name: "semantic errors carry their line",
			yaml: "ports: [0]\nzones:\n  - name: a.example\n  - name: b.example\n  - name: A.example.\ndaemon:\n  listen: nowhere\n",
			want: []string{
				"line 1: ports: invalid port 0: want 1 to 65535",
				"line 5: zone a.example: listed twice",
				`line 7: daemon: listen: invalid address "nowhere": want HOST:PORT, e.g. 127.0.0.1:9814`,
			},
		},
		{
			name: "decoding errors do not hide semantic ones",
			yaml: "probe:\n  timeout: 5 seconds\n  retries: 9\noutput: xml\nnotify:\n  channels:\n    - {name: certs, kind: slack, slack: {channel: \"#c\", token_env: T, api_url: \"ftp://x\"}}\n",
			want: []string{
				`line 2: invalid duration "5 seconds" (want e.g. 30s, 5m, 12h, 30d)`,
				"line 3: probe: retries must be 0 to 5, got 9",
				`line 4: output: unknown format "xml" (want table or json)`,
				`line 7: notify: channel certs: slack: api_url: invalid url "ftp://x" (want http:// or https://)`,
			},
		},
		{
			name: "tab indentation",
			yaml: "probe:\n  retries: 1\n\ttimeout: 5s\n",
			want: []string{"line 3: found a tab character that violates indentation (a tab indents this line: YAML indents with spaces only)"},
		},
		{
			name: "bad indentation of a key",
			yaml: "probe:\n  retries: 1\n timeout: 5s\n",
			want: []string{"line 3: did not find expected key (check the indentation of this line against the lines above)"},
		},
		{
			name: "bad indentation in a list",
			yaml: "zones:\n  - name: a.example\n   nameserver: 127.0.0.1:53\n",
			want: []string{"line 3: did not find expected '-' indicator (check the indentation of this line against the lines above)"},
		},
		{
			name: "huge value quoted by a prefix",
			yaml: "zones:\n  - name: a.example\n    nameserver: " + long + "\n",
			want: []string{`line 3: invalid address "` + strings.Repeat("x", 47) + `… (131074 bytes): want HOST:PORT (IPv6 as [::1]:53)`},
		},
		{
			// The cron parser's own message repeats the whole spec.
			name: "huge schedule quoted by a prefix",
			yaml: "daemon:\n  schedules:\n    probe: " + long + "\n",
			want: []string{`line 3: daemon: schedules: probe: invalid schedule "` + strings.Repeat("x", 47) + `… (131074 bytes) (want e.g. "*/15 * * * *" or "@every 1h"): expected exactly 5 fields, found 1`},
		},
		{
			name: "huge schedule of many fields quoted by a prefix",
			yaml: "daemon:\n  schedules:\n    probe: \"" + strings.Repeat("1 ", 64<<10) + "\"\n",
			want: []string{`line 3: daemon: schedules: probe: invalid schedule "` + strings.Repeat("1 ", 23) + `1… (131074 bytes) (want e.g. "*/15 * * * *" or "@every 1h"): expected exactly 5 fields, found 65536`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("Decode = nil error, want %q", tt.want)
			}
			if len(err.Error()) > 2000 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tt.want {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Errorf("error lines:\n%s\nwant the line\n%s", err, w)
				}
			}
		})
	}
}

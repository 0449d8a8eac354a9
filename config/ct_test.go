package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
)

// A P-256 public key, as CT log lists publish one (Sunlight's rome2026h1).
const ctKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEPIcer7RB32jt4bTEbhgUKLKvOctFD+I2hoDItFxUBlJiGFvftBuRk3fO7e1T7gC2ekyfL7XoO2oN/ObcZyc4EA=="

func TestCTLoads(t *testing.T) {
	c, err := config.Decode(strings.NewReader(`zones:
  - name: internal.example
ct:
  logs:
    - url: https://log.example/2026h1/
      origin: log.example/2026h1
      key: ` + ctKey + `
  domains: [Example.COM]
  expected_issuers: ["Let's Encrypt"]
  start: end
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.CTDomains(), " "); got != "example.com internal.example" {
		t.Errorf("watched domains %q, want ct.domains then the zones", got)
	}
	if c.CT.StartBack() != 0 || c.CT.Grace.String() != "48h" && c.CT.Grace.String() != "2d" {
		t.Errorf("start back %d, grace %v; want 0 (end) and the default 48h", c.CT.StartBack(), c.CT.Grace)
	}
	logs, err := c.CT.CTLogs()
	if err != nil || len(logs) != 1 || logs[0].Key == nil {
		t.Errorf("logs %+v, %v: want the one log with its key parsed", logs, err)
	}
}

// Every mistake in the ct section is refused at load, at its line.
func TestCTProblemsNameTheirLine(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"bad key", "ct:\n  domains: [example.com]\n  logs:\n    - url: https://log.example/\n      origin: log.example\n      key: bm90IGEga2V5\n",
			[]string{"line 6: ct: logs[0]: key"}},
		{"key not base64", "ct:\n  domains: [example.com]\n  logs:\n    - url: https://log.example/\n      origin: log.example\n      key: '%%'\n",
			[]string{"line 6: ct: logs[0]: key", "base64"}},
		{"no origin", "ct:\n  domains: [example.com]\n  logs:\n    - url: https://log.example/\n      key: " + ctKey + "\n",
			[]string{"ct: logs[0]: origin is required"}},
		{"bad url", "ct:\n  domains: [example.com]\n  logs:\n    - url: ftp://log.example/\n      origin: log.example\n      key: " + ctKey + "\n",
			[]string{"line 4: ct: logs[0]: url"}},
		{"top-level domain", "ct:\n  logs:\n    - url: https://log.example/\n      origin: log.example\n      key: " + ctKey + "\n  domains:\n    - com\n",
			[]string{"line 7: ct: domains", "top-level domain"}},
		{"wildcard domain", "ct:\n  logs:\n    - url: https://log.example/\n      origin: log.example\n      key: " + ctKey + "\n  domains: ['*.example.com']\n",
			[]string{"line 6: ct: domains", "name the domain itself"}},
		{"nothing to watch", "ct:\n  logs:\n    - url: https://log.example/\n      origin: log.example\n      key: " + ctKey + "\n",
			[]string{"ct: domains: no domain to watch"}},
		{"domains without logs", "ct:\n  domains: [example.com]\n", []string{"line 1: ct: logs: at least one log"}},
		{"bad start", "ct:\n  start: yesterday\n", []string{"line 2: ct: start: want end or a number"}},
		{"negative start", "ct:\n  start: -5\n", []string{"line 2: ct: start"}},
		{"bad tier", "ct:\n  unexpected_issuer: loud\n", []string{"line 2: ct: unexpected_issuer"}},
		{"parallelism", "ct:\n  parallelism: 0\n", []string{"line 2: ct: parallelism must be 1 to 64"}},
		{"negative grace", "ct:\n  grace: -1h\n", []string{"line 2: ct: grace must not be negative"}},
		{"unknown key", "ct:\n  logz: []\n", []string{"line 2", "logz"}},
		{"negative max_behind", "ct:\n  max_behind: -1\n", []string{"line 2: ct: max_behind must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.yaml)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// ct.log_list enables the CT source without logs given by hand: builtin
// reads the shipped list, url or file a newer one.
func TestCTLogListLoads(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"ct:\n  domains: [example.com]\n  log_list: builtin\n", "the built-in CT log list"},
		{"ct:\n  domains: [example.com]\n  log_list: {url: https://www.gstatic.com/ct/log_list/v3/log_list.json}\n", "https://www.gstatic.com/ct/log_list/v3/log_list.json"},
	} {
		c, err := config.Decode(strings.NewReader(tt.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tt.yaml, err)
		}
		if !c.CT.Enabled() || c.CT.LogList == nil || c.CT.LogList.Source().Name() != tt.want {
			t.Errorf("%s: enabled %v, list %+v; want the source on %s", tt.yaml, c.CT.Enabled(), c.CT.LogList, tt.want)
		}
	}
}

// A log list that run could not use is refused at load, and so by
// check-config: a file that does not parse (read now, as run reads it), a
// URL that is not one, both or neither, a word other than builtin.
func TestCTLogListProblemsNameTheirLine(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "log_list.json")
	if err := os.WriteFile(bad, []byte(`{"operators": [{"name": "X", "tiled_logs": [{"description": "X 'Bad'", "key": "bm90IGEga2V5"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown word", "ct:\n  domains: [example.com]\n  log_list: google\n", []string{"line 3: ct: log_list", "builtin"}},
		{"bad url", "ct:\n  domains: [example.com]\n  log_list:\n    url: ftp://x/list.json\n", []string{"line 4: ct: log_list: url"}},
		{"url and file", "ct:\n  domains: [example.com]\n  log_list: {url: https://x.example/l.json, file: /l.json}\n", []string{"line 3: ct: log_list: give one of url or file"}},
		{"missing file", "ct:\n  domains: [example.com]\n  log_list: {file: /nonexistent/log_list.json}\n", []string{"line 3: ct: log_list: file", "/nonexistent/log_list.json"}},
		{"bad entry in file", "ct:\n  domains: [example.com]\n  log_list:\n    file: " + bad + "\n", []string{"line 4: ct: log_list: file", "tiled_logs[0] (X 'Bad')"}},
		{"domains without logs", "ct:\n  domains: [example.com]\n", []string{"line 1: ct: logs: at least one log", "log_list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.yaml)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkLogLines parses every line of a JSON log and fails on a line that
// is not a JSON object, that repeats a key at any level (as
// `"channel":"logs","channel":"logs"` did), or whose duration is not a Go
// duration string. It returns the number of lines checked.
func checkLogLines(t *testing.T, log string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		n++
		dec := json.NewDecoder(strings.NewReader(line))
		if dups := duplicateKeys(dec); len(dups) > 0 {
			t.Errorf("log line repeats %q: %s", dups, line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line is not a JSON object (%v): %s", err, line)
			continue
		}
		for _, k := range []string{"duration", "retry_in", "retry_every", "took", "elapsed"} {
			v, ok := m[k]
			if !ok {
				continue
			}
			s, isString := v.(string)
			if _, err := time.ParseDuration(s); !isString || err != nil {
				t.Errorf("log line has %s = %v, want a Go duration string: %s", k, v, line)
			}
		}
	}
	return n
}

// duplicateKeys returns the keys an object in the token stream repeats.
func duplicateKeys(dec *json.Decoder) []string {
	var dups []string
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				key := fmt.Sprint(k)
				if seen[key] {
					dups = append(dups, key)
				}
				seen[key] = true
				if !walk() {
					return false
				}
			}
			_, err = dec.Token()
			return err == nil
		case json.Delim('['):
			for dec.More() {
				if !walk() {
					return false
				}
			}
			_, err = dec.Token()
			return err == nil
		}
		return true
	}
	walk()
	return dups
}

// testLogLinesHaveNoDuplicateKeys scans the lab with debug logging and a
// log notification channel, and parses every log line as JSON.
func testLogLinesHaveNoDuplicateKeys(t *testing.T) {
	l := startLab(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "certwatch.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`notify:
  state: %q
  channels:
    - name: logs
      kind: log
  routes:
    - tiers: [notice, warning, page, critical]
      channels: [logs]
`, filepath.Join(dir, "state.db"))), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, labArgs(l, "--config", cfg, "--notify", "-v", "--output", "json")...)
	if code == 2 {
		t.Fatalf("exit code 2; stderr:\n%s", stderr)
	}
	var logLines bytes.Buffer
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "{") {
			logLines.WriteString(line + "\n")
		}
	}
	n := checkLogLines(t, logLines.String())
	for _, want := range []string{`"component":"dnszone"`, `"component":"probes"`, `"channel":"logs"`, `"msg":"probed"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the log lacks %s (%d lines):\n%s", want, n, stderr)
		}
	}
}

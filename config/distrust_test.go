package config_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
)

func TestDistrustFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `
- ca: Example Private CA
  spki_sha256: [76ee8590374c715437bbca6bba6028eadde2dc6dbbb8c3f610e851f11d1ab7f5]
  browsers: [Chrome]
  rule: earliest_sct
  after: 2027-01-31
`)
	entries, err := config.LoadDistrust(good)
	if err != nil || len(entries) != 1 || entries[0].CA != "Example Private CA" || entries[0].After != "2027-01-31" {
		t.Fatalf("LoadDistrust(good) = %+v, %v", entries, err)
	}
	c, err := config.Decode(strings.NewReader("policy:\n  distrust_file: " + good + "\n  distrusted_ca: critical\n"))
	if err != nil || c.Policy.DistrustFile != good || c.Policy.DistrustedCA != policy.Critical || !c.Policy.BuiltinDistrust {
		t.Fatalf("Decode = %+v, %v", c.Policy, err)
	}

	bad := write("bad.yaml", `
- ca: Broken
  spki_sha256: [zz]
  browsers: []
  rule: by_mood
  after: next tuesday
`)
	_, err = config.Decode(strings.NewReader("policy:\n  distrust_file: " + bad + "\n"))
	for _, want := range []string{"entry 1 (Broken)", `spki_sha256: "zz" is not 64 hex digits`, "browsers: required", `rule: "by_mood", want earliest_sct or not_before`, `after: "next tuesday" is not a date`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(bad distrust file) = %v; want it to say %q", err, want)
		}
	}
	if _, err := config.Decode(strings.NewReader("policy:\n  distrust_file: " + filepath.Join(dir, "missing.yaml") + "\n")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing distrust file: %v", err)
	}
	if _, err := config.Decode(strings.NewReader("policy:\n  distrusted_ca: loud\n")); err == nil || !strings.Contains(err.Error(), "distrusted_ca") {
		t.Errorf("bad distrusted_ca tier: %v", err)
	}
}

// TestDistrustFileRefused: a distrust file is one YAML list of complete
// entries: a second document (whose entries nothing would check or use),
// null, an empty file or list, and a file above 1 MiB are refused, and
// each problem names the file, the line and the entry.
func TestDistrustFileRefused(t *testing.T) {
	dir := t.TempDir()
	const entry = `- ca: Example Private CA
  spki_sha256: [76ee8590374c715437bbca6bba6028eadde2dc6dbbb8c3f610e851f11d1ab7f5]
  browsers: [Chrome]
  rule: earliest_sct
  after: 2027-01-31
`
	tests := []struct {
		name, body string
		want       []string
	}{
		{"second document", entry + "---\n- ca: Later\n  spki_sha256: [nothex]\n  browsers: [Chrome]\n  rule: bogus\n  after: 2027-01-31\n",
			[]string{"a second YAML document at line 6", "remove the --- separator"}},
		{"null", "null\n", []string{"no entries", "remove policy.distrust_file"}},
		{"tilde", "~\n", []string{"no entries"}},
		{"empty list", "[]\n", []string{"no entries"}},
		{"empty file", "", []string{"empty (want one list of entries"}},
		{"comments only", "# nothing yet\n", []string{"empty (want one list of entries"}},
		{"bad second entry", entry + "- ca: Second CA\n  spki_sha256:\n    - 76ee8590374c715437bbca6bba6028eadde2dc6dbbb8c3f610e851f11d1ab7\n  browsers: [Chrome]\n  rule: bogus\n  after: 2027-01-31\n",
			[]string{`line 7, entry 2 (Second CA): spki_sha256: "76ee8590374c715437bbca6bba6028eadde2dc6dbbb8c3f610e851f11d1ab7" is not 64 hex digits`,
				`line 10, entry 2 (Second CA): rule: "bogus", want earliest_sct or not_before`}},
		{"missing ca", "- spki_sha256: [76ee8590374c715437bbca6bba6028eadde2dc6dbbb8c3f610e851f11d1ab7f5]\n  browsers: [Chrome]\n  rule: not_before\n  after: 2027-01-31\n",
			[]string{"line 1, entry 1: ca: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			entries, err := config.LoadDistrust(path)
			for _, want := range append(tt.want, "policy: distrust_file "+path+": ") {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("LoadDistrust = %+v, %v; want an error saying %q", entries, err, want)
				}
			}
			// check-config and run refuse it alike, at the key's line.
			_, err = config.Decode(strings.NewReader("ports: [443]\npolicy:\n  distrust_file: " + path + "\n"))
			if err == nil || !strings.HasPrefix(err.Error(), "line 3: policy: distrust_file "+path) {
				t.Errorf("Decode = %v; want the problem at line 3 (policy.distrust_file)", err)
			}
		})
	}
}

// TestDistrustFileBounded: a distrust file far above 1 MiB is refused
// after reading 1 MiB of it, not read whole first.
func TestDistrustFileBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(256 << 20); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = config.LoadDistrust(path)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than the 1048576 bytes allowed") {
		t.Errorf("LoadDistrust(256 MiB file) = %v, want it refused", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("LoadDistrust allocated %d bytes for a 256 MiB file, want at most 16 MiB (it reads 1 MiB and one byte)", alloc)
	}
}

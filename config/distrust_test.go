package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
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
	if err != nil || c.Policy.DistrustFile != good || c.Policy.DistrustedCA != "critical" || !c.Policy.BuiltinDistrust {
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

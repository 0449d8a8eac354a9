package cli_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/cli"
)

// testREADMEReportExample checks the JSON report example of the findings
// reference (docs/findings.md, linked from the README) against what a
// scan of the lab prints: every key the example shows, on the report and
// on each kind of entry, is one a real report carries on such an entry.
func testREADMEReportExample(t *testing.T) {
	findings, err := os.ReadFile("../../docs/findings.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(findings), "## JSON report")
	_, rest, ok2 := strings.Cut(rest, "```json\n")
	example, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/findings.md has no ```json block under ## JSON report")
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(example), &want); err != nil {
		t.Fatalf("the JSON report example of docs/findings.md does not parse: %v", err)
	}

	// --post-quantum: the example shows what the lab's Go servers answer
	// to the hybrid offer.
	l := startLab(t)
	stdout, stderr, code := run(t, labArgs(l, "--output", "json", "--post-quantum")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	checkKeys(t, "report", want, []any{got})
	for key, v := range want {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		real, _ := got[key].([]any)
		for _, entry := range list {
			if m, ok := entry.(map[string]any); ok {
				checkKeys(t, key, m, real)
			}
		}
	}
}

// checkKeys reports an example object whose key set is not that of any
// real object of its list.
func checkKeys(t *testing.T, where string, example map[string]any, real []any) {
	t.Helper()
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	wantKeys := keys(example)
	var seen []string
	for _, r := range real {
		if m, ok := r.(map[string]any); ok {
			got := keys(m)
			if slices.Equal(got, wantKeys) || where == "report" && !slices.ContainsFunc(wantKeys, func(k string) bool { return !slices.Contains(got, k) }) {
				return
			}
			seen = append(seen, strings.Join(got, ","))
		}
	}
	t.Errorf("docs/findings.md example %s entry has keys %v; a scan prints entries with keys %v", where, wantKeys, slices.Compact(slices.Sorted(slices.Values(seen))))
}

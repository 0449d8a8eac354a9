package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/policy"
)

// A name only CT shows under a watched domain is a coverage gap in
// `certwatch coverage` (text and JSON) and in the coverage section of the
// scan's JSON report, as it is a coverage_gap finding: listed with the
// name, the log where it was seen, and the finding's own words, and
// counted by the summaries.
func TestCoverageListsNamesOnlyCTShows(t *testing.T) {
	t.Parallel()
	e := startCTEstate(t)
	cfg := e.config(t, "")
	where := e.log.Origin + " at index 4"
	name := "new." + ctZone

	stdout, stderr, code := run(t, "scan", "--config", cfg, "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("scan: exit %d; stderr:\n%s", code, stderr)
	}
	r := ctReport(t, stdout)
	var finding *policy.Finding
	for i, f := range findingsOf(r, policy.CoverageGap) {
		if strings.HasPrefix(f.Name, "ct:") {
			finding = &findingsOf(r, policy.CoverageGap)[i]
		}
	}
	if finding == nil {
		t.Fatalf("no CT coverage_gap finding:\n%s", stdout)
	}
	var ctGaps []policy.Gap
	for _, g := range r.Coverage.Gaps {
		if g.Source == "ct" {
			ctGaps = append(ctGaps, g)
		}
	}
	if len(ctGaps) != 1 || len(ctGaps[0].Names) != 1 || ctGaps[0].Names[0] != name || !strings.Contains(ctGaps[0].Detail, where) ||
		!strings.Contains(finding.Message, ctGaps[0].Detail) || !strings.Contains(finding.Message, ctGaps[0].Fix[1:]) {
		t.Fatalf("scan report's coverage gaps from CT %+v; want one listing %s, seen in %s, in the words of the finding %q", ctGaps, name, where, finding.Message)
	}
	if r.Summary.Gaps != len(r.Coverage.Gaps) || r.Summary.GapsByReason[string(ctGaps[0].Reason)] != 1 {
		t.Errorf("summary counts %d gaps (%v), want the %d listed, the CT one among them", r.Summary.Gaps, r.Summary.GapsByReason, len(r.Coverage.Gaps))
	}

	stdout, stderr, code = run(t, "coverage", "--config", cfg)
	if code != cli.ExitOK {
		t.Fatalf("coverage: exit %d (the gap is a notice); stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"names: " + name, where, "fix: add the names to their zone"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("coverage does not say %q:\n%s", want, stdout)
		}
	}

	stdout, stderr, code = run(t, "coverage", "--config", cfg, "--output", "json")
	if code != cli.ExitOK {
		t.Fatalf("coverage --output json: exit %d; stderr:\n%s", code, stderr)
	}
	var cov struct {
		Gaps []policy.Gap `json:"gaps"`
	}
	if err := json.Unmarshal([]byte(stdout), &cov); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range cov.Gaps {
		found = found || (g.Source == "ct" && len(g.Names) == 1 && g.Names[0] == name && strings.Contains(g.Detail, where))
	}
	if !found {
		t.Errorf("coverage --output json lists no gap for %s seen in %s:\n%s", name, where, stdout)
	}
}

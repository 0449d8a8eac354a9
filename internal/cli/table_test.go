package cli_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/certwatch/certwatch/internal/cli"
)

// TestScanTableFitsColumns scans the lab with $COLUMNS=60, as a narrow
// terminal: no line of the report is wider, and every finding is there.
func TestScanTableFitsColumns(t *testing.T) {
	t.Setenv("COLUMNS", "60")
	l := startLab(t)
	stdout, stderr, code := run(t, labArgs(l)...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if n := utf8.RuneCountInString(line); n > 60 {
			t.Errorf("line of %d cells, wider than $COLUMNS=60:\n%s", n, line)
		}
	}
	for _, want := range []string{"TIER      LEFT  KIND", "expired", "hostname_mismatch", "served by 1 endpoint(s):"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

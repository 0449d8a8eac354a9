package cli_test

import (
	"cmp"
	"regexp"
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

// TestScanTableSubjectsAt80Columns scans the lab on an 80-column
// terminal: the table gives its room to SUBJECT, so every row shows its
// finding's kind and whole subject (the lab's are at most 26 characters),
// as the numbered details below it name them. SUBJECT was cut to 9
// characters while DEADLINE kept its time and KIND 25 cells.
func TestScanTableSubjectsAt80Columns(t *testing.T) {
	t.Setenv("COLUMNS", "80")
	l := startLab(t)
	stdout, stderr, code := run(t, labArgs(l)...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
	}
	table, details, _ := strings.Cut(stdout, "\n\n")
	rows := strings.Split(table, "\n")[1:]
	heading := regexp.MustCompile(`(?m)^(\d+)\. \S+ (\S+)(?: "([^"]*)")?`)
	found := heading.FindAllStringSubmatch(details, -1)
	if len(found) != len(rows) || len(rows) < 10 {
		t.Fatalf("%d table rows and %d findings in the details:\n%s", len(rows), len(found), stdout)
	}
	for i, m := range found {
		kind, subject := m[2], cmp.Or(m[3], "-")
		if n := utf8.RuneCountInString(rows[i]); n > 80 {
			t.Errorf("row of %d cells, wider than 80: %s", n, rows[i])
		}
		if row := rows[i] + "  "; !strings.Contains(row, "  "+kind+"  ") || !strings.Contains(row, "  "+subject+"  ") {
			t.Errorf("row %d = %q, want kind %s and subject %s whole", i+1, rows[i], kind, subject)
		}
	}
}

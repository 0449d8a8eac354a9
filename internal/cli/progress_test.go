package cli_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/cli"
)

// testScanProgress scans the lab with stderr a pipe, as a CI job or
// `2>log` has it: by default stderr holds no progress; with --progress
// it says how many targets were probed of how many, with endpoints and a
// rate, and stdout stays the report alone, JSON that decodes; with
// --no-progress after it, nothing again.
func testScanProgress(t *testing.T) {
	l := startLab(t)
	line := regexp.MustCompile(`(?m)^probing: (\d+) of (\d+) targets, (\d+) endpoints, [0-9.e+]+/s$`)

	_, stderr, code := run(t, labArgs(l)...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "probing:") {
		t.Errorf("progress on a stderr that is not a terminal, without --progress:\n%s", stderr)
	}

	stdout, stderr, code := run(t, labArgs(l, "--progress", "--output", "json")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
	}
	var report struct{ Targets int }
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Errorf("stdout with --progress is not the JSON report: %v\n%.500s", err, stdout)
	}
	m := line.FindAllStringSubmatch(stderr, -1)
	if len(m) == 0 {
		t.Fatalf("no progress line on stderr with --progress:\n%s", stderr)
	}
	last := m[len(m)-1]
	if last[1] != last[2] || last[2] == "0" || last[3] == "0" {
		t.Errorf("last progress line %q, want every target probed, with endpoints", last[0])
	}
	if strings.Contains(stderr, "\r") || strings.Contains(stderr, "\x1b") {
		t.Errorf("progress into a pipe redraws a terminal line:\n%q", stderr)
	}

	_, stderr, _ = run(t, labArgs(l, "--progress", "--no-progress")...)
	if strings.Contains(stderr, "probing:") {
		t.Errorf("progress with --no-progress:\n%s", stderr)
	}
}

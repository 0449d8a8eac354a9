//go:build linux

package cli

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKiB is the process's resident file-backed memory (RssFile), most
// of it pages of its own executable.
func rssFileKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("RssFile: %q", line)
			}
			return n
		}
	}
	t.Fatal("/proc/self/status has no RssFile")
	return 0
}

// TestReleaseStartupPages: what start-up mapped of the executable (this
// test binary links the same packages as certwatch) stops counting in the
// process's resident memory, and the process goes on working: the code and
// constants it uses next are mapped again.
func TestReleaseStartupPages(t *testing.T) {
	before := rssFileKiB(t)
	if before < 8<<10 {
		t.Fatalf("RssFile before the release: %d KiB; want the test binary's start-up to have mapped at least 8 MiB of it", before)
	}
	if err := releaseStartupPages(); err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	if after > before/2 {
		t.Errorf("RssFile %d KiB before releasing the start-up pages, %d KiB after; want at most half left", before, after)
	}
	// Code and data used after the release still run and read as before.
	var out, errOut strings.Builder
	if err := Run(t.Context(), []string{"--version"}, &out, &errOut); err != nil || !strings.HasPrefix(out.String(), "certwatch ") {
		t.Errorf("certwatch --version after the release: %q, %v (stderr %q)", out.String(), err, errOut.String())
	}
	t.Logf("RssFile %d KiB before, %d KiB after the release, %d KiB after --version", before, after, rssFileKiB(t))
}

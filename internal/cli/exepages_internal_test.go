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

// TestReleaseExecutablePages: what start-up mapped of the executable (this
// test binary links the same packages as certwatch) stops counting in the
// process's resident memory, and the process goes on working: the code and
// constants it uses next are mapped again.
func TestReleaseExecutablePages(t *testing.T) {
	before := rssFileKiB(t)
	if before < 8<<10 {
		t.Fatalf("RssFile before the release: %d KiB; want the test binary's start-up to have mapped at least 8 MiB of it", before)
	}
	if err := releaseExecutablePages(); err != nil {
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

// TestGiveBackMemoryUnmapsExecutable: between the phases of a scan,
// giveBackMemory also unmaps what the phase before mapped of the
// executable, and the next phase runs as before.
func TestGiveBackMemoryUnmapsExecutable(t *testing.T) {
	// A scan maps the code of discovery, probing, policy and the report.
	// Nothing listens on port 1 of loopback: the probe fails at once.
	scan := []string{"scan", "--target", "127.0.0.1:1", "--allow-loopback", "--timeout", "1s", "--no-progress", "--output", "json", "--fail-on", "none"}
	// It checks nothing (exit 3): only the code it runs matters here.
	if err := releaseExecutablePages(); err != nil {
		t.Fatal(err)
	}
	floor := rssFileKiB(t) // what is not the executable's read-only pages
	var out, errOut strings.Builder
	if _ = Run(t.Context(), scan, &out, &errOut); !strings.Contains(out.String(), `"127.0.0.1"`) {
		t.Fatalf("certwatch %v: report %q (stderr %q)", scan, out.String(), errOut.String())
	}
	before := rssFileKiB(t)
	giveBackMemory()
	after := rssFileKiB(t)
	if before-floor < 2<<10 || after-floor > (before-floor)/2 {
		t.Errorf("RssFile %d KiB before a scan, %d KiB after it, %d KiB after giveBackMemory; want the scan to map at least 2 MiB and at most half of that left", floor, before, after)
	}
	out.Reset()
	if _ = Run(t.Context(), scan, &out, &errOut); !strings.Contains(out.String(), `"127.0.0.1"`) {
		t.Errorf("the scan again after giveBackMemory: report %q (stderr %q)", out.String(), errOut.String())
	}
	t.Logf("RssFile %d KiB before a scan, %d KiB after it, %d KiB after giveBackMemory, %d KiB after the scan again", floor, before, after, rssFileKiB(t))
}

package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
)

// TestScanBreakAfter: probe.break_after and --break-after set how many
// endpoints in a row on one address must time out before the scan gives
// the address up. A zone of 6 names on a hung address: break_after: 0 in
// the config waits out every endpoint's own timeout; --break-after 2
// (the flag wins) gives up after 2, so the others fail fast, saying so
// (3 or 4 of them: a third may be in flight on the address's second
// connection when the second times out).
func TestScanBreakAfter(t *testing.T) {
	t.Parallel()
	pit, err := certtest.ServeSilent("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pit.Close() })
	var zone strings.Builder
	for i := range 6 {
		fmt.Fprintf(&zone, "hung%d A 127.0.0.1\n", i)
	}
	dns, err := dnstest.Start(dnstest.Zone{Name: "breaker.example", Text: zone.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	cfg := filepath.Join(t.TempDir(), "certwatch.yaml")
	if err := os.WriteFile(cfg, []byte("probe:\n  retries: 0\n  break_after: 0\n  allow_loopback: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"scan", "--config", cfg, "--zone", "breaker.example", "--nameserver", dns.Addr(),
		"--ports", fmt.Sprint(pit.Addr().Port()), "--timeout", tarpitTimeout.String(), "--output", "json"}

	for _, tt := range []struct {
		name    string
		flags   []string
		givenUp int // at least
		want    string
	}{
		{"break_after: 0", nil, 0, ""},
		{"--break-after 2", []string{"--break-after", "2"}, 3, "given up on after 2 consecutive timeouts"},
	} {
		stdout, stderr, _ := run(t, append(args, tt.flags...)...)
		r := parseTarpitReport(t, stdout)
		timeouts, givenUp := 0, 0
		for _, ep := range r.Endpoints {
			if ep.Failure == "timeout" {
				timeouts++
			}
			if strings.Contains(ep.Error, "given up on") {
				givenUp++
				if !strings.Contains(ep.Error, tt.want) {
					t.Errorf("%s: %s: error %q, want it to say %q", tt.name, ep.Name, ep.Error, tt.want)
				}
			}
		}
		if len(r.Endpoints) != 6 || timeouts != 6 || givenUp < tt.givenUp || (tt.givenUp == 0 && givenUp != 0) {
			t.Errorf("%s: %d endpoints, %d timeouts, %d given up on; want 6, 6, %d or more\nstderr: %s", tt.name, len(r.Endpoints), timeouts, givenUp, tt.givenUp, stderr)
		}
	}
	if _, stderr, code := run(t, append(args, "--break-after", "-1")...); code != 2 || !strings.Contains(stderr, "--break-after -1: must be 0 (never give up on an address) to 1000, got -1") {
		t.Errorf("--break-after -1: exit %d, stderr %q; want 2 and the bound", code, stderr)
	}
}

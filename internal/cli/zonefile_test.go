package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/lab"
	"github.com/certwatch/certwatch/scan"
)

// testScanZoneFile: `certwatch scan --zone-file PATH` on the file of the
// lab's zone (the zone's name taken from its SOA) reports what scanning
// the zone transferred reports: the same findings, the same delegated
// child followed (svc, transferred from its name server), the same gap
// (partners, which refuses) and the same coverage.
func testScanZoneFile(t *testing.T) {
	l, err := lab.StartWith(time.Now(), lab.Options{Delegations: true})
	if err != nil {
		t.Fatalf("start lab: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	path := filepath.Join(t.TempDir(), "internal.zone")
	if err := os.WriteFile(path, []byte("$ORIGIN "+lab.Zone+".\n$TTL 300\n"+l.ZoneText), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"scan", "--ports", fmt.Sprint(l.Port), "--ca-file", l.CAFile, "--timeout", "1500ms", "--allow-loopback",
		"--delegation-port", fmt.Sprint(l.DelegationPort), "--output", "json"}

	report := func(args ...string) scan.Report {
		t.Helper()
		stdout, stderr, code := run(t, append(slices.Clone(common), args...)...)
		if code != cli.ExitFindings {
			t.Fatalf("%v: exit code = %d, want %d; stderr:\n%s", args, code, cli.ExitFindings, stderr)
		}
		var r scan.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("decode report: %v\n%s", err, stdout)
		}
		return r
	}
	transferred := report("--zone", lab.Zone, "--nameserver", l.DNS)
	fromFile := report("--zone-file", path)

	findings := func(r scan.Report) []string {
		var out []string
		for _, f := range r.Findings {
			out = append(out, fmt.Sprintf("%s %s %s", f.Tier, f.Kind, f.Message))
		}
		slices.Sort(out)
		return out
	}
	if d := cmp.Diff(findings(transferred), findings(fromFile)); d != "" {
		t.Errorf("findings from the zone file differ from the transfer's (-axfr +file):\n%s", d)
	}
	if !slices.ContainsFunc(findings(fromFile), func(s string) bool { return strings.Contains(s, "api.svc."+lab.Zone) }) {
		t.Errorf("no finding of the delegated child's endpoint: %v", findings(fromFile))
	}
	if d := cmp.Diff(transferred.Coverage, fromFile.Coverage); d != "" {
		t.Errorf("coverage from the zone file differs from the transfer's (-axfr +file):\n%s", d)
	}
	if c := fromFile.Coverage; c == nil || len(c.Zones) != 2 || len(c.Gaps) != 1 || c.Gaps[0].Zone != "partners."+lab.Zone {
		t.Errorf("coverage = %+v, want %s and svc watched, partners a gap", fromFile.Coverage, lab.Zone)
	}
}

// TestScanZoneFileForms: --zone-file ZONE=PATH names the zone of a file
// without an SOA; a file that cannot tell its zone, a bad record, a
// missing file and --nameserver with only file zones are refused with
// one line saying which file, where and what to do.
func TestScanZoneFileForms(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noSOA := write("nosoa.zone", "www 300 A 192.0.2.1\napp 300 CNAME www\n")
	originOnly := write("origin.zone", "$ORIGIN files.example.\nwww 300 A 192.0.2.1\n")
	bad := write("bad.zone", "$ORIGIN bad.example.\n@ 300 SOA ns1 h 1 2 3 4 5\nwww 300 A 999.1.1.1\n")

	t.Run("ZONE=PATH", func(t *testing.T) {
		t.Parallel()
		stdout, stderr, code := run(t, "inventory", "--zone-file", "Files.Example="+noSOA, "--output", "json")
		if code != 0 {
			t.Fatalf("exit code = %d; stderr: %s", code, stderr)
		}
		var inv struct {
			Targets []struct {
				Name    string   `json:"name"`
				Sources []string `json:"sources"`
			} `json:"targets"`
		}
		if err := json.Unmarshal([]byte(stdout), &inv); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tg := range inv.Targets {
			got = append(got, tg.Name+" "+strings.Join(tg.Sources, ","))
		}
		want := []string{"app.files.example dnszone:files.example", "www.files.example dnszone:files.example"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("inventory (-want +got):\n%s", d)
		}
	})

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no SOA to name the zone", []string{"scan", "--zone-file", originOnly}, "--zone-file: zone file " + originOnly + ": no SOA record to take the zone's name from; name it: ZONE=PATH"},
		{"relative names without $ORIGIN", []string{"scan", "--zone-file", noSOA}, "--zone-file: cannot tell the zone of " + noSOA + " (its SOA record names it, relative to an $ORIGIN before it): " + noSOA + `:1: bad owner name "www"; name it: ZONE=PATH`},
		{"bad record", []string{"scan", "--zone-file", bad}, "certwatch: every discovery source failed: zone bad.example: " + bad + `:3: bad A record "999.1.1.1"`},
		{"missing file", []string{"scan", "--zone-file", "a.example=" + filepath.Join(dir, "nope.zone")}, "zone a.example: file: " + filepath.Join(dir, "nope.zone") + ": no such file or directory"},
		{"empty zone", []string{"scan", "--zone-file", "=" + bad}, "--zone-file: want PATH or ZONE=PATH"},
		{"nameserver with only file zones", []string{"scan", "--zone-file", bad, "--nameserver", "127.0.0.1:53"}, "--nameserver transfers --zone zones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := run(t, tt.args...)
			if code != cli.ExitUsage || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit code %d, stderr %q\nwant %d and one line containing %q", code, stderr, cli.ExitUsage, tt.want)
			}
		})
	}
}

// TestCheckConfigZoneFile: check-config refuses a zone file that is not
// there, and one given beside a nameserver, at the line of the file key.
func TestCheckConfigZoneFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "certwatch.yaml")
	missing := filepath.Join(dir, "internal.zone")
	yaml := "zones:\n  - name: internal.example\n    file: " + missing + "\n  - name: other.example\n    nameserver: 127.0.0.1:53\n    file: " + cfg + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "check-config", cfg)
	if code != cli.ExitUsage {
		t.Errorf("exit code = %d, want 2", code)
	}
	for _, want := range []string{
		"line 3: zone internal.example: file: " + missing + ": no such file or directory",
		"line 6: zone other.example: file and nameserver: give one",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

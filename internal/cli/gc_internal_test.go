package cli

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/certwatch/certwatch/scan"
)

// TestGCPercent: scan and inventory run with GOGC=25, a large scan's
// probing and report with GOGC=10, and run with GOGC=50, unless the user
// set $GOGC or $GOMEMLIMIT, which stay as the runtime applied them; each
// setting is restored when the command returns.
func TestGCPercent(t *testing.T) {
	zone := filepath.Join(t.TempDir(), "x.example.zone")
	if err := os.WriteFile(zone, []byte("$ORIGIN x.example.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 127.0.0.1\nwww A 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Nothing listens on port 1 of loopback: the probe fails at once.
	scanArgs := []string{"scan", "--target", "127.0.0.1:1", "--allow-loopback", "--timeout", "1s", "--no-progress", "--output", "json"}
	for _, tt := range []struct {
		name    string
		environ map[string]string
		args    []string
		want    []int // the percents set, in order
		large   int   // targets that make a scan large; 0 for largeScanTargets
	}{
		{"scan", nil, scanArgs, []int{25}, 0},
		{"scan, large", nil, scanArgs, []int{25, 10}, 1},
		{"scan, large, GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, scanArgs, nil, 1},
		{"inventory, large", nil, []string{"inventory", "--zone-file", "x.example=" + zone}, []int{25}, 1},
		{"inventory", nil, []string{"inventory", "--zone-file", "x.example=" + zone}, []int{25}, 0},
		{"scan, GOGC set", map[string]string{"GOGC": "200"}, scanArgs, nil, 0},
		{"inventory, GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, []string{"inventory", "--zone-file", "x.example=" + zone}, nil, 0},
		{"run", nil, []string{"run", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, []int{50}, 0},
		{"run, GOGC set", map[string]string{"GOGC": "100"}, []string{"run", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, nil, 0},
		{"version", nil, []string{"--version"}, nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var set []int
			restored := 0
			e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return tt.environ[k] }, largeScan: tt.large,
				setGCPercent: func(p int) func() {
					set = append(set, p)
					return func() { restored++ }
				}}
			_ = e.dispatch(t.Context(), tt.args) // the scan's findings do not matter here
			if !slices.Equal(set, tt.want) {
				t.Errorf("certwatch %v with %v set the GC percent to %v, want %v", tt.args, tt.environ, set, tt.want)
			}
			if restored != len(set) {
				t.Errorf("certwatch %v: %d settings restored of %d", tt.args, restored, len(set))
			}
		})
	}
}

// TestInventoryGC: run collects at GOGC=25 while its inventory holds
// 50,000 targets or more, and at its own setting again once it holds
// fewer; the end of the run restores what was in force.
func TestInventoryGC(t *testing.T) {
	var set []int
	restored := 0
	g := &inventoryGC{apply: func(p int) func() {
		set = append(set, p)
		return func() { restored++ }
	}}
	notes := &startupNotes{Recorder: nopRecorder{}, logger: newLogger(io.Discard, 0), onInventory: g.size}
	for _, n := range []int{10, largeScanTargets, 70_000, 100} {
		notes.RecordDiscovery(nil, n)
	}
	if !slices.Equal(set, []int{25}) || restored != 1 {
		t.Errorf("inventories of 10, 50,000, 70,000 and 100 targets: GC percents set %v, %d restored; want [25] once, restored once", set, restored)
	}
	notes.RecordDiscovery(nil, 100_000)
	g.restore()
	if !slices.Equal(set, []int{25, 25}) || restored != 2 {
		t.Errorf("then 100,000 and the run's end: GC percents set %v, %d restored; want [25 25], restored twice", set, restored)
	}
}

// nopRecorder is a daemon.Recorder that records nothing.
type nopRecorder struct{}

func (nopRecorder) RecordDiscovery([]scan.SourceResult, int)          {}
func (nopRecorder) RecordReport(*scan.Report)                         {}
func (nopRecorder) RecordRun(string, time.Time, time.Duration, error) {}
func (nopRecorder) RecordLastSuccess(string, time.Time)               {}

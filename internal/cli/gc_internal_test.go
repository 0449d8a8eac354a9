package cli

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestJudgingGC: while a run judges what came back, the collector runs at
// GOGC=10, whatever the inventory's size; once the run is over, at 25 again
// at a large inventory and at the daemon's own setting at a small one; an
// inventory that shrinks while a run judges changes nothing until the run
// is over, and every setting is undone in the order the runtime keeps
// them.
func TestJudgingGC(t *testing.T) {
	cur := daemonGCPercent // as debug.SetGCPercent keeps it
	var set []int
	g := &inventoryGC{apply: func(p int) func() {
		prev := cur
		cur = p
		set = append(set, p)
		return func() { cur = prev }
	}}
	step := func(what string, f func(), want int) {
		t.Helper()
		f()
		if cur != want {
			t.Errorf("%s: GOGC=%d, want %d (set %v)", what, cur, want, set)
		}
	}
	step("a run at 10 targets judges", func() { g.size(10); g.judge() }, judgingGCPercent)
	step("and ends", g.judged, daemonGCPercent)
	step("an inventory of 100,000", func() { g.size(100_000) }, largeRunGCPercent)
	step("a run at it judges", g.judge, judgingGCPercent)
	step("a second discovery of 100,000 meanwhile", func() { g.size(100_000) }, judgingGCPercent)
	step("the run ends", g.judged, largeRunGCPercent)
	step("the next run judges", g.judge, judgingGCPercent)
	step("the inventory shrinks to 100 meanwhile", func() { g.size(100) }, judgingGCPercent)
	step("the run ends", g.judged, daemonGCPercent)
	step("it grows back to 60,000", func() { g.size(60_000) }, largeRunGCPercent)
	step("the daemon stops", g.restore, daemonGCPercent)
	if want := []int{10, 25, 10, 25, 10, 25}; !slices.Equal(set, want) {
		t.Errorf("GC percents set %v, want %v", set, want)
	}
}

// TestRenderingGC: while the status page renders, the collector runs at
// GOGC=10, at any inventory; once the last of several renderings under way
// at once is over, at what was in force before; a run that judges
// meanwhile keeps 10 until it is over.
func TestRenderingGC(t *testing.T) {
	cur := daemonGCPercent // as debug.SetGCPercent keeps it
	g := &inventoryGC{apply: func(p int) func() {
		prev := cur
		cur = p
		return func() { cur = prev }
	}}
	step := func(what string, f func(), want int) {
		t.Helper()
		f()
		if cur != want {
			t.Errorf("%s: GOGC=%d, want %d", what, cur, want)
		}
	}
	step("an inventory of 10 renders", func() { g.size(10); g.render() }, renderingGCPercent)
	step("a second rendering starts", g.render, renderingGCPercent)
	step("the first is over", g.rendered, renderingGCPercent)
	step("the second is over", g.rendered, daemonGCPercent)
	step("an inventory of 100,000 renders", func() { g.size(100_000); g.render() }, renderingGCPercent)
	step("a run judges meanwhile", g.judge, judgingGCPercent)
	step("the rendering is over", g.rendered, judgingGCPercent)
	step("the run is over", g.judged, largeRunGCPercent)
	step("the daemon stops", g.restore, daemonGCPercent)
}

// nopRecorder is a daemon.Recorder that records nothing.
type nopRecorder struct{}

func (nopRecorder) RecordDiscovery([]scan.SourceResult, int)          {}
func (nopRecorder) RecordReport(*scan.Report) func()                  { return func() {} }
func (nopRecorder) RecordRun(string, time.Time, time.Duration, error) {}
func (nopRecorder) RecordLastSuccess(string, time.Time)               {}

// TestHeapProfile: scan, inventory and a run without daemon.pprof stop the
// sampling of allocations for a heap profile nothing of theirs can serve; a
// run with daemon.pprof keeps it for /debug/pprof/heap.
func TestHeapProfile(t *testing.T) {
	dir := t.TempDir()
	// An address already taken: run stops there, once it has read its
	// configuration.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	config := func(pprof bool) string {
		path := filepath.Join(dir, fmt.Sprintf("pprof-%v.yaml", pprof))
		body := fmt.Sprintf("targets: [\"127.0.0.1:1\"]\nprobe:\n  allow_loopback: true\nnotify:\n  state: %s\ndaemon:\n  listen: %s\n  pprof: %v\n",
			filepath.Join(dir, fmt.Sprintf("state-%v.db", pprof)), taken.Addr(), pprof)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tt := range []struct {
		name string
		args []string
		want bool // heap profiling stopped
	}{
		{"scan", []string{"scan", "--target", "127.0.0.1:1", "--allow-loopback", "--timeout", "1s", "--no-progress", "--output", "json"}, true},
		{"inventory", []string{"inventory", "--target", "127.0.0.1:1"}, true},
		{"run", []string{"run", "--config", config(false)}, true},
		{"run with daemon.pprof", []string{"run", "--config", config(true)}, false},
		{"version", []string{"--version"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stopped := false
			e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }, stopHeapProfile: func() { stopped = true }}
			err := e.dispatch(t.Context(), tt.args)
			if tt.args[0] == "run" && (err == nil || !strings.Contains(err.Error(), taken.Addr().String())) {
				t.Fatalf("certwatch %v = %v, want it stopped at the address taken", tt.args, err)
			}
			if stopped != tt.want {
				t.Errorf("certwatch %v (%v): heap profile stopped %v, want %v", tt.args, err, stopped, tt.want)
			}
		})
	}
}

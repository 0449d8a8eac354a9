package cli

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestGCPercent: scan and inventory run with GOGC=25, and run with
// GOGC=50, unless the user set $GOGC or $GOMEMLIMIT, which stay as the
// runtime applied them; the setting is restored when the command returns.
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
	}{
		{"scan", nil, scanArgs, []int{25}},
		{"inventory", nil, []string{"inventory", "--zone-file", "x.example=" + zone}, []int{25}},
		{"scan, GOGC set", map[string]string{"GOGC": "200"}, scanArgs, nil},
		{"inventory, GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, []string{"inventory", "--zone-file", "x.example=" + zone}, nil},
		{"run", nil, []string{"run", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, []int{50}},
		{"run, GOGC set", map[string]string{"GOGC": "100"}, []string{"run", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, nil},
		{"version", nil, []string{"--version"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var set []int
			restored := 0
			e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return tt.environ[k] },
				setGCPercent: func(p int) func() {
					set = append(set, p)
					return func() { restored++ }
				}}
			_ = e.dispatch(t.Context(), tt.args) // the scan's findings do not matter here
			if len(set) != len(tt.want) || (len(set) > 0 && set[0] != tt.want[0]) {
				t.Errorf("certwatch %v with %v set the GC percent to %v, want %v", tt.args, tt.environ, set, tt.want)
			}
			if restored != len(set) {
				t.Errorf("certwatch %v: %d settings restored of %d", tt.args, restored, len(set))
			}
		})
	}
}

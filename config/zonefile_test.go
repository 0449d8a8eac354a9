package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
)

// TestZoneFile: a zone read from a file decodes; a file that cannot be
// read as one, or given with a nameserver, is refused at the line of the
// file key, naming the zone, the key and the path.
func TestZoneFile(t *testing.T) {
	dir := t.TempDir()
	zone := filepath.Join(dir, "internal.zone")
	if err := os.WriteFile(zone, []byte("$ORIGIN internal.example.\n@ 300 SOA ns1 h 1 2 3 4 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	c, err := config.Decode(strings.NewReader("zones:\n  - name: internal.example\n    file: " + zone + "\n"))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(c.Zones) != 1 || c.Zones[0].File != zone || c.Zones[0].Name != "internal.example" {
		t.Errorf("zones = %+v, want internal.example from %s", c.Zones, zone)
	}

	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"missing file", "zones:\n  - name: internal.example\n\n    file: " + filepath.Join(dir, "nope.zone") + "\n",
			[]string{"line 4: zone internal.example: file: ", "nope.zone: no such file or directory"}},
		{"directory", "zones:\n  - name: internal.example\n    file: " + dir + "\n",
			[]string{"line 3: zone internal.example: file: ", "is not a regular file but a directory"}},
		{"file and nameserver", "zones:\n  - name: internal.example\n    nameserver: 127.0.0.1:53\n    file: " + zone + "\n",
			[]string{"line 4: zone internal.example: file and nameserver: give one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("Decode(%q) = nil error, want one mentioning %q", tt.yaml, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Decode error = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

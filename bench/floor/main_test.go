package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	for _, tt := range []struct {
		name, tsv string
		want      int    // endpoints, when no error
		err       string // part of the error
	}{
		{"farm file", "# addr\tsni\tprofile\n127.1.0.1:443\tep-000000.farm.test\tok\n[::1]:8443\tep-000001.farm.test\tok\n", 2, ""},
		{"not loopback", "127.1.0.1:443\ta.test\n10.0.0.1:443\tb.test\n", 0, "10.0.0.1 is not a loopback address"},
		{"no SNI", "127.1.0.1:443\n", 0, ":1: want address and SNI"},
		{"bad address", "localhost:443\ta.test\n", 0, ":1: "},
		{"empty", "# addr\tsni\n", 0, "no endpoints"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "targets.tsv")
			if err := os.WriteFile(path, []byte(tt.tsv), 0o600); err != nil {
				t.Fatal(err)
			}
			eps, err := load(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("load: %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(eps) != tt.want {
				t.Fatalf("got %d endpoints, want %d", len(eps), tt.want)
			}
		})
	}
}

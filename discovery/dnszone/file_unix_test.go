//go:build unix

package dnszone_test

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/certwatch/certwatch/discovery/dnszone"
)

// TestZoneFileFIFO: a named pipe given as the zone file is refused at
// once, without waiting for a writer that never comes.
func TestZoneFileFIFO(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "pipe.zone")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := targets(context.Background(), newSource(t, dnszone.Config{Zone: "internal.example", File: p}))
	if err == nil || !strings.Contains(err.Error(), "pipe.zone is not a regular file but a named pipe") {
		t.Errorf("Discover = %v, want an error saying the FIFO is not a regular file", err)
	}
	if err := dnszone.CheckFile(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("CheckFile = %v, want it refused", err)
	}
}

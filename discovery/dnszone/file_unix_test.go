//go:build unix

package dnszone_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestZoneFileSwappedForFIFO: a zone file that is swapped for a named pipe
// between the check of its mode and its opening (a symbolic link
// retargeted in a loop) is still refused, never waited on for a writer.
func TestZoneFileSwappedForFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	regular := writeZone(t, "regular.zone", "$ORIGIN internal.example.\nwww 300 A 192.0.2.1\n")
	fifo := filepath.Join(dir, "pipe.zone")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "internal.zone")
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tmp := filepath.Join(dir, "next.zone")
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			target := regular
			if i%2 == 1 {
				target = fifo
			}
			_ = os.Remove(tmp)
			if os.Symlink(target, tmp) == nil {
				_ = os.Rename(tmp, path)
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-stopped
		// Release a read that is stuck opening the pipe, if any.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	s := newSource(t, dnszone.Config{Zone: "internal.example", File: path, Timeout: time.Second})
	for end, n := time.Now().Add(2*time.Second), 0; time.Now().Before(end); n++ {
		done := make(chan error, 1)
		go func() {
			_, err := targets(context.Background(), s)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil && !strings.Contains(err.Error(), "not a regular file but a named pipe") && !strings.Contains(err.Error(), "no such file") {
				t.Fatalf("Discover %d = %v, want the pipe refused", n, err)
			}
		case <-time.After(10 * time.Second): // a hang, not a loaded machine
			t.Fatalf("Discover %d still opening the file after 10s (a named pipe waiting for a writer)", n)
		}
	}
}

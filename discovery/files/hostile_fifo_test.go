package files_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/files"
	"github.com/certwatch/certwatch/internal/certtest"
)

// TestNotRegularFile: a symlink x.pem to a named pipe, which no one
// writes, matched by a glob, is an error naming it, found at once: it
// hung discovery for good, blocked in open.
func TestNotRegularFile(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "work", "pipe")
	if err := os.MkdirAll(filepath.Dir(pipe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "certs", "x.pem")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(pipe, link); err != nil {
		t.Fatal(err)
	}
	p := newPKI(t)
	write(t, filepath.Join(dir, "certs", "root.pem"), certtest.PEM(p.root.Cert))
	for _, glob := range []string{filepath.Join(dir, "certs", "*.pem"), link} {
		s, err := files.New(files.Config{Now: func() time.Time { return now }, Groups: []files.Group{{Globs: []string{glob}}}})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			y, err := s.Discover(context.Background())
			done <- result{len(y.Inventory.AtRest), err}
		}()
		select {
		case r := <-done:
			wantRefused(t, r.err, link, "not a regular file (named pipe)", "certwatch reads only regular files")
			if glob != link && r.n != 1 {
				t.Errorf("%s: %d certificates, want root.pem's", glob, r.n)
			}
		case <-time.After(10 * time.Second):
			// Unblock the open, or the test binary never exits.
			if f, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			t.Fatalf("%s: Discover has not returned after 10s: blocked opening the pipe", glob)
		}
	}
}

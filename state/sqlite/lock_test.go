package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/state"
)

// TestLock: a state file's lock is one holder's at a time; the second
// is refused at once, naming the first (command, pid, host, since when),
// and gets it once the first releases it.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	first, err := Acquire(path, "certwatch run", t0)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	_, err = Acquire(path, "certwatch scan --notify", t0.Add(90*time.Second))
	want := fmt.Sprintf("held by certwatch run (pid %d on host %s, since 2030-01-01T00:00:00Z, 1m30s ago)", os.Getpid(), host)
	if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("second Acquire = %v, want ErrLocked naming %s and %q", err, path, want)
	}
	if fi, err := os.Stat(LockPath(path)); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file: mode %v, want -rw-------", fi.Mode().Perm())
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	second, err := Acquire(path, "certwatch scan --notify", t0)
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	second.Release()
}

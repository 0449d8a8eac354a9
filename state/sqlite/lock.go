package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/certwatch/certwatch/state"
)

// Lock is one process's claim on a SQLite state file: the SQLite store is
// one process's, and two daemons on one file would both probe the whole
// fleet and both judge its alerts. It is an exclusive flock(2) on a file
// beside the state file (LockPath), so the kernel releases it when the
// process ends however it ends, and a lock is never stale. The lock file
// says who holds it; it is left in place when released (removing it
// would let a third process lock a new file while a second still holds
// the old one).
//
// On systems without flock (anything but Linux, macOS and the BSDs) the
// lock holds nothing.
type Lock struct {
	f *os.File
}

// errHeld: another open file description holds the lock.
var errHeld = errors.New("lock held")

// Holder is who holds a lock, as its lock file says.
type Holder struct {
	Command string    `json:"command"`
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Since   time.Time `json:"since"`
}

// LockPath returns the lock file of the state file at path.
func LockPath(path string) string { return path + ".lock" }

// Acquire takes the lock of the state file at path for command (what the
// holder is, e.g. "certwatch run"), without waiting, and records the
// holder (command, this process, host, now) in the lock file, created
// with mode 0600. When another process holds it, the error matches
// state.ErrLocked and names the holder. Release it when done.
func Acquire(path, command string, now time.Time) (*Lock, error) {
	lp := LockPath(path)
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state %s: %v; check that the directory exists and is writable by this user", path, err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if !errors.Is(err, errHeld) {
			return nil, fmt.Errorf("lock state %s with %s: %w", path, lp, err)
		}
		return nil, fmt.Errorf("lock state %s: %w: %s; only one process may use a SQLite state at a time: stop that one, or give this one its own notify.state (replicas share a PostgreSQL state instead)",
			path, state.ErrLocked, describeHolder(lp, now))
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(Holder{Command: command, PID: os.Getpid(), Host: host, Since: now.UTC().Truncate(time.Second)})
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock state %s: write %s: %w", path, lp, err)
	}
	return &Lock{f: f}, nil
}

// describeHolder says who holds the lock whose file is lp.
func describeHolder(lp string, now time.Time) string {
	b, err := os.ReadFile(lp)
	var h Holder
	if err != nil || json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return "held by another process, which has not yet written who it is to " + lp
	}
	s := fmt.Sprintf("held by %s (pid %d on host %s", h.Command, h.PID, h.Host)
	if !h.Since.IsZero() {
		s += fmt.Sprintf(", since %s", h.Since.UTC().Format(time.RFC3339))
		if d := now.Sub(h.Since).Truncate(time.Second); d >= 0 {
			s += fmt.Sprintf(", %v ago", d)
		}
	}
	return s + ")"
}

// Release gives the lock up. It is safe to call on a nil Lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

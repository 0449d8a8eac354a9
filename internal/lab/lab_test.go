package lab_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/lab"
)

// TestPortsHeld: while a lab runs, the ports it picked are not given to
// anyone else asking for a free port where labs pick theirs, as another lab does;
// otherwise that lab's IMAP service on 127.0.0.21 could sit on this lab's
// TLS port and answer for a name of this lab's zone. Close frees them.
func TestPortsHeld(t *testing.T) {
	t.Parallel()
	l, err := lab.Start(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ports := []int{l.Port, l.LDAPPort, l.SubmissionPort, l.IMAPPort}
	for _, p := range ports {
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.250:%d", p)); err == nil {
			ln.Close()
			t.Errorf("port %d was free on 127.0.0.250 while the lab ran", p)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.250:%d", p))
		if err != nil {
			t.Errorf("port %d still held after Close: %v", p, err)
			continue
		}
		ln.Close()
	}
}

// TestFailedStartStopsWhatItStarted: a lab that cannot be built (here, no
// temporary directory to write its CA to, after its servers are up) fails
// with the reason, after its attempts, and leaves nothing it started
// listening or open. It once stopped what it started through a nil lab,
// and the test that asked for it died of the panic instead of saying why.
func TestFailedStartStopsWhatItStarted(t *testing.T) { // not parallel: it sets TMPDIR and counts open files
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	before := openFiles(t)
	l, err := lab.Start(time.Now())
	if err == nil {
		l.Close()
		t.Fatal("lab started without a temporary directory")
	}
	if !strings.Contains(err.Error(), "attempts") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Start = %v, want the missing directory, after its attempts", err)
	}
	if after := openFiles(t); after > before {
		t.Errorf("%d files open after the failed start, %d before: what it started was left running", after, before)
	}
}

// openFiles counts the process's open file descriptors (Linux).
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(fds)
}

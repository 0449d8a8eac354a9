package lab_test

import (
	"fmt"
	"net"
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

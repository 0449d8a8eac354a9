package probes_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// TestFailureSaysWhatHappened checks failure classes and messages: a
// host without a route is no_route (not handshake), and a target given as
// an IP address, which sends no SNI, is not said to have sent one.
func TestFailureSaysWhatHappened(t *testing.T) {
	t.Parallel()
	p := newPKI(t)

	// What connect(2) answers on a host that lost its network; made by
	// the dialer, so that no packet leaves loopback.
	for _, errno := range []syscall.Errno{syscall.ENETUNREACH, syscall.EHOSTUNREACH} {
		c := testConfig(p.root.Pool())
		c.Dial = func(context.Context, string, string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
		}
		ap := closedPort(t)
		o := probeOne(t, probes.New(c), target("a.example", ap))
		if o.Failure != probes.FailNoRoute || o.Attempts != 1 || o.Connected {
			t.Errorf("%v: Failure, Attempts, Connected = %q, %d, %v; want no_route, 1, false", errno, o.Failure, o.Attempts, o.Connected)
		}
		if want := "connect to " + ap.String() + ": connect: " + errno.Error() + " (this host has no route to the address; check its network"; !strings.HasPrefix(o.Error, want) {
			t.Errorf("%v: Error = %q, want it to start %q", errno, o.Error, want)
		}
	}

	// A server that alerts without the name it serves.
	onlyB := leaf(t, p.inter, "b.example", now.Add(-day), now.Add(30*day))
	s, err := certtest.ServeSNI("127.0.0.1:0", map[string]tls.Certificate{"b.example": onlyB.FullChain()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prober := probes.New(testConfig(p.root.Pool()))
	o := probeOne(t, prober, target(s.Addr().Addr().String(), s.Addr()))
	if o.Failure != probes.FailAlert || strings.Contains(o.Error, "sni") || !strings.Contains(o.Error, "it may want a server name (SNI), which a target given as an IP address does not send") {
		t.Errorf("IP target: Failure %q, Error %q; want tls_alert, no SNI named, and advice about SNI", o.Failure, o.Error)
	}
	o = probeOne(t, prober, target("a.example", s.Addr()))
	if want := "tls handshake with " + s.Addr().String() + " (sni a.example): "; !strings.HasPrefix(o.Error, want) || !strings.Contains(o.Error, "it may not serve this name") {
		t.Errorf("named target: Error %q, want it to start %q and say the server may not serve the name", o.Error, want)
	}
}

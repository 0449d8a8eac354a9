package cli_test

import (
	"net"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/cli"
)

// TestScanWithoutNetwork: a host that lost its network cannot resolve a
// name. A scan of targets by name through a resolver that is gone (a
// loopback port nothing listens on) exits 3 with one line saying nothing
// was checked, not 0 and not just the unreachable findings' exit 1.
func TestScanWithoutNetwork(t *testing.T) {
	t.Parallel()
	ln, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.LocalAddr().String()
	ln.Close() // nothing answers there now
	_, stderr, code := run(t, "scan", "--target", "app.example.com:443", "--target", "db.example.com:5432/postgres",
		"--resolver", gone, "--timeout", "1s")
	const want = "certwatch: no certificate from any of the 2 endpoint(s) (2 resolve), so nothing was checked: likely a network problem on this host"
	if code != cli.ExitUnverified || !strings.HasPrefix(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("exit %d, stderr %q; want %d and one line starting %q", code, stderr, cli.ExitUnverified, want)
	}
}

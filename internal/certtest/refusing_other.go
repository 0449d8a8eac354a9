//go:build !unix

package certtest

import (
	"net"
	"net/netip"
	"testing"
)

// RefusingAddr returns a TCP address on ip that refuses connections: here
// the port of a listener closed at once, which another test's server may
// take meanwhile (on Unix the port is held; see refusing_unix.go).
func RefusingAddr(t testing.TB, ip netip.Addr) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

//go:build unix

package certtest

import (
	"net/netip"
	"syscall"
	"testing"
)

// RefusingAddr returns a TCP address on ip (a loopback address) that
// refuses every connection until the test ends: a socket bound to it that
// does not listen, held open meanwhile. A listener closed at once would
// leave its port free for another test's server to take, which then
// answers instead of refusing.
func RefusingAddr(t testing.TB, ip netip.Addr) netip.AddrPort {
	t.Helper()
	if !ip.Is4() {
		t.Fatalf("RefusingAddr(%s): want an IPv4 address", ip)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: ip.As4()}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(ip, uint16(sa.(*syscall.SockaddrInet4).Port))
}

package probes

import (
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"sync"
)

// Key exchange groups offered in the ClientHello, in crypto/tls's own
// order of preference; it sends a key share for the first only.
//
// The first connection to an address offers P-256 alone. P-256 is the one
// group every TLS 1.3 server must implement (RFC 8446, 9.1), nearly every
// TLS 1.2 server offers it, and on amd64 its key generation is a fixed-base
// multiplication with precomputed tables: a P-256 key share plus the ECDH
// costs about 75 µs of client CPU against 105 µs for X25519. A probe sends
// no application data, so the choice of group protects nothing; only its
// cost and the server's acceptance matter.
//
// A server that shares no group with that offer refuses the handshake with
// a handshake_failure or insufficient_security alert (RFC 8446, 4.1.1).
// The address is then tried once more with fallbackGroups, every classical
// group crypto/tls implements, and remembered, so later probes of it offer
// fallbackGroups first and make one connection again. A server that
// instead drops the connection or stops answering is retried as any
// transient failure is, offering fallbackGroups, and remembered when that
// succeeds.
var (
	firstGroups    = []tls.CurveID{tls.CurveP256}
	fallbackGroups = []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521}
)

// maxFallbackAddrs bounds the addresses remembered as refusing
// firstGroups; the memory is emptied when it is full.
const maxFallbackAddrs = 4096

// TLS alert numbers (RFC 8446, 6) a server sends when it shares no key
// exchange group with the client.
const (
	alertHandshakeFailure     = 40
	alertInsufficientSecurity = 71
)

// fallbackAddrs remembers the addresses that refused firstGroups. It is
// safe for concurrent use.
type fallbackAddrs struct {
	// mu guards addrs.
	mu    sync.Mutex
	addrs map[netip.AddrPort]struct{}
}

func newFallbackAddrs() *fallbackAddrs {
	return &fallbackAddrs{addrs: make(map[netip.AddrPort]struct{})}
}

// groups returns the groups to offer first to ap, and whether they are
// firstGroups (so that a refusal is worth a fallback).
func (f *fallbackAddrs) groups(ap netip.AddrPort) ([]tls.CurveID, bool) {
	f.mu.Lock()
	_, ok := f.addrs[ap]
	f.mu.Unlock()
	if ok {
		return fallbackGroups, false
	}
	return firstGroups, true
}

func (f *fallbackAddrs) add(ap netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.addrs) >= maxFallbackAddrs {
		clear(f.addrs)
	}
	f.addrs[ap] = struct{}{}
}

// refusedGroups reports whether err is a handshake refused with the alert
// a server sends when it shares no key exchange group with the client.
// (Other causes share the alert; the fallback then fails the same way.)
func refusedGroups(err error) bool {
	// crypto/tls reports an alert received from the peer as a
	// *net.OpError with Op "remote error" whose Err, of an unexported
	// type, prints as the AlertError of the same number does.
	oe, ok := errors.AsType[*net.OpError](err)
	if !ok || oe.Op != "remote error" || oe.Err == nil {
		return false
	}
	msg := oe.Err.Error()
	return msg == tls.AlertError(alertHandshakeFailure).Error() ||
		msg == tls.AlertError(alertInsufficientSecurity).Error()
}

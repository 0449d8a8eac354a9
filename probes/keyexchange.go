package probes

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
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
//
// With Config.PostQuantum every connection offers the X25519MLKEM768 hybrid
// first, with an X25519 share beside it (crypto/tls computes that share as
// part of the hybrid's), so the negotiated group says whether the server
// takes the hybrid; a server that takes neither gets a HelloRetryRequest for
// P-256. It costs more client CPU per handshake (docs/configuration.md,
// "Post-quantum key exchange"), so it is an opt-in check, not the default.
var (
	firstGroups    = []tls.CurveID{tls.CurveP256}
	fallbackGroups = []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521}

	hybridFirstGroups    = []tls.CurveID{tls.X25519MLKEM768, tls.X25519, tls.CurveP256}
	hybridFallbackGroups = []tls.CurveID{tls.X25519MLKEM768, tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521}
)

// KeyExchange is the key exchange group a handshake negotiated (a TLS
// NamedGroup, crypto/tls's CurveID); zero when there was no handshake or it
// used none (TLS 1.2's RSA key transport). It prints and marshals as the
// group's IANA name ("secp256r1", "x25519", "X25519MLKEM768"), or 0x and
// four hex digits for a group without one.
type KeyExchange uint16

// keyExchangeNames are the IANA names of the TLS Supported Groups
// registry's entries a server may negotiate with certwatch's offers, and the
// other hybrids, so a report names them.
var keyExchangeNames = map[KeyExchange]string{
	KeyExchange(tls.CurveP256):          "secp256r1",
	KeyExchange(tls.CurveP384):          "secp384r1",
	KeyExchange(tls.CurveP521):          "secp521r1",
	KeyExchange(tls.X25519):             "x25519",
	KeyExchange(tls.X25519MLKEM768):     "X25519MLKEM768",
	KeyExchange(tls.SecP256r1MLKEM768):  "SecP256r1MLKEM768",
	KeyExchange(tls.SecP384r1MLKEM1024): "SecP384r1MLKEM1024",
}

// String returns the group's name; "" for zero.
func (k KeyExchange) String() string {
	if k == 0 {
		return ""
	}
	if n, ok := keyExchangeNames[k]; ok {
		return n
	}
	return fmt.Sprintf("0x%04x", uint16(k))
}

// Hybrid reports whether k is a post-quantum hybrid (ML-KEM with an
// elliptic curve).
func (k KeyExchange) Hybrid() bool {
	switch tls.CurveID(k) {
	case tls.X25519MLKEM768, tls.SecP256r1MLKEM768, tls.SecP384r1MLKEM1024:
		return true
	}
	return false
}

// MarshalText encodes the group as its name.
func (k KeyExchange) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// AppendText appends the group's name to b: MarshalText without a new
// slice, for a report that writes one per endpoint.
func (k KeyExchange) AppendText(b []byte) ([]byte, error) { return append(b, k.String()...), nil }

// UnmarshalText decodes a name MarshalText wrote.
func (k *KeyExchange) UnmarshalText(b []byte) error {
	s := string(b)
	for id, n := range keyExchangeNames {
		if n == s {
			*k = id
			return nil
		}
	}
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		if v, err := strconv.ParseUint(h, 16, 16); err == nil {
			*k = KeyExchange(v)
			return nil
		}
	}
	return fmt.Errorf("unknown key exchange group %q", b)
}

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

package policy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/probes"
)

// judgeTLSBroken records a tls_broken finding when a discovered name's
// address accepted the connection and then failed TLS. A refused
// connection, a dial that timed out and a failed lookup are not findings
// for a discovered name: zones list names that serve nothing on the port.
// Nor is a server that answers a STARTTLS dialogue without offering the
// upgrade (no_starttls): a plain-text service, not a broken TLS one.
// Explicit targets are judged as unreachable instead. Nor is a port of an
// address range swept (discovery/networks) that accepts and speaks
// something other than TLS: no name promises TLS there.
//
// A name the sweep gave up on (probes.Observation.GivenUp) made no
// connection, but when its address and port stalled after connecting for
// other names, it is the same outage of the same server and is tls_broken
// too (judgeGivenUp); on an address that never accepted the connection
// (dial timeouts) it is not a finding, as a dial timeout is not.
func (e *Evaluator) judgeTLSBroken(o *probes.Observation) {
	ep := int32(len(e.probed) - 1) // o's, which Add has just listed
	if found.FromNetworksOnly(o.Sources) {
		// A port of a swept range that speaks something else: no name
		// promises TLS there. Its stall still tells of the server.
		if !o.GivenUp {
			e.stalls.note(o, ep)
		}
		return
	}
	e.stalls.note(o, ep)
	if !o.Connected || o.Failure == probes.FailNone || o.Failure == probes.FailRefused || o.Failure == probes.FailResolve || o.Failure == probes.FailNoStartTLS {
		return
	}

	nameKey := net.JoinHostPort(o.Name, strconv.Itoa(o.Port))
	e.add(TLSBroken, e.rules.TLSBroken, nameKey, "", e.now, func() string {
		return fmt.Sprintf("%s accepts connections but the TLS handshake fails (%s: %s); clients of this name cannot connect: fix the server's TLS set-up, or stop publishing the name on port %d", nameKey, o.Failure, o.Error, o.Port)
	})
}

// stalls collects, per address and port, the first timeout after a
// connection (the server accepted and never finished the handshake) and
// the discovered names the sweep gave up on there. The zero value is
// ready to use.
type stalls struct {
	// stalled holds the error of the first stall seen on each address.
	stalled map[netip.AddrPort]string
	// givenUp holds the names given up on, on each address, in order.
	givenUp map[netip.AddrPort][]givenUpName
}

type givenUpName struct {
	nameKey string
	probed  int32 // its endpoint's index in Evaluator.probed
}

// note records o, whose endpoint is ep in Evaluator.probed, if it stalled
// after connecting, or was given up on.
func (s *stalls) note(o *probes.Observation, ep int32) {
	if o.Failure != probes.FailTimeout || !o.Address.IsValid() {
		return
	}
	ap := netip.AddrPortFrom(o.Address, uint16(o.Port))
	switch {
	case o.Connected:
		if s.stalled == nil {
			s.stalled = make(map[netip.AddrPort]string)
		}
		if _, ok := s.stalled[ap]; !ok {
			s.stalled[ap] = o.Error
		}
	case o.GivenUp:
		if s.givenUp == nil {
			s.givenUp = make(map[netip.AddrPort][]givenUpName)
		}
		s.givenUp[ap] = append(s.givenUp[ap], givenUpName{net.JoinHostPort(o.Name, strconv.Itoa(o.Port)), ep})
	}
}

// judgeGivenUp makes the names given up on at an address and port that
// stalled after connecting tls_broken, like the names that stalled there.
func (e *Evaluator) judgeGivenUp() {
	for ap, names := range e.stalls.givenUp {
		stall, ok := e.stalls.stalled[ap]
		if !ok {
			continue
		}
		for _, n := range names {
			e.addAt(TLSBroken, e.rules.TLSBroken, n.nameKey, "", e.now, n.probed, func() string {
				return fmt.Sprintf("%s accepts connections but the TLS handshake fails (timeout: not probed after %s stalled after connecting for other names, the same server: %s); clients of this name cannot connect: fix the server's TLS set-up, or stop publishing the name on port %d", n.nameKey, ap, stall, ap.Port())
			})
		}
	}
	e.stalls = stalls{}
}

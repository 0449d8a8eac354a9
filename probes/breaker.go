package probes

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/certwatch/certwatch/discovery"
)

// DefaultBreakAfter is the number of consecutive timed-out endpoints on one
// address after which a Sweep gives up on the address.
const DefaultBreakAfter = 3

// Sweep is one pass of a Prober over many targets (one scan, one daemon
// probe run). Its probes share the Prober's connection limits with every
// other caller, and within the sweep a per-address circuit breaker: once
// BreakAfter endpoints in a row on one IP address have timed out, the
// sweep's remaining probes of that address fail fast as FailTimeout
// without connecting. A hung load balancer with 200 names behind it then
// costs a few endpoints' timeouts instead of 200, and gets less traffic
// from certwatch, not more. Any answer from the address (a handshake, a
// refusal, an alert, a reset) resets its count; an open breaker stays open
// for the rest of the sweep, and the next sweep starts closed.
//
// A Sweep is safe for concurrent use. It holds only the addresses whose
// last endpoints timed out; drop it when the pass is over.
type Sweep struct {
	p *Prober
	b *breaker
}

// Sweep starts a sweep of p. It starts nothing and dials nothing.
func (p *Prober) Sweep() *Sweep {
	return &Sweep{p: p, b: &breaker{after: p.breakAfter, streak: make(map[netip.Addr]int)}}
}

// Probe is Prober.Probe within the sweep: it probes every address of t,
// failing fast on the addresses the sweep has given up on, and counts the
// outcome towards each address's breaker.
func (s *Sweep) Probe(ctx context.Context, t discovery.Target) []Observation {
	return s.p.probe(ctx, t, s.b)
}

// PerAddress returns the most connections the Prober has in flight to one
// IP address. A scheduler that keeps at most this many targets of one
// address in flight never has a worker wait on the address's limit.
func (s *Sweep) PerAddress() int { return s.p.perAddr.limit }

// breaker counts the consecutive timed-out endpoints of each address in
// one sweep. A nil *breaker never opens (Prober.Probe outside a sweep).
type breaker struct {
	after int // <= 0: never open

	// mu guards streak.
	mu sync.Mutex
	// streak holds the consecutive timed-out endpoints of each address
	// whose last outcome was a timeout; other addresses are absent.
	streak map[netip.Addr]int
}

// open returns the failure of an attempt the breaker refuses to make
// because a has been given up on, or ok false when a may be tried.
func (b *breaker) open(ap netip.AddrPort) (res attemptResult, ok bool) {
	if b == nil || b.after <= 0 {
		return attemptResult{}, false
	}
	b.mu.Lock()
	n := b.streak[ap.Addr()]
	b.mu.Unlock()
	if n < b.after {
		return attemptResult{}, false
	}
	return attemptResult{
		err: &probeError{op: "connect to", target: ap.String(),
			err:  fmt.Errorf("not attempted: address %s given up on after %d consecutive timeouts in this sweep", ap.Addr(), n),
			hint: "it accepts no connections or never answers; its other endpoints fail fast until the next sweep"},
		failure: FailTimeout,
		givenUp: true,
	}, true
}

// record counts o, the finished probe of one address, towards the
// address's breaker. A probe that made no connection (a fail-fast, a
// failed lookup, a cut-short sweep) tells nothing about the address and is
// not counted.
func (b *breaker) record(o *Observation) {
	if b == nil || b.after <= 0 || o.Attempts == 0 || o.Failure == FailNotProbed {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if o.Failure == FailTimeout {
		b.streak[o.Address]++
		return
	}
	delete(b.streak, o.Address) // the address answered
}

package scan

import (
	"context"
	"net/netip"
	"sync"

	"github.com/certwatch/certwatch/discovery"
)

// schedule hands the targets of one pass to its workers so that no IP
// address has more than perAddr targets in flight: the prober would make
// any more wait for the address's connection limit, and a hung address
// early in zone order would then hold every worker while the healthy
// names after it were never reached. A target whose address is saturated
// is deferred, and the worker takes the next one; a deferred target goes
// out once its address has room. Deferred targets are bounded (see
// maxDeferred), so a streamed zone is never held whole: when the bound is
// reached, workers wait for an address to free up instead of reading
// further.
//
// Targets without addresses are resolved by the prober and handed out in
// turn, unscheduled. The order targets go out in does not matter to the
// report, which the evaluation sorts.
type schedule struct {
	// pull returns the next target of the pass, or false when there is
	// none left; called with mu held.
	pull func() (*discovery.Target, bool)
	// perAddr is the most targets of one address in flight; 0 schedules
	// nothing (every target goes out in turn).
	perAddr     int
	maxDeferred int

	// mu guards the fields below; cond waits on it for room.
	mu       sync.Mutex
	cond     sync.Cond
	inFlight map[netip.Addr]int
	// deferred holds the deferred targets by the address that was
	// saturated, first deferred first.
	deferred  map[netip.Addr][]*discovery.Target
	nDeferred int
	drained   bool // pull returned false
	stopped   bool // the pass's context ended
}

// deferPerWorker bounds the deferred targets of a pass: this many per
// worker (1600 with the default 100 workers) keeps a few hung addresses
// from stalling the rest of a zone while holding little of it.
const deferPerWorker = 16

func newSchedule(perAddr, workers int, pull func() (*discovery.Target, bool)) *schedule {
	s := &schedule{pull: pull, perAddr: perAddr, maxDeferred: max(deferPerWorker*workers, 1),
		inFlight: make(map[netip.Addr]int), deferred: make(map[netip.Addr][]*discovery.Target)}
	s.cond.L = &s.mu
	return s
}

// stopOn makes next return false once ctx is done, waking waiting
// workers. Call the returned function when the pass is over.
func (s *schedule) stopOn(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stopped = true
		s.cond.Broadcast()
	})
}

// next returns the next target to probe, waiting while every target that
// could go out is on a saturated address. It returns false when every
// target has gone out, or the pass's context has ended. The caller calls
// done with the target once its probe is over.
func (s *schedule) next() (*discovery.Target, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.stopped {
		if t, ok := s.takeDeferred(); ok {
			return t, true
		}
		if !s.drained && s.nDeferred < s.maxDeferred {
			t, ok := s.pull()
			if !ok {
				s.drained = true
				continue
			}
			if a, busy := s.busy(t); busy {
				s.deferTarget(a, t)
				continue
			}
			s.take(t)
			return t, true
		}
		if s.drained && s.nDeferred == 0 {
			return nil, false
		}
		s.cond.Wait() // for done to make room, or for the end of the pass
	}
	return nil, false
}

// takeDeferred returns a deferred target whose addresses all have room.
// Only saturated addresses have deferred targets, so there are few to
// look at.
func (s *schedule) takeDeferred() (*discovery.Target, bool) {
	for a, q := range s.deferred {
		if s.inFlight[a] >= s.perAddr {
			continue
		}
		t := q[0]
		q[0] = nil
		if len(q) == 1 {
			delete(s.deferred, a)
		} else {
			s.deferred[a] = q[1:]
		}
		s.nDeferred--
		if b, busy := s.busy(t); busy { // saturated on another of its addresses
			s.deferTarget(b, t)
			continue
		}
		s.take(t)
		return t, true
	}
	return nil, false
}

// busy returns an address of t that has perAddr targets in flight.
func (s *schedule) busy(t *discovery.Target) (netip.Addr, bool) {
	if s.perAddr <= 0 {
		return netip.Addr{}, false
	}
	for _, a := range t.Addresses {
		if s.inFlight[a] >= s.perAddr {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (s *schedule) deferTarget(a netip.Addr, t *discovery.Target) {
	s.deferred[a] = append(s.deferred[a], t)
	s.nDeferred++
}

func (s *schedule) take(t *discovery.Target) {
	if s.perAddr <= 0 {
		return
	}
	for _, a := range t.Addresses {
		s.inFlight[a]++
	}
}

// done frees t's addresses, handed out by next.
func (s *schedule) done(t *discovery.Target) {
	if s.perAddr <= 0 || len(t.Addresses) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range t.Addresses {
		if s.inFlight[a]--; s.inFlight[a] <= 0 {
			delete(s.inFlight, a)
		}
	}
	s.cond.Broadcast()
}

// rest yields every target next did not hand out: the deferred ones, then
// those never pulled. Call it after the workers are done.
func (s *schedule) rest(yield func(*discovery.Target)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, q := range s.deferred {
		for _, t := range q {
			yield(t)
		}
		delete(s.deferred, a)
	}
	s.nDeferred = 0
	for !s.drained {
		t, ok := s.pull()
		if !ok {
			s.drained = true
			break
		}
		yield(t)
	}
}

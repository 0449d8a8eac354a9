package probes

import (
	"context"
	"net/netip"
	"sync"
)

// addrLimiter bounds the connections in flight to each IP address. Slots
// exist only while someone holds or waits for them, so its size follows
// the probes in flight, not the number of addresses ever seen.
type addrLimiter struct {
	limit int

	// mu guards slots.
	mu    sync.Mutex
	slots map[netip.Addr]*addrSlot
}

type addrSlot struct {
	refs int           // holders and waiters; guarded by addrLimiter.mu
	sem  chan struct{} // one token per connection in flight
}

func newAddrLimiter(limit int) *addrLimiter {
	return &addrLimiter{limit: limit, slots: make(map[netip.Addr]*addrSlot)}
}

// acquire waits for a slot for addr and returns the function that frees
// it, or ctx's error.
func (l *addrLimiter) acquire(ctx context.Context, addr netip.Addr) (release func(), err error) {
	l.mu.Lock()
	s := l.slots[addr]
	if s == nil {
		s = &addrSlot{sem: make(chan struct{}, l.limit)}
		l.slots[addr] = s
	}
	s.refs++
	l.mu.Unlock()

	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem; l.unref(addr, s) }, nil
	case <-ctx.Done():
		l.unref(addr, s)
		return nil, ctx.Err()
	}
}

func (l *addrLimiter) unref(addr netip.Addr, s *addrSlot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.refs--
	if s.refs == 0 {
		delete(l.slots, addr)
	}
}

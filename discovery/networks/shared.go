package networks

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"
)

// SlotReserver keeps a network's token bucket where every replica sharing
// a state store sees it, so that the network's rate is the fleet's:
// state.Rates, implemented by *postgres.Store.
type SlotReserver interface {
	// ReserveSlots reserves n connection slots of key's bucket (rate a
	// second, burst at once) and returns when each starts, by this
	// process's clock, in order.
	ReserveSlots(ctx context.Context, key string, rate float64, burst, n int) ([]time.Time, error)
}

// Bounds of a shared rate.
const (
	// SharedBatch is how much of the rate one reservation takes at most:
	// a replica reserves slots for the connections waiting for one, up to
	// a quarter of a second's worth, in one round trip.
	SharedBatch = 250 * time.Millisecond
	// SharedRetry is how long a replica whose reservation failed paces
	// with its own bucket before it asks the store again.
	SharedRetry = 10 * time.Second
	// sharedReserveTimeout bounds one reservation.
	sharedReserveTimeout = 5 * time.Second
)

// ShareRate makes the network's rate the fleet's: every connection to the
// network (the sweep's and, through Throttle, the prober's) waits for a
// slot of the network's bucket in r, which all replicas sharing r draw
// from, instead of for this process's bucket, so that N replicas together
// still connect at most Rate times a second (with Burst at once). While r
// cannot be reached, the replica paces with its own bucket (the network's
// whole rate, as a single process does) and says so, and asks r again
// after SharedRetry. Call it before the Source is first used.
func (s *Source) ShareRate(r SlotReserver) {
	lim := float64(s.lim.Limit())
	interval := time.Duration(math.Ceil(float64(time.Second) / lim))
	s.shared = &sharedBucket{
		reserver: r,
		key:      s.name,
		rate:     lim,
		burst:    s.lim.Burst(),
		batch:    max(1, int(lim*SharedBatch.Seconds())),
		stale:    min(interval, 100*time.Millisecond),
		logger:   s.logger,
	}
}

// sharedBucket hands out the slots one process reserves of a network's
// shared bucket, reserving them in batches for the connections waiting:
// one reservation at a time per network, for as many connections as wait
// then (at most batch), so a slot is reserved only for a connection that
// wants it.
type sharedBucket struct {
	reserver SlotReserver
	key      string
	rate     float64
	burst    int
	batch    int
	// stale: a slot reserved but not handed out within this of its start
	// (its connection gave up) is dropped, never used late, since slots
	// used late could bunch above the rate.
	stale  time.Duration
	logger *slog.Logger

	mu sync.Mutex // guards the fields below
	// slots are reserved and not handed out yet, in order.
	slots []time.Time
	// waiting counts the callers of take without a slot yet.
	waiting int
	// reserving is closed when the reservation in flight ends; nil when
	// none is.
	reserving chan struct{}
	// localUntil: until then, the store having failed, callers pace with
	// the process's own bucket.
	localUntil time.Time
}

// wait waits for the next slot of the network's shared bucket, or, while
// the store cannot be reached, for a token of local; it fails only with
// ctx's error.
func (b *sharedBucket) wait(ctx context.Context, local func(context.Context) error) error {
	slot, ok, err := b.take(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return local(ctx)
	}
	d := time.Until(slot)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// take returns the next slot reserved for this process, reserving a batch
// when none is left; ok is false when the store cannot be reached and the
// caller is to use its own bucket.
func (b *sharedBucket) take(ctx context.Context) (slot time.Time, ok bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting++
	defer func() { b.waiting-- }()
	for {
		now := time.Now()
		for len(b.slots) > 0 && b.slots[0].Before(now.Add(-b.stale)) {
			b.slots = b.slots[1:]
		}
		switch {
		case len(b.slots) > 0:
			slot, b.slots = b.slots[0], b.slots[1:]
			return slot, true, nil
		case now.Before(b.localUntil):
			return time.Time{}, false, nil
		case b.reserving == nil:
			b.reserve(ctx)
			if ctx.Err() != nil {
				return time.Time{}, false, ctx.Err()
			}
			continue
		}
		done := b.reserving
		b.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
		}
		b.mu.Lock()
		if ctx.Err() != nil {
			return time.Time{}, false, ctx.Err()
		}
	}
}

// reserve reserves slots for the callers waiting, with b.mu held on entry
// and on return (not during the round trip).
func (b *sharedBucket) reserve(ctx context.Context) {
	done := make(chan struct{})
	b.reserving = done
	n := min(b.waiting, b.batch)
	b.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, sharedReserveTimeout)
	slots, err := b.reserver.ReserveSlots(rctx, b.key, b.rate, b.burst, n)
	cancel()
	b.mu.Lock()
	b.reserving = nil
	close(done)
	switch {
	case err == nil:
		if !b.localUntil.IsZero() {
			b.logger.Info("the network's rate is shared by the replicas again")
			b.localUntil = time.Time{}
		}
		b.slots = append(b.slots, slots...)
	case ctx.Err() == nil:
		b.logger.Warn("cannot reserve connections of the network's shared rate: pacing with this replica's own bucket (the whole rate) until the state store answers again",
			"retry_in", SharedRetry.String(), "err", err)
		b.localUntil = time.Now().Add(SharedRetry)
	}
}

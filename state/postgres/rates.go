package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Fleet-wide rates. A network's rate (networks[].rate) holds for every
// replica together: each replica reserves connection slots of the
// network's bucket here, in batches, and waits for each slot before it
// connects. The bucket is a generic cell rate algorithm (GCRA, ITU-T
// I.371): one row per key holds tat, the theoretical arrival time of the
// next slot; reserving n slots moves it n emission intervals (1/rate) on
// from itself or from now, whichever is later, and slot i of the batch is
// at tat + i/rate - (burst-1)/rate, or now if that is earlier. Whatever
// order the replicas' reservations commit in, every slot handed out lies
// within (burst-1)/rate before its own tat and the tats are 1/rate apart,
// so over any span d no more than burst + rate×d slots start. One
// statement, one round trip, per batch: the UPDATE's row lock orders
// concurrent reservations, and there is no transaction to hold.
//
// Slots are the database's times (clock_timestamp()), read as this
// process's clock: every replica keeps to one schedule, however long its
// round trip took (slots once taken as offsets from the moment each
// answer arrived moved later by each replica's own round trip, so that
// two replicas' slots could bunch beyond the rate on a loaded host). The
// replicas' clocks are taken to agree with the database's, as NTP keeps
// them; a replica whose clock runs ahead by d connects d early.

// ReserveSlots reserves n slots of key's bucket, which refills rate a
// second and holds burst, and returns when each starts, by this process's
// clock, in order. It is not fenced: standbys connect too.
func (s *Store) ReserveSlots(ctx context.Context, key string, rate float64, burst, n int) ([]time.Time, error) {
	if rate <= 0 || math.IsInf(rate, 0) || math.IsNaN(rate) || burst < 1 || n < 1 {
		return nil, fmt.Errorf("reserve %d connection slot(s) of %s: rate %v and burst %d must be positive", n, key, rate, burst)
	}
	if n > 1<<20 {
		return nil, errors.New("reserve connection slots: at most 1048576 at once")
	}
	// The emission interval is rounded up to the microsecond the database
	// keeps, so the rate is never exceeded by rounding.
	interval := int64(math.Ceil(1e6 / rate))
	ctx, cancel := s.op(ctx)
	defer cancel()
	// clock_timestamp(): the time of the update itself, not of the
	// transaction's start, which may have waited for the row's lock.
	var tat int64 // the new tat, in microseconds since the epoch
	err := s.pool.QueryRow(ctx, `INSERT INTO rate_buckets AS b (key, tat) VALUES ($1, clock_timestamp() + $2 * interval '1 microsecond')
ON CONFLICT (key) DO UPDATE SET tat = GREATEST(b.tat, clock_timestamp()) + $2 * interval '1 microsecond'
RETURNING (EXTRACT(EPOCH FROM b.tat) * 1000000)::bigint`, key, int64(n)*interval).Scan(&tat)
	if err != nil {
		return nil, s.wrap(ctx, fmt.Sprintf("reserve %d connection slot(s) of %s", n, key), err)
	}
	s.note(nil)
	tolerance := int64(burst-1) * interval
	base := tat - int64(n)*interval // the tat of the batch's first slot
	slots := make([]time.Time, n)
	for i := range slots {
		slots[i] = time.UnixMicro(base + int64(i)*interval - tolerance)
	}
	return slots, nil
}

package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/state/postgres"
)

// TestReserveSlotsFleetWide: three stores (three replicas' worth), two
// goroutines each, reserve slots of one network's bucket (rate 50, burst
// 3) concurrently, two at a time. All the slots together keep the rate:
// in any half second no more than burst + rate × 0.5s = 28 start (plus 1
// for the round trip by which a slot may be handed out late), and the 96
// slots span at least (96 - burst - 1) / rate (one slot less for the
// round trip). Another network's bucket is
// its own: its first slot is not delayed by the first network's.
func TestReserveSlotsFleetWide(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	const (
		rate, burst = 50.0, 3
		window      = 500 * time.Millisecond
		allowed     = burst + int(rate*0.5) + 1
	)
	var (
		mu    sync.Mutex
		slots []time.Time
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range 3 {
		s := open(t, url, postgres.Options{})
		for range 2 {
			wg.Go(func() {
				for range 8 {
					got, err := s.ReserveSlots(ctx, "networks:lab", rate, burst, 2)
					if err != nil {
						t.Errorf("ReserveSlots: %v", err)
						return
					}
					if len(got) != 2 || got[1].Before(got[0]) {
						t.Errorf("ReserveSlots(2) = %v; want two slots in order", got)
					}
					mu.Lock()
					slots = append(slots, got...)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	slices.SortFunc(slots, time.Time.Compare)
	if len(slots) != 96 {
		t.Fatalf("%d slots reserved, want 96", len(slots))
	}
	most := 0
	for i := range slots {
		n := 0
		for _, s := range slots[i:] {
			if s.Sub(slots[i]) >= window {
				break
			}
			n++
		}
		most = max(most, n)
	}
	span := slots[len(slots)-1].Sub(slots[0])
	least := time.Duration(float64(len(slots)-burst-1) / rate * float64(time.Second))
	t.Logf("96 slots over %v (from %v after the start), at most %d in %v", span.Round(time.Millisecond), slots[0].Sub(start).Round(time.Millisecond), most, window)
	if most > allowed {
		t.Errorf("%d slots start within %v, want at most %d (rate %g/s, burst %d, for every store together)", most, window, allowed, rate, burst)
	}
	if span < least {
		t.Errorf("96 slots span %v, want at least %v at %g a second", span, least, rate)
	}

	s := open(t, url, postgres.Options{})
	other, err := s.ReserveSlots(ctx, "networks:other", rate, burst, 1)
	if err != nil || len(other) != 1 || time.Until(other[0]) > 0 {
		t.Errorf("another network's first slot = %v, %v; want one, now", other, err)
	}
	if _, err := s.ReserveSlots(ctx, "networks:lab", 0, burst, 1); err == nil {
		t.Error("ReserveSlots at rate 0 succeeded, want an error")
	}
}

package probes

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff spaces the retries of one address: exponential growth from
// Initial, capped at Max, with full jitter (each delay is drawn uniformly
// from zero to the current cap), so that probes retrying a struggling
// fleet spread out instead of arriving together.
type Backoff struct {
	// Initial is the cap of the first retry's delay (default 200ms). A
	// negative Initial retries immediately, for tests.
	Initial time.Duration
	// Max caps every delay (default 2s).
	Max time.Duration
}

// Defaults for a zero Backoff.
const (
	DefaultBackoffInitial = 200 * time.Millisecond
	DefaultBackoffMax     = 2 * time.Second
)

// Delay returns the jittered delay before retry number retry (1 for the
// first retry).
func (b Backoff) Delay(retry int) time.Duration {
	if b.Initial < 0 {
		return 0
	}
	initial := orDefault(b.Initial, DefaultBackoffInitial)
	maxDelay := orDefault(b.Max, DefaultBackoffMax)
	ceiling := initial
	for i := 1; i < retry && ceiling < maxDelay; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, maxDelay)
	return rand.N(ceiling + 1)
}

// wait sleeps for the delay before retry number retry, or until ctx is
// done, whose error it then returns.
func (b Backoff) wait(ctx context.Context, retry int) error {
	d := b.Delay(retry)
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

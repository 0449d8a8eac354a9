package networks_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/networks"
)

// deadStore is a state store that cannot be reached.
type deadStore struct {
	mu    sync.Mutex
	calls int
}

func (d *deadStore) ReserveSlots(context.Context, string, float64, int, int) ([]time.Time, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	return nil, errors.New("dial tcp 127.0.0.1:5432: connection refused")
}

// TestShareRateStoreDown: while the state store cannot be reached, a
// network whose rate is shared still paces its connections, with the
// replica's own bucket (rate 20, burst 1: 6 connections take at least
// 250ms), says so once, and does not ask the dead store before every
// connection.
func TestShareRateStoreDown(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s, err := networks.New(networks.Config{
		Name: "lab", Prefixes: []netip.Prefix{netip.MustParsePrefix("127.46.0.0/29")},
		Ports: []networks.Port{{Number: 443}}, Rate: 20, Burst: 1,
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	store := &deadStore{}
	s.ShareRate(store)
	start := time.Now()
	for range 6 {
		if err := s.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 225*time.Millisecond {
		t.Errorf("6 connections at rate 20 with burst 1 took %v, want at least 250ms", took)
	}
	if store.calls != 1 {
		t.Errorf("the dead store was asked %d times, want once until networks.SharedRetry is over", store.calls)
	}
	if n := strings.Count(logs.String(), "pacing with this replica's own bucket"); n != 1 {
		t.Errorf("the fallback was logged %d times, want once:\n%s", n, logs.String())
	}
}

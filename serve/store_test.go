package serve_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

// countingStore counts the reads /metrics, /readyz and the status page
// make of a state store; State answers with health, and the first reads
// wait for hold to close when it is set.
type countingStore struct {
	checks, stats atomic.Int64
	hold          chan struct{}

	mu     sync.Mutex
	health error
}

func (c *countingStore) Check(ctx context.Context) error {
	c.checks.Add(1)
	if c.hold != nil {
		select {
		case <-c.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health
}

func (c *countingStore) OutboxStats(context.Context) ([]state.ChannelStats, error) {
	c.stats.Add(1)
	return []state.ChannelStats{{Channel: "certs", Pending: 2}}, nil
}

func (c *countingStore) die(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.health = err
}

// TestStoreReadOncePerTTL: a scrape loop aimed at the port (here 300
// requests back to back over HTTP to /metrics, /readyz and the page)
// reads the state store once per StoreTTL, not once a request: each read
// of a PostgreSQL state is a query on a server the replicas share.
func TestStoreReadOncePerTTL(t *testing.T) {
	t.Parallel()
	store := &countingStore{}
	_, base := newServer(t, serve.Options{State: store.Check, Outbox: store, StoreTTL: time.Hour})
	for i := range 300 {
		path := []string{"/metrics", "/readyz", "/"}[i%3]
		if code, _, body := get(t, base+path); code != http.StatusOK {
			t.Fatalf("GET %s = %d: %s", path, code, body)
		}
	}
	if c, s := store.checks.Load(), store.stats.Load(); c != 1 || s != 1 {
		t.Errorf("300 requests made %d health checks and %d outbox reads of the store, want 1 and 1", c, s)
	}
}

// TestStoreSnapshot, on a fake clock: requests arriving together while the
// store is slow share its one read; a store that dies shows on /readyz
// and /metrics once the snapshot is StoreTTL old, and not a read later.
func TestStoreSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 5 * time.Second
		store := &countingStore{hold: make(chan struct{})}
		h := serve.New(serve.Options{State: store.Check, Outbox: store, StoreTTL: ttl}).Handler()
		get := func(path string) (int, string) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			return rec.Code, rec.Body.String()
		}

		var wg sync.WaitGroup
		for i := range 60 {
			wg.Go(func() { get([]string{"/metrics", "/readyz", "/"}[i%3]) })
		}
		synctest.Wait() // every request is waiting for the one read
		close(store.hold)
		wg.Wait()
		if c, s := store.checks.Load(), store.stats.Load(); c != 1 || s != 1 {
			t.Fatalf("60 requests at once made %d health checks and %d outbox reads, want 1 and 1", c, s)
		}

		store.die(errors.New("check state postgres://db/certwatch: connection refused"))
		time.Sleep(ttl - time.Millisecond)
		if code, _ := get("/readyz"); code != http.StatusOK || store.checks.Load() != 1 {
			t.Errorf("GET /readyz inside the TTL = %d after %d checks, want 200 from the snapshot, no new check", code, store.checks.Load())
		}
		time.Sleep(time.Millisecond)
		if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "state: check state postgres://db/certwatch: connection refused") {
			t.Errorf("GET /readyz once the snapshot is %v old = %d %q, want 503 naming the store", ttl, code, body)
		}
		if _, body := get("/metrics"); !strings.Contains(body, "\ncertwatch_state_up 0\n") {
			t.Errorf("/metrics after the store died lacks certwatch_state_up 0:\n%s", grepLines(body, "certwatch_state_up"))
		}
		if c := store.checks.Load(); c != 2 {
			t.Errorf("%d health checks, want 2 (one per TTL)", c)
		}
	})
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

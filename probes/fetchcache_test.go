package probes

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestFetchCacheBudget: values beyond the byte budget push out the older
// ones, expired first; a value larger than the whole budget is kept alone.
func TestFetchCacheBudget(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	fc := newFetchCache(10, 100, func(s string) int64 { return int64(len(s)) })
	fetches := 0
	get := func(key string, n int, ttl time.Duration) {
		t.Helper()
		v, err := fc.get(t.Context(), key, clock, func(context.Context) (string, time.Time, error) {
			fetches++
			return strings.Repeat("x", n), now.Add(ttl), nil
		})
		if err != nil || len(v) != n {
			t.Fatalf("get(%s) = %d bytes, %v", key, len(v), err)
		}
	}
	cached := func(key string) bool { _, ok, _ := fc.peek(key, now); return ok }

	get("a", 40, time.Hour)
	get("b", 40, time.Minute)
	get("a", 40, time.Hour) // cached
	if fetches != 2 || !cached("a") || !cached("b") {
		t.Fatalf("fetches %d, cached a %v b %v; want 2, both cached", fetches, cached("a"), cached("b"))
	}
	now = now.Add(2 * time.Minute) // b expires
	get("c", 40, time.Hour)
	if !cached("a") || cached("b") || !cached("c") || fc.used != 80 {
		t.Errorf("after c: cached a %v b %v c %v, %d bytes used; want a and c, 80", cached("a"), cached("b"), cached("c"), fc.used)
	}
	get("d", 40, time.Hour) // over budget: one of a and c goes
	if n := len(fc.entries); n != 2 || fc.used != 80 || !cached("d") {
		t.Errorf("after d: %d entries, %d bytes, d cached %v; want 2, 80, true", n, fc.used, cached("d"))
	}
	get("huge", 500, time.Hour)
	if n := len(fc.entries); n != 1 || !cached("huge") {
		t.Errorf("after huge: %d entries, huge cached %v; want it alone", n, cached("huge"))
	}
}

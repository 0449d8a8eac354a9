package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
)

// TestInventoryIsWrittenIncrementally: a run writes the certificates that
// are new or changed; one seen again unchanged keeps its stored LastSeen
// until it is CertificateRefresh old, and a restarted process writes every
// certificate once.
func TestInventoryIsWrittenIncrementally(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, baseConfig(t.TempDir()), newClock(t0))
	a := cert{subject: "a.example.com", notAfter: t0.Add(400 * day), eps: eps("a.example.com")}
	b := cert{subject: "b.example.com", notAfter: t0.Add(400 * day), eps: eps("b.example.com")}
	stored := func(c cert) (time.Time, []policy.Endpoint) {
		t.Helper()
		got, ok, err := h.store.Certificate(ctx, c.sha())
		if err != nil || !ok {
			t.Fatalf("Certificate(%s) = %v, %v", c.subject, ok, err)
		}
		return got.LastSeen, got.Endpoints
	}
	check := func(when string, c cert, wantSeen time.Time, wantEndpoints int) {
		t.Helper()
		seen, eps := stored(c)
		if !seen.Equal(wantSeen) || len(eps) != wantEndpoints {
			t.Errorf("%s: %s stored last seen %v with %d endpoints, want %v with %d", when, c.subject, seen, len(eps), wantSeen, wantEndpoints)
		}
	}

	h.run(t0, sweep(t0, a, b))
	check("first run", a, t0, 1)
	check("first run", b, t0, 1)

	// Ten minutes later b is also served elsewhere: only b is written.
	b.eps = append(b.eps, policy.Endpoint{Name: "b2.example.com", Port: 443, Address: "10.0.1.1"})
	at := t0.Add(10 * time.Minute)
	h.run(at, sweep(at, a, b))
	check("unchanged, 10m later", a, t0, 1)
	check("served at a second endpoint", b, at, 2)

	// Past CertificateRefresh, the unchanged certificate's sighting is
	// rewritten.
	at = t0.Add(notify.CertificateRefresh)
	h.run(at, sweep(at, a, b))
	check("unchanged, an hour later", a, at, 1)

	// A restarted process knows nothing of what was written: every
	// certificate once.
	h.restart()
	at = at.Add(time.Minute)
	h.run(at, sweep(at, a, b))
	check("after a restart", a, at, 1)
	check("after a restart", b, at, 2)
}

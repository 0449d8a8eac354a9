package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/pgtest"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
)

func campaign(t *testing.T, s *postgres.Store, holder string, lease time.Duration) state.Term {
	t.Helper()
	term, err := s.Campaign(context.Background(), holder, lease)
	if err != nil {
		t.Fatalf("Campaign(%s): %v", holder, err)
	}
	return term
}

func memo(s *postgres.Store, v string) error {
	return s.SetMemo(context.Background(), "k", []byte(v))
}

// TestLeadership: one leader at a time; a standby takes over once the
// leader's lease ends, with a newer epoch; the old leader's writes are
// refused from then on, and it cannot take the lead back while the new
// one renews.
func TestLeadership(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	url := srv.CreateDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	const lease = 2 * time.Second

	// Before any campaign a store writes as a single instance does.
	if err := memo(a, "single"); err != nil {
		t.Fatalf("write before campaigning: %v", err)
	}

	ta := campaign(t, a, "a", lease)
	if !ta.Leader || ta.Epoch != 1 || ta.Holder != "a" {
		t.Fatalf("first campaign = %+v, want a leading epoch 1", ta)
	}
	tb := campaign(t, b, "b", lease)
	if tb.Leader || tb.Holder != "a" || tb.Epoch != 1 || tb.Until.Before(time.Now()) {
		t.Fatalf("standby's campaign = %+v, want a leading epoch 1 for a while yet", tb)
	}
	if err := memo(a, "a1"); err != nil {
		t.Fatalf("leader's write: %v", err)
	}
	if err := memo(b, "b1"); !errors.Is(err, state.ErrFenced) {
		t.Fatalf("standby's write = %v, want ErrFenced", err)
	}
	if _, err := b.Fenced(); !errors.Is(err, state.ErrFenced) {
		t.Errorf("standby's Fenced() = %v, want ErrFenced", err)
	}
	// Renewing keeps the epoch.
	if ta = campaign(t, a, "a", lease); !ta.Leader || ta.Epoch != 1 {
		t.Fatalf("renewal = %+v, want epoch 1 kept", ta)
	}

	// a stops renewing (paused); once its lease is over b takes over.
	<-time.After(time.Until(ta.Until))
	if _, err := a.Fenced(); !errors.Is(err, state.ErrFenced) {
		t.Errorf("Fenced() of a leader whose lease ran out = %v, want ErrFenced", err)
	}
	if err := memo(a, "a-late"); !errors.Is(err, state.ErrFenced) {
		t.Errorf("write of a leader whose lease ran out = %v, want ErrFenced", err)
	}
	// The database's lease ends a round trip after a's own deadline.
	for tb = campaign(t, b, "b", lease); !tb.Leader; tb = campaign(t, b, "b", lease) {
		if tb.Holder != "a" || time.Since(ta.Until) > 10*time.Second {
			t.Fatalf("standby's campaign = %+v, want a's lease to end within 10s of a's own deadline", tb)
		}
		<-time.After(time.Until(tb.Until))
	}
	if tb.Epoch != 2 {
		t.Fatalf("takeover = %+v, want b leading epoch 2", tb)
	}
	if err := memo(b, "b2"); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	// a wakes up: its campaign finds b, its writes are refused.
	if ta = campaign(t, a, "a", lease); ta.Leader || ta.Holder != "b" || ta.Epoch != 2 {
		t.Fatalf("old leader's campaign = %+v, want b leading epoch 2", ta)
	}
	if err := memo(a, "a-after"); !errors.Is(err, state.ErrFenced) {
		t.Errorf("old leader's write after the takeover = %v, want ErrFenced", err)
	}
	v, err := b.Memo(context.Background(), "k")
	if err != nil || string(v) != "b2" {
		t.Errorf("memo = %q, %v; want the new leader's b2", v, err)
	}

	// Resigning hands over at once, with a new epoch.
	if err := b.Resign(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	if err := memo(b, "b-resigned"); !errors.Is(err, state.ErrFenced) {
		t.Errorf("write after resigning = %v, want ErrFenced", err)
	}
	if ta = campaign(t, a, "a", lease); !ta.Leader || ta.Epoch != 3 {
		t.Fatalf("campaign after the leader resigned = %+v, want a leading epoch 3", ta)
	}
}

// TestFenceWaitsForTakeover: an old leader whose write passed the fence
// before the takeover commits it; one that comes after the takeover is
// refused, even though its own clock still says it leads (it cannot know
// of the takeover without the database).
func TestFenceRefusesAfterTakeover(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	url := srv.CreateDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	ctx := context.Background()
	if ta := campaign(t, a, "a", time.Hour); !ta.Leader {
		t.Fatal("a does not lead")
	}
	// An operator ends a's lease by hand, as a partition would by time.
	exec(t, url, `UPDATE leader SET expires_at = clock_timestamp()`)
	if tb := campaign(t, b, "b", time.Hour); !tb.Leader || tb.Epoch != 2 {
		t.Fatalf("takeover = %+v, want epoch 2", tb)
	}
	if _, err := a.Fenced(); err != nil {
		t.Fatalf("a's local view = %v, want still leading (its lease has an hour)", err)
	}
	err := a.Update(ctx, func(state.Snapshot) (state.Changes, error) {
		return state.Changes{Outbox: []state.Outbound{{Channel: "c", Event: "new", Payload: []byte("{}"), Created: time.Now()}}}, nil
	})
	if !errors.Is(err, state.ErrFenced) {
		t.Fatalf("old leader's update = %v, want ErrFenced", err)
	}
	if _, err := a.Fenced(); !errors.Is(err, state.ErrFenced) {
		t.Errorf("a's local view after a refused write = %v, want ErrFenced", err)
	}
	if _, _, err := a.Lease(ctx, "c", "a", time.Now(), time.Now().Add(time.Minute)); !errors.Is(err, state.ErrFenced) {
		t.Errorf("old leader's delivery lease = %v, want ErrFenced", err)
	}
	if p, err := b.Pending(ctx, "c", 10); err != nil || len(p) != 0 {
		t.Errorf("outbox = %v, %v; want nothing written by the old leader", p, err)
	}
}

// TestNewLeaderTakesDeliveryLeases: the delivery lease of a channel held
// by a leader that was replaced passes to the new leader at once, while a
// lease held by a process that is no replica is waited for.
func TestNewLeaderTakesDeliveryLeases(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	url := srv.CreateDatabase(t)
	a, b, other := open(t, url, postgres.Options{}), open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	ctx := context.Background()
	now := time.Now()
	campaign(t, a, "a", time.Hour)
	if held, _, err := a.Lease(ctx, "certs", "notify-a", now, now.Add(time.Hour)); err != nil || !held {
		t.Fatalf("leader's delivery lease = %v, %v", held, err)
	}
	exec(t, url, `UPDATE leader SET expires_at = clock_timestamp()`)
	if tb := campaign(t, b, "b", time.Hour); !tb.Leader {
		t.Fatal("b does not lead")
	}
	if held, _, err := b.Lease(ctx, "certs", "notify-b", now, now.Add(time.Hour)); err != nil || !held {
		t.Errorf("new leader's delivery lease = %v, %v; want taken from the replaced leader", held, err)
	}
	// A process that is no replica (scan --notify) holds "oncall".
	if held, _, err := other.Lease(ctx, "oncall", "scan", now, now.Add(time.Hour)); err != nil || !held {
		t.Fatalf("non-replica's lease = %v, %v", held, err)
	}
	if held, until, err := b.Lease(ctx, "oncall", "notify-b", now, now.Add(time.Hour)); err != nil || held || until.IsZero() {
		t.Errorf("leader's lease of a channel a non-replica delivers = %v, %v, %v; want to wait for it", held, until, err)
	}
}

// TestPausedInTransactionDoesNotStallTakeover: a leader paused in the
// middle of a write holds the leader row's lock; the server ends its
// session after IdleInTransaction, so a standby still takes over, and the
// paused write never commits.
func TestPausedInTransactionDoesNotStallTakeover(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	url := srv.CreateDatabase(t)
	opts := postgres.Options{IdleInTransaction: 300 * time.Millisecond}
	a, b := open(t, url, opts), open(t, url, opts)
	ctx := context.Background()
	const lease = time.Second
	if ta := campaign(t, a, "a", lease); !ta.Leader {
		t.Fatal("a does not lead")
	}
	inside, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Update(ctx, func(state.Snapshot) (state.Changes, error) {
			close(inside)
			<-resume // paused inside the transaction, holding its locks
			return state.Changes{Outbox: []state.Outbound{{Channel: "c", Event: "new", Payload: []byte("{}"), Created: time.Now()}}}, nil
		})
	}()
	<-inside
	start := time.Now()
	var tb state.Term
	var err error
	for tb, err = b.Campaign(ctx, "b", lease); err != nil || !tb.Leader; tb, err = b.Campaign(ctx, "b", lease) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("no takeover within 15s while the leader is paused in a transaction: %+v, %v", tb, err)
		}
		<-time.After(100 * time.Millisecond)
	}
	close(resume)
	if err := <-done; err == nil {
		t.Error("the paused leader's write committed after the takeover")
	}
	if p, err := b.Pending(ctx, "c", 10); err != nil || len(p) != 0 {
		t.Errorf("outbox = %v, %v; want nothing from the paused leader", p, err)
	}
	if err := a.Check(ctx); err != nil {
		t.Errorf("Check of the resumed replica = %v, want nil (its store works; it no longer leads)", err)
	}
}

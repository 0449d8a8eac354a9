package notify_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/pgtest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/postgres"
)

// TestFencedReplicaDeliversNothing: two replicas' notifiers on one
// PostgreSQL state. The leader writes a page to the outbox; its lease
// runs out before it delivers (paused, say): it delivers nothing. The
// replica that takes over delivers the page, once.
func TestFencedReplicaDeliversNothing(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	cfg := notify.Config{
		Channels: []notify.Channel{{Name: "oncall"}},
		Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Page, policy.Critical}, Channels: []string{"oncall"}}},
		Retry:    notify.Retry{Initial: time.Second, Max: time.Minute},
	}
	replica := func(holder string) (*postgres.Store, *notify.Notifier, *recorder) {
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		rec := &recorder{}
		n, err := notify.New(cfg, s, map[string]notify.Sender{"oncall": rec}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return s, n, rec
	}
	a, na, reca := replica("a")
	b, nb, recb := replica("b")
	const lease = time.Second
	ta, err := a.Campaign(ctx, "a", lease)
	if err != nil || !ta.Leader {
		t.Fatalf("a's campaign = %+v, %v", ta, err)
	}
	now := time.Now()
	if _, err := na.Apply(ctx, sweep(now, cert{subject: "db.example", notAfter: now.AddDate(0, 0, 3), eps: eps("db.example")}), now); err != nil {
		t.Fatal(err)
	}

	// a's lease runs out before it delivers.
	<-time.After(time.Until(ta.Until))
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = na.Flush(fctx)
	cancel()
	if !errors.Is(err, state.ErrFenced) {
		t.Errorf("Flush of a replica whose lease ran out = %v, want ErrFenced", err)
	}
	if got := reca.take(); len(got) != 0 {
		t.Fatalf("the fenced replica delivered %d notifications, want none", len(got))
	}

	// b takes over once the lease has ended in the database too.
	var tb state.Term
	for tb, err = b.Campaign(ctx, "b", time.Minute); err == nil && !tb.Leader; tb, err = b.Campaign(ctx, "b", time.Minute) {
		<-time.After(time.Until(tb.Until))
	}
	if err != nil || tb.Epoch != 2 {
		t.Fatalf("b's takeover = %+v, %v; want epoch 2", tb, err)
	}
	fctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := nb.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if got := recb.take(); len(got) != 1 || got[0].n.Event != notify.EventNew {
		t.Errorf("the new leader delivered %v, want the page once", describe(got))
	}
	// a, resumed, still delivers nothing.
	if ta, err = a.Campaign(ctx, "a", lease); err != nil || ta.Leader {
		t.Fatalf("a's campaign after the takeover = %+v, %v; want b leading", ta, err)
	}
	fctx2, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	_ = na.Flush(fctx2)
	if got := reca.take(); len(got) != 0 {
		t.Errorf("the replaced replica delivered %d notifications after resuming, want none", len(got))
	}
}

// finder is a recorder that can also be asked whether an earlier attempt
// posted a notification (a Finder, as Slack is). Its Find is slow: it
// returns only once the lease given in until has run out, as a replica
// paused in the middle of asking would, and counts in late the calls it
// would then still make to the channel (its context not done).
type finder struct {
	recorder
	until time.Time
	late  atomic.Int32
}

func (f *finder) Find(ctx context.Context, _ notify.Notification) (string, bool, error) {
	select {
	case <-time.After(time.Until(f.until) + 200*time.Millisecond):
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return "", false, ctx.Err()
	}
	f.late.Add(1)
	return "", false, nil
}

// TestFencedReplicaDoesNotLookForAnEarlierPost: a leader's post failed
// with its outcome unknown, so its next attempt first asks the channel
// whether the post arrived (Slack: two calls). If the leader is paused in
// the middle of asking until its lease has run out, it asks nothing more
// once it resumes: looking is calling the channel too, which a replica
// that no longer leads must not do.
func TestFencedReplicaDoesNotLookForAnEarlierPost(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &finder{}
	f.fail(errors.New("connection reset by peer")) // the post's outcome is unknown
	n, err := notify.New(notify.Config{
		Channels: []notify.Channel{{Name: "certs"}},
		Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Page, policy.Critical}, Channels: []string{"certs"}}},
		Retry:    notify.Retry{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond},
	}, s, map[string]notify.Sender{"certs": f}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	term, err := s.Campaign(ctx, "a", 2*time.Second)
	if err != nil || !term.Leader {
		t.Fatalf("campaign = %+v, %v", term, err)
	}
	f.until = term.Until
	now := time.Now()
	if _, err := n.Apply(ctx, sweep(now, cert{subject: "db.example", notAfter: now.AddDate(0, 0, 3), eps: eps("db.example")}), now); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = n.Flush(fctx)
	cancel()
	f.mu.Lock()
	sends := len(f.attempts)
	f.mu.Unlock()
	if sends != 1 {
		t.Fatalf("%d posts, want the one that failed (Flush: %v)", sends, err)
	}
	if got := f.late.Load(); got != 0 {
		t.Errorf("the replica went on asking the channel %d times after its lease ran out, want none (Flush: %v)", got, err)
	}
}

package postgres_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

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
	t.Parallel()
	srv := pg.Server(t)
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
	t.Parallel()
	srv := pg.Server(t)
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
	t.Parallel()
	srv := pg.Server(t)
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
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	// Migrated first, and a second of idleness: on a loaded machine a
	// pause of 300ms between two statements of the migration or of a
	// campaign ended those sessions too.
	open(t, url, postgres.Options{})
	opts := postgres.Options{IdleInTransaction: time.Second}
	a, b := open(t, url, opts), open(t, url, opts)
	ctx := context.Background()
	const lease = time.Second
	if ta := campaign(t, a, "a", lease); !ta.Leader {
		t.Fatal("a does not lead")
	}
	resume, done := holdWrite(a) // paused inside the transaction, holding its locks
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

// endLease ends the lease of site's leader by hand, as a pause or a
// partition would by time.
func endLease(t *testing.T, url, site string) {
	t.Helper()
	exec(t, url, `UPDATE leader SET expires_at = clock_timestamp() WHERE site = '`+site+`'`)
}

func addOutbox(s *postgres.Store, channel string) error {
	return s.Update(context.Background(), func(state.Snapshot) (state.Changes, error) {
		return state.Changes{Outbox: []state.Outbound{{Channel: channel, Event: "new", Payload: []byte("{}"), Created: time.Now()}}}, nil
	})
}

// TestSites: the replicas of two sites on one database each elect their
// own leader with its own epoch; both leaders write the shared alert
// state; a takeover in one site fences that site's old leader only; memos
// are the site's own; and a delivery lease passes at once to a newer
// leader of the same site only, while another site's leader waits for it
// to end.
func TestSites(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	a1, a2 := open(t, url, postgres.Options{Site: "a"}), open(t, url, postgres.Options{Site: "a"})
	b1 := open(t, url, postgres.Options{Site: "b"})
	def := open(t, url, postgres.Options{})

	if ta, tb := campaign(t, a1, "a1", time.Hour), campaign(t, b1, "b1", time.Hour); !ta.Leader || ta.Epoch != 1 || !tb.Leader || tb.Epoch != 1 {
		t.Fatalf("campaigns of the first replicas of sites a and b = %+v, %+v; want both leading epoch 1", ta, tb)
	}
	if ta := campaign(t, a2, "a2", time.Hour); ta.Leader || ta.Holder != "a1" {
		t.Fatalf("campaign of a second replica of site a = %+v, want a1 leading", ta)
	}
	// b's leadership changes hands twice: its epoch, 3, is larger than a's.
	for range 2 {
		endLease(t, url, "b")
		campaign(t, b1, "b1", time.Hour)
	}
	if tb := campaign(t, b1, "b1", time.Hour); !tb.Leader || tb.Epoch != 3 {
		t.Fatalf("b after two takeovers = %+v, want leading epoch 3", tb)
	}

	// Memos: one key, one value per site.
	const key = "discovery:route53"
	if err := a1.SetMemo(ctx, key, []byte("A")); err != nil {
		t.Fatalf("site a's memo: %v", err)
	}
	if err := b1.SetMemo(ctx, key, []byte("B")); err != nil {
		t.Fatalf("site b's memo: %v", err)
	}
	for _, c := range []struct {
		s    *postgres.Store
		want string
	}{{a1, "A"}, {a2, "A"}, {b1, "B"}, {def, ""}} {
		if v, err := c.s.Memo(ctx, key); err != nil || string(v) != c.want {
			t.Errorf("Memo(%s) of site %q = %q, %v; want %q", key, c.s.Site(), v, err, c.want)
		}
	}

	// Both leaders write the shared alert state.
	if err := addOutbox(a1, "certs"); err != nil {
		t.Fatalf("site a's leader's update: %v", err)
	}
	if err := addOutbox(b1, "certs"); err != nil {
		t.Fatalf("site b's leader's update: %v", err)
	}
	if p, err := def.Pending(ctx, "certs", 10); err != nil || len(p) != 2 {
		t.Fatalf("shared outbox = %d notifications, %v; want both sites' 2", len(p), err)
	}

	// a1 delivers "certs"; b's leader, with a larger epoch of its own
	// site, waits for a1's lease.
	now := time.Now()
	if held, _, err := a1.Lease(ctx, "certs", "notify-a1", now, now.Add(time.Hour)); err != nil || !held {
		t.Fatalf("a1's delivery lease = %v, %v", held, err)
	}
	if held, until, err := b1.Lease(ctx, "certs", "notify-b1", now, now.Add(time.Hour)); err != nil || held || until.IsZero() {
		t.Fatalf("b's leader (epoch 3) leasing a channel site a's leader (epoch 1) delivers = %v, %v, %v; want to wait for it", held, until, err)
	}

	// a2 takes site a over: a1 is fenced, b1 is not.
	endLease(t, url, "a")
	if ta := campaign(t, a2, "a2", time.Hour); !ta.Leader || ta.Epoch != 2 {
		t.Fatalf("takeover of site a = %+v, want a2 leading epoch 2", ta)
	}
	if err := addOutbox(a1, "certs"); !errors.Is(err, state.ErrFenced) {
		t.Errorf("replaced leader of site a's update = %v, want ErrFenced", err)
	}
	if err := a1.SetMemo(ctx, key, []byte("A-late")); !errors.Is(err, state.ErrFenced) {
		t.Errorf("replaced leader of site a's memo = %v, want ErrFenced", err)
	}
	if err := addOutbox(b1, "certs"); err != nil {
		t.Errorf("site b's leader's update after site a's takeover = %v, want accepted", err)
	}
	if err := b1.SetMemo(ctx, key, []byte("B2")); err != nil {
		t.Errorf("site b's leader's memo after site a's takeover = %v, want accepted", err)
	}
	if tb := campaign(t, b1, "b1", time.Hour); !tb.Leader || tb.Epoch != 3 {
		t.Errorf("site b after site a's takeover = %+v, want b1 still leading epoch 3", tb)
	}
	if v, err := a2.Memo(ctx, key); err != nil || string(v) != "A" {
		t.Errorf("site a's memo = %q, %v; want A (the replaced leader's write refused)", v, err)
	}

	// The new leader of site a takes a1's delivery lease at once; b's
	// leader still waits, until the lease ends.
	if held, _, err := a2.Lease(ctx, "certs", "notify-a2", now, now.Add(time.Hour)); err != nil || !held {
		t.Fatalf("site a's new leader's delivery lease = %v, %v; want taken from the replaced leader at once", held, err)
	}
	if _, _, err := a1.Lease(ctx, "certs", "notify-a1", now, now.Add(time.Hour)); !errors.Is(err, state.ErrFenced) {
		t.Errorf("replaced leader's delivery lease = %v, want ErrFenced", err)
	}
	held, until, err := b1.Lease(ctx, "certs", "notify-b1", now, now.Add(time.Hour))
	if err != nil || held || until.IsZero() {
		t.Fatalf("site b's leader leasing a channel site a's new leader delivers = %v, %v, %v; want to wait for it", held, until, err)
	}
	if held, _, err := b1.Lease(ctx, "certs", "notify-b1", until, until.Add(time.Hour)); err != nil || !held {
		t.Errorf("site b's leader's delivery lease once site a's ended = %v, %v; want held", held, err)
	}
	// And the other way round: site a's leader waits for b's.
	if held, _, err := a2.Lease(ctx, "certs", "notify-a2", until, until.Add(time.Minute)); err != nil || held {
		t.Errorf("site a's leader leasing a channel site b's leader delivers = %v, %v; want to wait for it", held, err)
	}
}

// TestSitesMigration: a database of schema version 3 (one leader row, no
// sites) is migrated so that its leader, epoch, memos and delivery leases
// belong to the default site.
func TestSitesMigration(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	migrateTo(t, url, 3)
	exec(t, url, `INSERT INTO leader (holder, epoch, expires_at) VALUES ('old', 7, clock_timestamp() + interval '1 hour');
INSERT INTO memos (key, value) VALUES ('k', 'v');
INSERT INTO dispatch_leases (channel, holder, expires_at, epoch) VALUES ('certs', 'notify-old', 9223372036854775807, 7)`)

	def, a := open(t, url, postgres.Options{}), open(t, url, postgres.Options{Site: "a"})
	if v, err := def.SchemaVersion(ctx); err != nil || v != postgres.Migrations() {
		t.Fatalf("schema version = %d, %v; want %d", v, err, postgres.Migrations())
	}
	if tm := campaign(t, def, "new", time.Hour); tm.Leader || tm.Holder != "old" || tm.Epoch != 7 {
		t.Errorf("campaign on the default site = %+v, want old leading epoch 7", tm)
	}
	if v, err := def.Memo(ctx, "k"); err != nil || string(v) != "v" {
		t.Errorf("default site's memo = %q, %v; want v", v, err)
	}
	if tm := campaign(t, a, "a", time.Hour); !tm.Leader || tm.Epoch != 1 {
		t.Errorf("campaign on site a = %+v, want leading epoch 1", tm)
	}
	if v, err := a.Memo(ctx, "k"); err != nil || v != nil {
		t.Errorf("site a's memo = %q, %v; want none", v, err)
	}
	// The old leader's delivery lease is one of the default site's: a
	// newer leader of that site takes it at once.
	endLease(t, url, "")
	if tm := campaign(t, def, "new", time.Hour); !tm.Leader || tm.Epoch != 8 {
		t.Fatalf("takeover of the default site = %+v, want epoch 8", tm)
	}
	now := time.Now()
	if held, _, err := def.Lease(ctx, "certs", "notify-new", now, now.Add(time.Hour)); err != nil || !held {
		t.Errorf("new leader's delivery lease = %v, %v; want taken from the migrated leader", held, err)
	}
}

// TestSitePartsMigration: a publication written before publications
// were kept in parts (schema version 9, the whole of it in
// site_results.result) is read as it was after the migration, until the
// site publishes again in parts.
func TestSitePartsMigration(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	ctx := context.Background()
	migrateTo(t, url, 9)
	exec(t, url, `INSERT INTO site_results (site, at, epoch, result) VALUES ('b', 1, 1, 'whole')`)

	a, b := open(t, url, postgres.Options{Site: "a"}), open(t, url, postgres.Options{Site: "b"})
	if v, err := a.SchemaVersion(ctx); err != nil || v != postgres.Migrations() || postgres.Migrations() < 10 {
		t.Fatalf("schema version = %d, %v; want the latest, at least 10 (migrations known: %d)", v, err, postgres.Migrations())
	}
	if others, err := a.OtherSites(ctx); err != nil || len(others) != 1 || string(others[0].Result) != "whole" {
		t.Fatalf("site b's publication after the migration = %+v, %v; want the one written before it", others, err)
	}
	campaign(t, b, "b", time.Hour)
	if err := b.PublishSite(ctx, time.Now(), 0, [][]byte{[]byte("in "), []byte("parts")}); err != nil {
		t.Fatal(err)
	}
	if others, err := a.OtherSites(ctx); err != nil || len(others) != 1 || string(others[0].Result) != "in parts" {
		t.Errorf("site b's publication = %+v, %v; want the new one, in parts", others, err)
	}
	// A replica of b still running the older certwatch writes its
	// publication whole: it is read as it is, not joined to the parts.
	exec(t, url, `UPDATE site_results SET result = 'whole again' WHERE site = 'b'`)
	if others, err := a.OtherSites(ctx); err != nil || len(others) != 1 || string(others[0].Result) != "whole again" {
		t.Errorf("site b's publication written whole after parts = %+v, %v; want it alone", others, err)
	}
}

// TestRenewalDuringLongWrite: a leader renews its lease while one of its
// own writes is in progress (the notifier's, seconds long at fleet size),
// where it used to wait for the write to end and lose the leadership to a
// write longer than its lease; a standby's campaign does not wait for it
// either; a takeover still waits for the write, which commits before it.
func TestRenewalDuringLongWrite(t *testing.T) {
	t.Parallel()
	srv := pg.Server(t)
	url := srv.CreateDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	ctx := context.Background()
	ta := campaign(t, a, "a", time.Hour)
	if !ta.Leader {
		t.Fatal("a does not lead")
	}
	resume, done := holdWrite(a) // a long write, past the fence
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	tr, err := a.Campaign(rctx, "a", time.Hour)
	cancel()
	if err != nil || !tr.Leader || tr.Epoch != ta.Epoch {
		close(resume)
		t.Fatalf("renewal during the leader's own write = %+v, %v; want leading epoch %d at once", tr, err, ta.Epoch)
	}

	// A standby campaigning meanwhile learns at once that a leads: it
	// does not wait for a's write as a takeover would.
	rctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	tb, err := b.Campaign(rctx, "b", time.Hour)
	cancel()
	if err != nil || tb.Leader || tb.Holder != "a" || tb.Epoch != ta.Epoch {
		close(resume)
		t.Fatalf("standby's campaign during the leader's write = %+v, %v; want a leading epoch %d, at once", tb, err, ta.Epoch)
	}

	// The lease ends (a pause, a partition): b's takeover waits for the
	// write that passed the fence.
	endLease(t, url, "")
	took := make(chan state.Term, 1)
	go func() {
		tb, err := b.Campaign(ctx, "b", time.Hour)
		if err != nil {
			t.Errorf("takeover: %v", err)
		}
		took <- tb
	}()
	select {
	case tb := <-took:
		close(resume)
		t.Fatalf("takeover = %+v before the old leader's write ended, want it to wait", tb)
	case <-time.After(500 * time.Millisecond):
	}
	close(resume)
	if err := <-done; err != nil {
		t.Errorf("the write that passed the fence = %v, want committed", err)
	}
	if tb := <-took; !tb.Leader || tb.Epoch != ta.Epoch+1 {
		t.Errorf("takeover after the write = %+v, want b leading epoch %d", tb, ta.Epoch+1)
	}
	if p, err := b.Pending(ctx, "c", 10); err != nil || len(p) != 1 {
		t.Errorf("outbox = %d rows, %v; want the old leader's write, committed before the takeover", len(p), err)
	}
}

// migrateTo brings the empty database at url to schema version v, as a
// certwatch that knew only the first v migrations left it.
func migrateTo(t *testing.T, url string, v int) {
	t.Helper()
	exec(t, url, `CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at BIGINT NOT NULL)`)
	for i, m := range postgres.MigrationSQL[:v] {
		exec(t, url, m)
		exec(t, url, `INSERT INTO schema_version VALUES (`+strconv.Itoa(i+1)+`, 0)`)
	}
}

// holdWrite starts an Update of s that writes an outbox row to channel c,
// and returns once it is inside its transaction, past the fence: it
// commits (or fails, on done) after resume is closed.
func holdWrite(s *postgres.Store) (resume chan struct{}, done chan error) {
	inside := make(chan struct{})
	resume, done = make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(state.Snapshot) (state.Changes, error) {
			close(inside)
			<-resume
			return state.Changes{Outbox: []state.Outbound{{Channel: "c", Event: "new", Payload: []byte("{}"), Created: time.Now()}}}, nil
		})
	}()
	<-inside
	return resume, done
}

// Package statetest is the contract every certwatch state store meets: one
// test suite, run by each store's own tests against a real store (SQLite
// file, PostgreSQL server), so that a second store cannot drift from the
// first.
//
//	func TestContract(t *testing.T) {
//		statetest.Run(t, func(t *testing.T) statetest.Opener { ... })
//	}
package statetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// Store is what a state store offers certwatch: what notify, serve and the
// CLI call on it.
type Store interface {
	Update(ctx context.Context, fn func(state.Snapshot) (state.Changes, error)) error
	UpdateWith(ctx context.Context, current state.Current, fn func(state.Snapshot) (state.Changes, error)) error
	Alerts(ctx context.Context, resolved bool) ([]state.Alert, error)
	Certificate(ctx context.Context, sha256 string) (state.Certificate, bool, error)
	Pending(ctx context.Context, channel string, limit int) ([]state.Outbound, error)
	Settle(ctx context.Context, ids []int64, st state.Settlement) error
	Intend(ctx context.Context, ids []int64, marker string, at time.Time) error
	Abandon(ctx context.Context, keep []string, at time.Time, reason string) (map[string]int, error)
	Lease(ctx context.Context, channel, holder string, now, until time.Time) (bool, time.Time, error)
	OutboxStats(ctx context.Context) ([]state.ChannelStats, error)
	Check(ctx context.Context) error
	Created() bool
	Memo(ctx context.Context, key string) ([]byte, error)
	SetMemo(ctx context.Context, key string, value []byte) error
	AddSilence(ctx context.Context, s state.Silence) error
	ExpireSilence(ctx context.Context, id string, at time.Time) (state.Silence, error)
	Silences(ctx context.Context) ([]state.Silence, error)
	RecordNames(ctx context.Context, at time.Time, seen []policy.NameSeen, pruneBefore time.Time) error
	Names(ctx context.Context) ([]policy.NameHistory, error)
	Close() error
}

// Opener opens one store: every call opens the same store again (as a
// restarted process does), and the first call finds it empty.
type Opener func(t testing.TB) Store

// NewStore makes a fresh, empty store for one test and returns how to open
// it.
type NewStore func(t *testing.T) Opener

// Run runs the contract against the stores newStore makes, one per test.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"AlertsAndOutboxRoundTrip", testAlertsAndOutboxRoundTrip},
		{"ManyAlertsInOneChange", testManyAlertsInOneChange},
		{"SeenMovesOnlyLastSeen", testSeenMovesOnlyLastSeen},
		{"CurrentFindingsShared", testCurrentFindingsShared},
		{"BrokenNowKeptAsSeen", testBrokenNowKeptAsSeen},
		{"SettleRetryAndFailure", testSettleRetryAndFailure},
		{"IntentSurvivesRetryAndRestart", testIntentSurvivesRetryAndRestart},
		{"ReopenedAlertForgetsOldThread", testReopenedAlertForgetsOldThread},
		{"ManyAlertsReopenedInOneChange", testManyAlertsReopenedInOneChange},
		{"CancelDropsOnlyPendingDigests", testCancelDropsOnlyPendingDigests},
		{"SupersedeDropsOnlyPendingReminders", testSupersedeDropsOnlyPendingReminders},
		{"UpdateErrorWritesNothing", testUpdateErrorWritesNothing},
		{"Prune", testPrune},
		{"CertificatesKeepFirstSeen", testCertificatesKeepFirstSeen},
		{"Lease", testLease},
		{"AbandonMarksOnlyPendingOfOtherChannels", testAbandonMarksOnlyPendingOfOtherChannels},
		{"ConcurrentUpdatesSerialise", testConcurrentUpdatesSerialise},
		{"EmptyStore", testEmptyStore},
		{"CreatedAndMemos", testCreatedAndMemos},
		{"Silences", testSilences},
		{"NameHistory", testNameHistory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // one store each
			tt.fn(t, closing(newStore(t)))
		})
	}
}

// closing wraps open so that every store it opens is closed at the end of
// the test, once.
func closing(open Opener) Opener {
	return func(t testing.TB) Store {
		t.Helper()
		s := &onceCloser{Store: open(t)}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

type onceCloser struct {
	Store
	once sync.Once
	err  error
}

func (c *onceCloser) Close() error {
	c.once.Do(func() { c.err = c.Store.Close() })
	return c.err
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func finding(cert string, tier policy.Tier) policy.Finding {
	return policy.Finding{
		Kind: policy.Expiring, Tier: tier, Certificate: cert, Subject: "api.example.com",
		Deadline:  policy.At(t0.AddDate(0, 0, 10)),
		Endpoints: []policy.Endpoint{{Name: "api.example.com", Port: 443, Address: "10.0.0.1"}},
		Message:   "renew it",
	}
}

// Alert returns an open alert for an expiring certificate cert at tier,
// announced on channels at t0.
func Alert(cert string, tier policy.Tier, channels ...string) state.Alert {
	f := finding(cert, tier)
	a := state.Alert{ID: f.ID(), Finding: f, Issuer: "Example CA", Tier: tier, Announced: tier, FirstRaised: t0, LastSeen: t0}
	for _, c := range channels {
		a.Channels.Set(c, state.Announcement{Tier: tier, At: t0})
	}
	return a
}

// refOf is the Ref of what channel was told, "" if nothing.
func refOf(channel string, as state.Announcements) string {
	an, _ := as.Get(channel)
	return an.Ref
}

func update(t testing.TB, s Store, ch state.Changes) state.Snapshot {
	t.Helper()
	var snap state.Snapshot
	err := s.Update(context.Background(), func(sn state.Snapshot) (state.Changes, error) {
		snap = sn
		return ch, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func pending(t testing.TB, s Store, channel string) []state.Outbound {
	t.Helper()
	p, err := s.Pending(context.Background(), channel, 100)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testEmptyStore(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if snap := update(t, s, state.Changes{}); len(snap.Alerts) != 0 {
		t.Errorf("snapshot of a new store = %v, want none", snap.Alerts)
	}
	if all, err := s.Alerts(ctx, true); err != nil || len(all) != 0 {
		t.Errorf("Alerts(resolved) of a new store = %v, %v, want none", all, err)
	}
	if p := pending(t, s, "certs"); len(p) != 0 {
		t.Errorf("Pending of a new store = %v, want none", p)
	}
	if _, ok, err := s.Certificate(ctx, "aa"); ok || err != nil {
		t.Errorf("Certificate of a new store = %v, %v, want none", ok, err)
	}
	if st, err := s.OutboxStats(ctx); err != nil || len(st) != 0 {
		t.Errorf("OutboxStats of a new store = %v, %v, want none", st, err)
	}
	if err := s.Settle(ctx, nil, state.Settlement{At: t0, Delivered: true}); err != nil {
		t.Errorf("Settle of no notifications: %v", err)
	}
}

func testCreatedAndMemos(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if !s.Created() {
		t.Error("Created() of a new store = false, want true")
	}
	if err := s.Check(ctx); err != nil {
		t.Errorf("Check of a new store = %v, want nil", err)
	}
	if v, err := s.Memo(ctx, "daemon/last_success/probe"); v != nil || err != nil {
		t.Errorf("Memo of a key never set = %q, %v; want nil, nil", v, err)
	}
	for _, v := range []string{"first", "second"} {
		if err := s.SetMemo(ctx, "daemon/last_success/probe", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	if s.Created() {
		t.Error("Created() of a reopened store = true, want false")
	}
	v, err := s.Memo(ctx, "daemon/last_success/probe")
	if err != nil || string(v) != "second" {
		t.Errorf("Memo after reopening = %q, %v; want \"second\"", v, err)
	}
	if err := s.Check(ctx); err != nil {
		t.Errorf("Check of a reopened store = %v, want nil", err)
	}
}

func testAlertsAndOutboxRoundTrip(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)

	a := Alert("aa", policy.Warning, "certs")
	a.Channels.Set("oncall", state.Announcement{Tier: policy.Warning, At: t0, Summary: true, SummaryKey: "summary:2030-01-01T00:00:00Z"})
	update(t, s, state.Changes{
		Alerts: []state.Alert{a},
		Outbox: []state.Outbound{
			{Channel: "certs", AlertID: a.ID, Event: "new", Payload: []byte(`{"n":1}`), Created: t0},
			{Channel: "certs", AlertID: a.ID, Event: "escalated", Payload: []byte(`{"n":2}`), Created: t0.Add(time.Hour)},
			{Channel: "oncall", AlertID: a.ID, Event: "new", Payload: []byte(`{"n":3}`), Created: t0},
		},
	})

	got := pending(t, s, "certs")
	if len(got) != 2 || got[0].Event != "new" || got[1].Event != "escalated" || got[0].ID >= got[1].ID {
		t.Fatalf("Pending(certs) = %+v, want new then escalated", got)
	}
	if string(got[0].Payload) != `{"n":1}` || !got[0].NextAttempt.Equal(t0) || got[0].Ref != "" {
		t.Errorf("Pending(certs)[0] = %+v, want payload, due at creation, no ref", got[0])
	}
	if got[0].Channel != "certs" || got[0].AlertID != a.ID || !got[0].Created.Equal(t0) {
		t.Errorf("Pending(certs)[0] = %+v, want channel, alert and creation time kept", got[0])
	}

	if err := s.Settle(ctx, []int64{got[0].ID}, state.Settlement{At: t0, Delivered: true, Ref: "C1:1.000"}); err != nil {
		t.Fatal(err)
	}
	got = pending(t, s, "certs")
	if len(got) != 1 || got[0].Ref != "C1:1.000" {
		t.Fatalf("after delivery, Pending(certs) = %+v, want the escalation carrying the ref of the first post", got)
	}
	if p := pending(t, s, "oncall"); len(p) != 1 || p[0].Ref != "" {
		t.Errorf("Pending(oncall) = %+v, want one without a ref (refs are per channel)", p)
	}

	// Reopen the store: everything survives.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	snap := update(t, s, state.Changes{})
	b, ok := snap.Alerts[a.ID]
	if !ok {
		t.Fatalf("snapshot after reopen lacks alert %s", a.ID)
	}
	a.Channels.Set("certs", state.Announcement{Tier: policy.Warning, At: t0, Ref: "C1:1.000"})
	if diff := cmp.Diff(a, *b); diff != "" {
		t.Errorf("alert after reopen (-want +got):\n%s", diff)
	}
	all, err := s.Alerts(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("Alerts = %d alerts, want 1", len(all))
	}
	if diff := cmp.Diff(a, all[0]); diff != "" {
		t.Errorf("Alerts()[0] (-want +got):\n%s", diff)
	}
}

// testManyAlertsInOneChange: one change of more alerts, channel
// announcements and outbox rows than a store sends in one round trip is
// written whole and in order: the alert given twice keeps its last
// version, each alert its channels, each channel its notifications.
func testManyAlertsInOneChange(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	const n = 1300
	var ch state.Changes
	for i := range n {
		a := Alert(fmt.Sprintf("%064x", i), policy.Warning, "certs", "oncall")
		ch.Alerts = append(ch.Alerts, a)
		ch.Outbox = append(ch.Outbox,
			state.Outbound{Channel: "certs", AlertID: a.ID, Event: "new", Payload: []byte(`{}`), Created: t0},
			state.Outbound{Channel: "oncall", AlertID: a.ID, Event: "new", Payload: []byte(`{}`), Created: t0})
	}
	again := Alert(fmt.Sprintf("%064x", 7), policy.Page, "oncall")
	ch.Alerts = append(ch.Alerts, again)
	update(t, s, ch)

	all, err := s.Alerts(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("Alerts = %d alerts, want %d", len(all), n)
	}
	for _, a := range all {
		want := 2
		if a.ID == again.ID {
			if a.Tier != policy.Page {
				t.Errorf("alert %s given twice kept tier %v, want the last one's (page)", a.ID, a.Tier)
			}
			want = 1
		}
		if len(a.Channels) != want {
			t.Errorf("alert %s has %d channels, want %d", a.ID, len(a.Channels), want)
		}
	}
	for _, channel := range []string{"certs", "oncall"} {
		p, err := s.Pending(ctx, channel, 2*n)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != n {
			t.Errorf("Pending(%s) = %d notifications, want %d", channel, len(p), n)
		}
	}
}

// testSeenMovesOnlyLastSeen: an open alert seen again moves only its last
// seen time, with its thread kept; a resolved one, an unknown one and one
// also written whole are as they would be without it; thousands at once.
func testSeenMovesOnlyLastSeen(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	const n = 1200 // more than one statement's worth (state/postgres: 1,000)
	var ch state.Changes
	for i := range n {
		ch.Alerts = append(ch.Alerts, Alert(fmt.Sprintf("%064x", i), policy.Warning, "certs"))
	}
	resolved := Alert("cc", policy.Page, "certs")
	resolved.ResolvedAt, resolved.Resolution = t0.Add(time.Minute), "certificate replaced"
	ch.Alerts = append(ch.Alerts, resolved)
	ch.Outbox = []state.Outbound{{Channel: "certs", AlertID: ch.Alerts[0].ID, Event: "new", Payload: []byte("{}"), Created: t0}}
	update(t, s, ch)
	p := pending(t, s, "certs")
	if err := s.Settle(ctx, []int64{p[0].ID}, state.Settlement{At: t0, Delivered: true, Ref: "thread-1"}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Alerts(ctx, true)
	if err != nil {
		t.Fatal(err)
	}

	t1 := t0.Add(10 * time.Minute)
	written := Alert(fmt.Sprintf("%064x", 1), policy.Page, "certs", "oncall")
	written.LastSeen = t1.Add(time.Second)
	seen := []string{resolved.ID, "no-such-alert"}
	for _, a := range ch.Alerts[:n] {
		seen = append(seen, a.ID)
	}
	update(t, s, state.Changes{Seen: seen, SeenAt: t1, Alerts: []state.Alert{written}})

	after, err := s.Alerts(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]state.Alert{}
	for _, a := range before {
		if a.Open() {
			a.LastSeen = t1
		}
		want[a.ID] = a
	}
	want[written.ID] = written
	if len(after) != len(want) {
		t.Fatalf("%d alerts after, want %d", len(after), len(want))
	}
	for _, a := range after {
		if diff := cmp.Diff(want[a.ID], a); diff != "" {
			t.Errorf("alert %s (-want +got):\n%s", a.ID, diff)
		}
	}
	if ref := refOf("certs", after[slices.IndexFunc(after, func(a state.Alert) bool { return a.ID == ch.Alerts[0].ID })].Channels); ref != "thread-1" {
		t.Errorf("an alert seen again lost its thread: ref %q, want thread-1", ref)
	}
}

// testCurrentFindingsShared: UpdateWith gives an open alert whose stored
// finding is, byte for byte, the one current has for its ID that finding
// (its lists shared, nothing decoded), and one whose finding current has
// changed in any field a zero finding (its caller writes the current one);
// every other alert has its finding as stored, so the snapshot is Update's
// but for those zero findings.
func testCurrentFindingsShared(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	same := Alert("aa", policy.Warning, "certs")
	same.Finding.Subject = `<a & b> "quoted"` // escaped in the JSON kept
	changed := []state.Alert{Alert("bb", policy.Warning, "certs"), Alert("cc", policy.Warning), Alert("dd", policy.Warning), Alert("ee", policy.Warning)}
	absent := Alert("ff", policy.Page, "oncall")
	update(t, s, state.Changes{Alerts: append([]state.Alert{same, absent}, changed...)})
	stored := update(t, s, state.Changes{})

	// Equal to the stored finding, built anew.
	now := map[string]policy.Finding{same.ID: {
		Kind: same.Finding.Kind, Tier: same.Finding.Tier, Certificate: same.Finding.Certificate, Subject: same.Finding.Subject,
		Deadline: same.Finding.Deadline, Endpoints: slices.Clone(same.Finding.Endpoints), Message: same.Finding.Message,
	}}
	differ := []func(*policy.Finding){
		func(f *policy.Finding) { f.Message = "renew it today" },
		func(f *policy.Finding) {
			f.Endpoints = append(slices.Clone(f.Endpoints), policy.Endpoint{Name: "b.example.com", Port: 443})
		},
		func(f *policy.Finding) { f.Deadline++ },
		func(f *policy.Finding) {
			f.Records = &policy.Records{ACM: []policy.ACMRef{{ARN: "arn:aws:acm:eu-west-1:1:certificate/x"}}}
		},
	}
	for i, a := range changed {
		f := a.Finding
		f.Endpoints = slices.Clone(f.Endpoints)
		differ[i](&f)
		now[a.ID] = f
	}
	var snap state.Snapshot
	err := s.UpdateWith(ctx, func(id string) (policy.Finding, bool) {
		f, ok := now[id]
		return f, ok
	}, func(sn state.Snapshot) (state.Changes, error) {
		snap = sn
		return state.Changes{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := state.Snapshot{Alerts: map[string]*state.Alert{}, Silences: stored.Silences}
	for id, a := range stored.Alerts {
		w := *a
		if id != same.ID && now[id].Kind != "" {
			w.Finding = policy.Finding{}
		}
		want.Alerts[id] = &w
	}
	if len(want.Alerts) != len(changed)+2 {
		t.Fatalf("Update read %d alerts, want %d", len(want.Alerts), len(changed)+2)
	}
	if diff := cmp.Diff(want, snap); diff != "" {
		t.Errorf("UpdateWith's snapshot (-want: Update's, the changed alerts' findings zero; +got):\n%s", diff)
	}
	if got := snap.Alerts[same.ID]; got == nil || &got.Finding.Endpoints[0] != &now[same.ID].Endpoints[0] {
		t.Errorf("the alert found again as stored has a decoded copy of its finding, want the current one shared")
	}
}

// testBrokenNowKeptAsSeen: the finding of a problem broken now, whose
// deadline is the time it was seen (state.AsStored), reads back with its
// alert's last seen time as its deadline, also once the alert was marked
// seen later; UpdateWith gives the alert the current finding when that,
// AsStored at the run's time, is the stored one. A deadline that is not
// the time it was seen, or of a kind with a deadline, reads back as it
// was written.
func testBrokenNowKeptAsSeen(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	broken := Alert("aa", policy.Page, "certs")
	broken.Finding.Kind, broken.Finding.Deadline = policy.ChainUntrusted, policy.At(broken.LastSeen)
	earlier := Alert("bb", policy.Page, "certs")
	earlier.Finding.Kind, earlier.Finding.Deadline = policy.TLSBroken, policy.At(earlier.LastSeen.Add(-time.Hour))
	dated := Alert("cc", policy.Warning, "certs")
	dated.Finding.Deadline = policy.At(dated.LastSeen)
	update(t, s, state.Changes{Alerts: []state.Alert{broken, earlier, dated}})
	readBack := func(when string, want map[string]policy.Instant) {
		t.Helper()
		alerts, err := s.Alerts(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]policy.Instant{}
		for _, a := range alerts {
			got[a.ID] = a.Finding.Deadline
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: deadlines read back (-want +got):\n%s", when, diff)
		}
	}
	readBack("written", map[string]policy.Instant{broken.ID: broken.Finding.Deadline, earlier.ID: earlier.Finding.Deadline, dated.ID: dated.Finding.Deadline})

	t1 := broken.LastSeen.Add(10 * time.Minute)
	update(t, s, state.Changes{Seen: []string{broken.ID, earlier.ID, dated.ID}, SeenAt: t1})
	readBack("seen again", map[string]policy.Instant{broken.ID: policy.At(t1), earlier.ID: earlier.Finding.Deadline, dated.ID: dated.Finding.Deadline})

	t2 := t1.Add(10 * time.Minute)
	now := broken.Finding
	now.Deadline = policy.At(t2)
	var snap state.Snapshot
	err := s.UpdateWith(ctx, func(id string) (policy.Finding, bool) {
		if id != broken.ID {
			return policy.Finding{}, false
		}
		return state.AsStored(now, t2), true
	}, func(sn state.Snapshot) (state.Changes, error) {
		snap = sn
		return state.Changes{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Alerts[broken.ID]; got == nil || len(got.Finding.Endpoints) == 0 || &got.Finding.Endpoints[0] != &now.Endpoints[0] {
		t.Errorf("the broken chain found again at a later run: %+v, want the current finding, shared", got)
	}
}

func testSettleRetryAndFailure(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	update(t, s, state.Changes{Outbox: []state.Outbound{
		{Channel: "c", Event: "test", Payload: []byte("{}"), Created: t0},
		{Channel: "c", Event: "test", Payload: []byte("{}"), Created: t0},
	}})
	p := pending(t, s, "c")
	if err := s.Settle(ctx, []int64{p[0].ID}, state.Settlement{At: t0, Err: "http 500", Retry: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, []int64{p[1].ID}, state.Settlement{At: t0, Err: "invalid_auth"}); err != nil {
		t.Fatal(err)
	}
	p = pending(t, s, "c")
	if len(p) != 1 || p[0].Attempts != 1 || p[0].LastError != "http 500" || !p[0].NextAttempt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Pending after retry and failure = %+v, want only the retried one, due in a minute", p)
	}
	stats, err := s.OutboxStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []state.ChannelStats{{Channel: "c", Pending: 1, Failed: 1, OldestPending: t0, LastError: "http 500"}}
	if diff := cmp.Diff(want, stats); diff != "" {
		t.Errorf("OutboxStats (-want +got):\n%s", diff)
	}
}

// testIntentSurvivesRetryAndRestart: the intent recorded before an attempt
// (its marker and time) is what the next attempt, in this process or after
// a crash, needs to find a message that was posted without its outcome
// being recorded; it lasts until the notification is delivered.
func testIntentSurvivesRetryAndRestart(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	update(t, s, state.Changes{Outbox: []state.Outbound{
		{Channel: "c", AlertID: "x", Event: "new", Payload: []byte("{}"), Created: t0},
		{Channel: "c", Event: "digest", Digest: true, Payload: []byte("{}"), Created: t0},
		{Channel: "c", Event: "digest", Digest: true, Payload: []byte("{}"), Created: t0},
		{Channel: "d", Event: "new", Payload: []byte("{}"), Created: t0},
	}})
	p := pending(t, s, "c")
	if len(p) != 3 || p[0].Marker != "" || !p[0].Intended.IsZero() {
		t.Fatalf("Pending(c) = %+v, want 3 without an intent", p)
	}
	at := t0.Add(time.Minute + 123*time.Nanosecond)
	if err := s.Intend(ctx, []int64{p[0].ID}, "m-1", at); err != nil {
		t.Fatal(err)
	}
	if err := s.Intend(ctx, []int64{p[1].ID, p[2].ID}, "m-2", at); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, []int64{p[0].ID}, state.Settlement{At: at, Err: "timeout", Retry: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	p = pending(t, s, "c")
	if len(p) != 3 {
		t.Fatalf("Pending(c) after reopen = %+v, want 3", p)
	}
	for i, want := range []string{"m-1", "m-2", "m-2"} {
		if p[i].Marker != want || !p[i].Intended.Equal(at) {
			t.Errorf("Pending(c)[%d] marker %q intended %v, want %q at %v (kept across a retry and a restart, to the nanosecond)", i, p[i].Marker, p[i].Intended, want, at)
		}
	}
	if d := pending(t, s, "d"); len(d) != 1 || d[0].Marker != "" {
		t.Errorf("Pending(d) = %+v, want no intent on another channel's notification", d)
	}
	// A later attempt records its own time, with the same marker.
	later := at.Add(time.Hour)
	if err := s.Intend(ctx, []int64{p[0].ID}, "m-1", later); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, s, "c")[0]; got.Marker != "m-1" || !got.Intended.Equal(later) {
		t.Errorf("after a second intent, Pending(c)[0] = %+v, want m-1 at %v", got, later)
	}
	// A delivered notification is not pending, and an intent for it
	// changes nothing.
	if err := s.Settle(ctx, []int64{p[0].ID}, state.Settlement{At: later, Delivered: true, Ref: "C1:2.000"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Intend(ctx, []int64{p[0].ID}, "m-3", later); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, s, "c"); len(got) != 2 || got[0].Marker != "m-2" {
		t.Errorf("after delivery, Pending(c) = %+v, want the two digest rows left", got)
	}
}

func testReopenedAlertForgetsOldThread(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	a := Alert("bb", policy.Page, "certs")
	update(t, s, state.Changes{Alerts: []state.Alert{a}, Outbox: []state.Outbound{{Channel: "certs", AlertID: a.ID, Event: "new", Payload: []byte("{}"), Created: t0}}})
	p := pending(t, s, "certs")
	if err := s.Settle(ctx, []int64{p[0].ID}, state.Settlement{At: t0, Delivered: true, Ref: "old-thread"}); err != nil {
		t.Fatal(err)
	}
	a.ResolvedAt, a.Resolution = t0.Add(time.Hour), "certificate replaced"
	snap := update(t, s, state.Changes{Alerts: []state.Alert{a}})
	if ref := refOf("certs", snap.Alerts[a.ID].Channels); ref != "old-thread" {
		t.Fatalf("ref before resolution = %q, want old-thread", ref)
	}
	snap = update(t, s, state.Changes{})
	if _, open := snap.Alerts[a.ID]; open {
		t.Fatal("resolved alert is still in the snapshot of open alerts")
	}
	// The finding comes back.
	b := Alert("bb", policy.Page, "certs")
	b.FirstRaised = t0.Add(48 * time.Hour)
	update(t, s, state.Changes{Alerts: []state.Alert{b}, Outbox: []state.Outbound{{Channel: "certs", AlertID: b.ID, Event: "new", Payload: []byte("{}"), Created: b.FirstRaised}}})
	if p := pending(t, s, "certs"); len(p) != 1 || p[0].Ref != "" {
		t.Fatalf("Pending for reopened alert = %+v, want no ref to the resolved incident's thread", p)
	}
	all, err := s.Alerts(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || !all[0].Open() || !all[0].FirstRaised.Equal(b.FirstRaised) {
		t.Errorf("Alerts(resolved) = %+v, want the one reopened alert", all)
	}
}

// testManyAlertsReopenedInOneChange: a change that reopens thousands of
// alerts at once (a first run after they were all resolved) forgets every
// one's old thread and replaces every one's channels, the last as well as
// the first: a store may name them in several statements.
func testManyAlertsReopenedInOneChange(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	const n = 1100
	alerts := make([]state.Alert, n)
	var ch state.Changes
	for i := range alerts {
		alerts[i] = Alert(fmt.Sprintf("%064x", i), policy.Warning, "certs")
		ch.Outbox = append(ch.Outbox, state.Outbound{Channel: "certs", AlertID: alerts[i].ID, Event: "new", Payload: []byte(`{}`), Created: t0})
	}
	ch.Alerts = alerts
	update(t, s, ch)
	p, err := s.Pending(ctx, "certs", 2*n)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(p))
	for i, o := range p {
		ids[i] = o.ID
	}
	if err := s.Settle(ctx, ids, state.Settlement{At: t0, Delivered: true, Ref: "old-thread"}); err != nil {
		t.Fatal(err)
	}
	resolved := slices.Clone(alerts)
	for i := range resolved {
		resolved[i].ResolvedAt, resolved[i].Resolution = t0.Add(time.Hour), "certificate replaced"
	}
	update(t, s, state.Changes{Alerts: resolved})

	later := t0.Add(48 * time.Hour)
	ch = state.Changes{}
	for i := range alerts {
		a := Alert(fmt.Sprintf("%064x", i), policy.Warning, "oncall")
		a.FirstRaised, a.LastSeen = later, later
		ch.Alerts = append(ch.Alerts, a)
		ch.Outbox = append(ch.Outbox, state.Outbound{Channel: "certs", AlertID: a.ID, Event: "new", Payload: []byte(`{}`), Created: later})
	}
	update(t, s, ch)
	snap := update(t, s, state.Changes{})
	if len(snap.Alerts) != n {
		t.Fatalf("%d open alerts after reopening %d", len(snap.Alerts), n)
	}
	for id, a := range snap.Alerts {
		if len(a.Channels) != 1 || !a.Channels.Has("oncall") {
			t.Fatalf("reopened alert %s has channels %+v, want oncall alone", id, a.Channels)
		}
	}
	p, err = s.Pending(ctx, "certs", 2*n)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != n {
		t.Fatalf("Pending(certs) = %d, want %d", len(p), n)
	}
	for _, o := range p {
		if o.Ref != "" {
			t.Fatalf("reopened alert %s still points at its resolved incident's thread %q", o.AlertID, o.Ref)
		}
	}
}

func testCancelDropsOnlyPendingDigests(t *testing.T, open Opener) {
	s := open(t)
	a := Alert("cc", policy.Notice, "certs")
	update(t, s, state.Changes{Alerts: []state.Alert{a}, Outbox: []state.Outbound{
		{Channel: "certs", AlertID: a.ID, Event: "new", Digest: true, Payload: []byte("{}"), Created: t0, NextAttempt: t0.Add(24 * time.Hour)},
		{Channel: "other", AlertID: a.ID, Event: "new", Digest: true, Payload: []byte("{}"), Created: t0, NextAttempt: t0.Add(24 * time.Hour)},
	}})
	update(t, s, state.Changes{
		Cancel: []state.Key{{AlertID: a.ID, Channel: "certs"}},
		Outbox: []state.Outbound{{Channel: "certs", AlertID: a.ID, Event: "escalated", Payload: []byte("{}"), Created: t0.Add(time.Hour)}},
	})
	if p := pending(t, s, "certs"); len(p) != 1 || p[0].Event != "escalated" {
		t.Errorf("Pending(certs) = %+v, want only the escalation", p)
	}
	p := pending(t, s, "other")
	if len(p) != 1 || !p[0].Digest || !p[0].NextAttempt.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("Pending(other) = %+v, want its digest entry kept, due in a day", p)
	}
}

func testSupersedeDropsOnlyPendingReminders(t *testing.T, open Opener) {
	s := open(t)
	a, b := Alert("ee", policy.Warning, "certs"), Alert("ff", policy.Warning, "certs")
	out := func(alertID, channel, event string, at time.Time) state.Outbound {
		return state.Outbound{Channel: channel, AlertID: alertID, Event: event, Payload: []byte("{}"), Created: at}
	}
	update(t, s, state.Changes{Alerts: []state.Alert{a, b}, Outbox: []state.Outbound{
		out(a.ID, "certs", "new", t0),
		out(a.ID, "certs", "reminder", t0.Add(24*time.Hour)),
		out(b.ID, "certs", "reminder", t0.Add(24*time.Hour)),
		out(a.ID, "other", "reminder", t0.Add(24*time.Hour)),
	}})
	delivered := pending(t, s, "certs")[0]
	update(t, s, state.Changes{Outbox: []state.Outbound{out(a.ID, "certs", "reminder", t0.Add(47*time.Hour))}})
	if err := s.Settle(context.Background(), []int64{delivered.ID}, state.Settlement{At: t0, Delivered: true}); err != nil {
		t.Fatal(err)
	}
	update(t, s, state.Changes{
		Supersede: []state.Key{{AlertID: a.ID, Channel: "certs"}},
		Outbox:    []state.Outbound{out(a.ID, "certs", "reminder", t0.Add(48*time.Hour))},
	})
	var got []string
	for _, p := range pending(t, s, "certs") {
		got = append(got, fmt.Sprintf("%s %s %s", p.AlertID, p.Event, p.Created.Format(time.DateTime)))
	}
	want := []string{
		b.ID + " reminder 2030-01-02 00:00:00",
		a.ID + " reminder 2030-01-03 00:00:00",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pending(certs) (-want +got):\n%s", diff)
	}
	if p := pending(t, s, "other"); len(p) != 1 {
		t.Errorf("Pending(other) = %+v, want its reminder kept", p)
	}
}

func testUpdateErrorWritesNothing(t *testing.T, open Opener) {
	s := open(t)
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(state.Snapshot) (state.Changes, error) {
		return state.Changes{Alerts: []state.Alert{Alert("dd", policy.Page)}}, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want the function's error", err)
	}
	if snap := update(t, s, state.Changes{}); len(snap.Alerts) != 0 {
		t.Errorf("snapshot after failed update = %v, want empty", snap.Alerts)
	}
}

func testPrune(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	old := Alert("ee", policy.Page)
	old.ResolvedAt = t0
	update(t, s, state.Changes{
		Alerts:       []state.Alert{old, Alert("ff", policy.Page)},
		Certificates: slices.Values([]state.Certificate{{SHA256: "ee", LastSeen: t0}, {SHA256: "ff", LastSeen: t0.AddDate(0, 0, 100)}}),
		Outbox:       []state.Outbound{{Channel: "c", Event: "test", Payload: []byte("{}"), Created: t0}, {Channel: "c", Event: "test", Payload: []byte("{}"), Created: t0}},
	})
	p := pending(t, s, "c")
	if err := s.Settle(ctx, []int64{p[0].ID}, state.Settlement{At: t0, Delivered: true}); err != nil {
		t.Fatal(err)
	}
	update(t, s, state.Changes{PruneBefore: t0.AddDate(0, 0, 90)})
	all, err := s.Alerts(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Finding.Certificate != "ff" {
		t.Errorf("alerts after prune = %v, want only the open one", all)
	}
	if _, ok, _ := s.Certificate(ctx, "ee"); ok {
		t.Error("certificate last seen before the cut-off survived pruning")
	}
	if _, ok, _ := s.Certificate(ctx, "ff"); !ok {
		t.Error("recent certificate was pruned")
	}
	if p := pending(t, s, "c"); len(p) != 1 {
		t.Errorf("pending after prune = %d, want the undelivered one kept", len(p))
	}
}

func testCertificatesKeepFirstSeen(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	eps := []policy.Endpoint{{Name: "a.example", Port: 443, Address: "10.0.0.1"}, {Name: "b.example", Port: 8443, Address: "2001:db8::1"}, {Name: "c.example", Port: 443},
		// Served by a load balancer and a distribution for the name, as
		// SNI, wherever the name's own DNS leads.
		{Name: "app.example", Port: 443, Address: "10.0.0.9", Via: "alb-1.eu-west-1.elb.amazonaws.com"},
		{Name: "cdn.example", Port: 443, Via: "d111111abcdef8.cloudfront.net"}}
	update(t, s, state.Changes{Certificates: slices.Values([]state.Certificate{{SHA256: "11", Subject: "a.example", LastSeen: t0, Endpoints: eps[:1]}})})
	update(t, s, state.Changes{Certificates: slices.Values([]state.Certificate{{SHA256: "11", Subject: "a.example", Issuer: "CA", NotAfter: t0.AddDate(1, 0, 0), LastSeen: t0.Add(time.Hour), Endpoints: eps}})})
	got, ok, err := s.Certificate(ctx, "11")
	if err != nil || !ok {
		t.Fatalf("Certificate = %v, %v", ok, err)
	}
	want := state.Certificate{SHA256: "11", Subject: "a.example", Issuer: "CA", NotAfter: t0.AddDate(1, 0, 0), FirstSeen: t0, LastSeen: t0.Add(time.Hour), Endpoints: eps}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Certificate (-want +got):\n%s", diff)
	}
}

func testLease(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	steps := []struct {
		name       string
		holder     string
		at, until  time.Time
		held       bool
		otherUntil time.Time
	}{
		{"a takes it", "a", t0, t0.Add(time.Minute), true, time.Time{}},
		{"b waits for a", "b", t0.Add(time.Second), t0.Add(time.Minute), false, t0.Add(time.Minute)},
		{"a renews", "a", t0.Add(30 * time.Second), t0.Add(90 * time.Second), true, time.Time{}},
		{"b still waits", "b", t0.Add(time.Minute), t0.Add(2 * time.Minute), false, t0.Add(90 * time.Second)},
		{"a's lease ended: b takes it", "b", t0.Add(90 * time.Second), t0.Add(3 * time.Minute), true, time.Time{}},
		{"b gives it up", "b", t0.Add(2 * time.Minute), t0.Add(2 * time.Minute), false, time.Time{}},
		{"a takes it at once", "a", t0.Add(2 * time.Minute), t0.Add(3 * time.Minute), true, time.Time{}},
	}
	for _, st := range steps {
		held, other, err := s.Lease(ctx, "certs", st.holder, st.at, st.until)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if held != st.held || !other.Equal(st.otherUntil) {
			t.Errorf("%s: Lease = %v, %v; want %v, %v", st.name, held, other, st.held, st.otherUntil)
		}
	}
	if held, _, err := s.Lease(ctx, "other", "b", t0.Add(2*time.Minute), t0.Add(3*time.Minute)); err != nil || !held {
		t.Errorf("lease of another channel = %v, %v; want held: leases are per channel", held, err)
	}
}

func testAbandonMarksOnlyPendingOfOtherChannels(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	update(t, s, state.Changes{Outbox: []state.Outbound{
		{Channel: "certs", Event: "new", Payload: []byte(`{}`), Created: t0},
		{Channel: "old", Event: "new", Payload: []byte(`{}`), Created: t0},
		{Channel: "old", Event: "new", Payload: []byte(`{}`), Created: t0},
		{Channel: "old", Event: "resolved", Payload: []byte(`{}`), Created: t0},
		{Channel: "gone", Event: "new", Payload: []byte(`{}`), Created: t0},
	}})
	old := pending(t, s, "old")
	if err := s.Settle(ctx, []int64{old[0].ID}, state.Settlement{At: t0, Delivered: true}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Abandon(ctx, []string{"certs", "oncall"}, t0.Add(time.Hour), "channel removed from the configuration")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"old": 2, "gone": 1}, got); diff != "" {
		t.Errorf("Abandon (-want +got):\n%s", diff)
	}
	stats, err := s.OutboxStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []state.ChannelStats{
		{Channel: "certs", Pending: 1, OldestPending: t0},
		{Channel: "gone", Failed: 1},
		{Channel: "old", Failed: 2, Delivered: 1},
	}
	if diff := cmp.Diff(want, stats); diff != "" {
		t.Errorf("outbox after Abandon (-want +got):\n%s", diff)
	}
	if got, err := s.Abandon(ctx, []string{"certs"}, t0.Add(2*time.Hour), "again"); err != nil || len(got) != 0 {
		t.Errorf("second Abandon = %v, %v, want nothing left to abandon", got, err)
	}
	if got, err := s.Abandon(ctx, nil, t0.Add(2*time.Hour), "no channels"); err != nil || got["certs"] != 1 {
		t.Errorf("Abandon keeping none = %v, %v, want certs abandoned", got, err)
	}
}

// testConcurrentUpdatesSerialise: two processes updating one store at once
// each see the other's committed changes, never the same snapshot: every
// one of n increments of a counter kept in an alert survives.
func testConcurrentUpdatesSerialise(t *testing.T, open Opener) {
	const workers, rounds = 3, 10
	stores := make([]Store, workers)
	for i := range stores {
		stores[i] = open(t)
	}
	a := Alert("99", policy.Warning)
	update(t, stores[0], state.Changes{Alerts: []state.Alert{a}})
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i, s := range stores {
		wg.Go(func() {
			for range rounds {
				err := s.Update(context.Background(), func(snap state.Snapshot) (state.Changes, error) {
					b := *snap.Alerts[a.ID]
					b.MissingRuns++
					return state.Changes{Alerts: []state.Alert{b}}, nil
				})
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	snap := update(t, stores[0], state.Changes{})
	if got := snap.Alerts[a.ID].MissingRuns; got != workers*rounds {
		t.Errorf("counter after %d concurrent updates = %d: updates acted on the same snapshot", workers*rounds, got)
	}
}

// testSilences: silences round-trip whole, reach Update's snapshot, are
// kept across a reopen, expire once, and are pruned once ended long ago.
func testSilences(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if got, err := s.Silences(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Silences of a new store = %v, %v, want none", got, err)
	}
	a := state.Silence{
		ID: "s-aaaa", Match: state.Matchers{Kind: policy.Expiring, Name: "*.example.com", Zone: "example.com", Labels: map[string]string{"team": "payments"}, Certificate: "abcdef"},
		UpTo: policy.Page, Reason: "renewal booked for Friday", Author: "alice", Created: t0, Until: t0.AddDate(0, 0, 7),
	}
	b := state.Silence{ID: "s-bbbb", Match: state.Matchers{FindingID: "expiring:ff"}, UpTo: policy.Warning, Reason: "known", Author: "bob", Created: t0.Add(time.Hour), Until: t0.AddDate(0, 0, 1)}
	for _, si := range []state.Silence{a, b} {
		if err := s.AddSilence(ctx, si); err != nil {
			t.Fatalf("AddSilence(%s): %v", si.ID, err)
		}
	}
	if err := s.AddSilence(ctx, a); err == nil {
		t.Error("AddSilence of an ID in use succeeded, want an error")
	}
	want := []state.Silence{a, b}
	got, err := s.Silences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Silences (-want +got):\n%s", diff)
	}
	if snap := update(t, s, state.Changes{}); !cmp.Equal(want, snap.Silences) {
		t.Errorf("Update's snapshot carries silences %v, want %v", snap.Silences, want)
	}

	at := t0.Add(2 * time.Hour)
	ended, err := s.ExpireSilence(ctx, "s-bbbb", at)
	if err != nil || !ended.Expired.Equal(at) || ended.Active(at) {
		t.Fatalf("ExpireSilence = %+v, %v; want it ended at %v", ended, err, at)
	}
	// Expiring it again keeps the first end.
	if again, err := s.ExpireSilence(ctx, "s-bbbb", at.Add(time.Hour)); err != nil || !again.Expired.Equal(at) {
		t.Errorf("ExpireSilence again = %+v, %v; want it kept as ended at %v", again, err, at)
	}
	if _, err := s.ExpireSilence(ctx, "s-nope", at); !errors.Is(err, state.ErrNoSilence) {
		t.Errorf("ExpireSilence of an unknown ID = %v, want ErrNoSilence", err)
	}
	if err := s.Check(ctx); err != nil {
		t.Errorf("Check after expiring an unknown ID = %v, want nil: a mistyped ID is no store failure", err)
	}

	s.Close()
	s = open(t)
	got, err = s.Silences(ctx)
	if err != nil || len(got) != 2 || !got[1].Expired.Equal(at) {
		t.Fatalf("Silences after reopening = %+v, %v; want both, the second expired", got, err)
	}
	// Pruning drops silences that ended before the cut-off only.
	update(t, s, state.Changes{PruneBefore: t0.AddDate(0, 0, 3)})
	got, err = s.Silences(ctx)
	if err != nil || len(got) != 1 || got[0].ID != "s-aaaa" {
		t.Errorf("Silences after pruning = %+v, %v; want only the one that lasts past the cut-off", got, err)
	}
}

// testNameHistory: per name, the newest certificate seen, since when and
// the one it replaced; a run that did not see a name (cut short, a source
// failing) leaves it alone, an older certificate seen again (a partial
// view, a copy still served somewhere) never rewinds it, one row per name
// however many runs, and pruning drops only names not seen since the
// cut-off.
func testNameHistory(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	names := func() map[string]policy.NameHistory {
		t.Helper()
		hs, err := s.Names(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]policy.NameHistory{}
		for i, h := range hs {
			if i > 0 && hs[i-1].Name >= h.Name {
				t.Errorf("Names not by name: %q before %q", hs[i-1].Name, h.Name)
			}
			m[h.Name] = h
		}
		return m
	}
	record := func(at time.Time, prune time.Time, seen ...policy.NameSeen) {
		t.Helper()
		if err := s.RecordNames(ctx, at, seen, prune); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(); len(got) != 0 {
		t.Fatalf("Names of a new store = %v, want none", got)
	}
	cert := func(name, fp string, issued int) policy.NameSeen {
		nb := t0.AddDate(0, 0, issued)
		return policy.NameSeen{Name: name, SHA256: fp, NotBefore: nb, NotAfter: nb.AddDate(0, 0, 90), Served: true}
	}
	day := func(n int) time.Time { return t0.AddDate(0, 0, n) }
	apiOld, apiNew, www := cert("api.example.com", "aa", -60), cert("api.example.com", "bb", -1), cert("www.example.com", "cc", -30)

	record(day(0), time.Time{}, apiOld, www)
	// Cut short: only api was probed, and still serves the same.
	record(day(1), time.Time{}, apiOld)
	s.Close()
	s = open(t)
	want := map[string]policy.NameHistory{
		"api.example.com": {Name: "api.example.com", SHA256: "aa", NotBefore: policy.At(apiOld.NotBefore), NotAfter: policy.At(apiOld.NotAfter), Since: policy.At(day(0)), LastSeen: policy.At(day(1))},
		"www.example.com": {Name: "www.example.com", SHA256: "cc", NotBefore: policy.At(www.NotBefore), NotAfter: policy.At(www.NotAfter), Since: policy.At(day(0)), LastSeen: policy.At(day(0))},
	}
	if diff := cmp.Diff(want, names()); diff != "" {
		t.Errorf("after a complete and a cut-short run (-want +got):\n%s", diff)
	}

	// Renewed: the newer certificate replaces the old one.
	record(day(2), time.Time{}, apiNew)
	// An older copy seen again (a partial view), and a run recorded late
	// with an earlier time: neither rewinds the name.
	record(day(3), time.Time{}, apiOld)
	record(day(2).Add(-time.Hour), time.Time{}, apiOld, www)
	want["api.example.com"] = policy.NameHistory{Name: "api.example.com", SHA256: "bb", NotBefore: policy.At(apiNew.NotBefore), NotAfter: policy.At(apiNew.NotAfter),
		Since: policy.At(day(2)), Previous: "aa", LastSeen: policy.At(day(3))}
	want["www.example.com"] = policy.NameHistory{Name: "www.example.com", SHA256: "cc", NotBefore: policy.At(www.NotBefore), NotAfter: policy.At(www.NotAfter),
		Since: policy.At(day(0)), LastSeen: policy.At(day(2).Add(-time.Hour))}
	got := names()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the renewal and older sightings (-want +got):\n%s", diff)
	}
	if h := got["api.example.com"]; !h.LastChanged().Equal(day(2)) {
		t.Errorf("LastChanged = %v, want %v", h.LastChanged(), day(2))
	}
	if len(got) != 2 {
		t.Errorf("%d names kept after 5 runs, want 2: one row per name", len(got))
	}

	// A complete run prunes what it has not seen since the cut-off.
	record(day(40), day(10), apiNew)
	got = names()
	if _, ok := got["www.example.com"]; ok || len(got) != 1 {
		t.Errorf("after pruning: %v, want only api.example.com", got)
	}
	if err := s.RecordNames(ctx, day(41), nil, time.Time{}); err != nil {
		t.Errorf("RecordNames of nothing: %v", err)
	}

	// Names are read into a list of the size needed, not one grown as
	// they are read (6 names: room for 8): a run holds it as it judges.
	var more []policy.NameSeen
	for i := range 5 {
		more = append(more, cert(fmt.Sprintf("n%d.example.com", i), fmt.Sprintf("f%d", i), -1))
	}
	record(day(42), time.Time{}, more...)
	if hs, err := s.Names(ctx); err != nil || len(hs) != 6 || cap(hs) != len(hs) {
		t.Errorf("Names = %d names in a list with room for %d (%v), want 6 in a list of 6", len(hs), cap(hs), err)
	}
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func open(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func finding(cert string, tier policy.Tier) policy.Finding {
	return policy.Finding{
		Kind: policy.Expiring, Tier: tier, Certificate: cert, Subject: "api.example.com",
		Deadline:  t0.AddDate(0, 0, 10),
		Endpoints: []policy.Endpoint{{Name: "api.example.com", Port: 443, Address: "10.0.0.1"}},
		Message:   "renew it",
	}
}

func alert(cert string, tier policy.Tier, channels ...string) state.Alert {
	f := finding(cert, tier)
	a := state.Alert{ID: f.ID(), Finding: f, Issuer: "Example CA", Tier: tier, Announced: tier, FirstRaised: t0, LastSeen: t0, Channels: map[string]state.Announcement{}}
	for _, c := range channels {
		a.Channels[c] = state.Announcement{Tier: tier, At: t0}
	}
	return a
}

func update(t *testing.T, s *Store, ch state.Changes) state.Snapshot {
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

func pending(t *testing.T, s *Store, channel string) []state.Outbound {
	t.Helper()
	p, err := s.Pending(context.Background(), channel, 100)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAlertsAndOutboxRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)

	a := alert("aa", policy.Warning, "certs")
	a.Channels["oncall"] = state.Announcement{Tier: policy.Warning, At: t0, Summary: true, SummaryKey: "summary:2030-01-01T00:00:00Z"}
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

	// Reopen the file: everything survives.
	s.Close()
	s = open(t, path)
	snap := update(t, s, state.Changes{})
	b, ok := snap.Alerts[a.ID]
	if !ok {
		t.Fatalf("snapshot after reopen lacks alert %s", a.ID)
	}
	a.Channels["certs"] = state.Announcement{Tier: policy.Warning, At: t0, Ref: "C1:1.000"}
	if diff := cmp.Diff(a, *b); diff != "" {
		t.Errorf("alert after reopen (-want +got):\n%s", diff)
	}
}

func TestSettleRetryAndFailure(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
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

func TestReopenedAlertForgetsOldThread(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	a := alert("bb", policy.Page, "certs")
	update(t, s, state.Changes{Alerts: []state.Alert{a}, Outbox: []state.Outbound{{Channel: "certs", AlertID: a.ID, Event: "new", Payload: []byte("{}"), Created: t0}}})
	p := pending(t, s, "certs")
	if err := s.Settle(ctx, []int64{p[0].ID}, state.Settlement{At: t0, Delivered: true, Ref: "old-thread"}); err != nil {
		t.Fatal(err)
	}
	a.ResolvedAt, a.Resolution = t0.Add(time.Hour), "certificate replaced"
	snap := update(t, s, state.Changes{Alerts: []state.Alert{a}})
	if snap.Alerts[a.ID].Channels["certs"].Ref != "old-thread" {
		t.Fatalf("ref before resolution = %q, want old-thread", snap.Alerts[a.ID].Channels["certs"].Ref)
	}
	snap = update(t, s, state.Changes{})
	if _, open := snap.Alerts[a.ID]; open {
		t.Fatal("resolved alert is still in the snapshot of open alerts")
	}
	// The finding comes back.
	b := alert("bb", policy.Page, "certs")
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

func TestCancelDropsOnlyPendingDigests(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	a := alert("cc", policy.Notice, "certs")
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
	if p := pending(t, s, "other"); len(p) != 1 || !p[0].Digest {
		t.Errorf("Pending(other) = %+v, want its digest entry kept", p)
	}
}

func TestSupersedeDropsOnlyPendingReminders(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	a, b := alert("ee", policy.Warning, "certs"), alert("ff", policy.Warning, "certs")
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

func TestUpdateErrorWritesNothing(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(state.Snapshot) (state.Changes, error) {
		return state.Changes{Alerts: []state.Alert{alert("dd", policy.Page)}}, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want the function's error", err)
	}
	if snap := update(t, s, state.Changes{}); len(snap.Alerts) != 0 {
		t.Errorf("snapshot after failed update = %v, want empty", snap.Alerts)
	}
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	old := alert("ee", policy.Page)
	old.ResolvedAt = t0
	update(t, s, state.Changes{
		Alerts:       []state.Alert{old, alert("ff", policy.Page)},
		Certificates: []state.Certificate{{SHA256: "ee", LastSeen: t0}, {SHA256: "ff", LastSeen: t0.AddDate(0, 0, 100)}},
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

func TestCertificatesKeepFirstSeen(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	eps := []policy.Endpoint{{Name: "a.example", Port: 443, Address: "10.0.0.1"}, {Name: "b.example", Port: 8443, Address: "2001:db8::1"}, {Name: "c.example", Port: 443}}
	update(t, s, state.Changes{Certificates: []state.Certificate{{SHA256: "11", Subject: "a.example", LastSeen: t0, Endpoints: eps[:1]}}})
	update(t, s, state.Changes{Certificates: []state.Certificate{{SHA256: "11", Subject: "a.example", Issuer: "CA", NotAfter: t0.AddDate(1, 0, 0), LastSeen: t0.Add(time.Hour), Endpoints: eps}}})
	got, ok, err := s.Certificate(ctx, "11")
	if err != nil || !ok {
		t.Fatalf("Certificate = %v, %v", ok, err)
	}
	want := state.Certificate{SHA256: "11", Subject: "a.example", Issuer: "CA", NotAfter: t0.AddDate(1, 0, 0), FirstSeen: t0, LastSeen: t0.Add(time.Hour), Endpoints: eps}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Certificate (-want +got):\n%s", diff)
	}
}

func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at INTEGER NOT NULL)`,
		migrations[0],
		`INSERT INTO schema_version VALUES (1, 0)`,
		`INSERT INTO alerts (id, kind, certificate, tier, announced_tier, first_raised, last_seen, finding)
			VALUES ('expiring:aa', 'expiring', 'aa', 3, 3, 1, 1, '{"kind":"expiring","tier":"warning","certificate":"aa"}')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s := open(t, path)
	var version int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != len(migrations) {
		t.Errorf("schema version after open = %d, want %d", version, len(migrations))
	}
	alerts, err := s.Alerts(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 1 || alerts[0].ID != "expiring:aa" || alerts[0].Tier != policy.Warning || alerts[0].Issuer != "" {
		t.Errorf("alerts after migration = %+v, want the version 1 alert kept", alerts)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	t.Run("corrupt", func(t *testing.T) {
		path := filepath.Join(dir, "corrupt.db")
		if err := os.WriteFile(path, []byte(strings.Repeat("this is not a database\n", 400)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, path, Options{})
		if !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
			t.Errorf("Open(garbage) = %v, want ErrCorrupt naming the file with a hint", err)
		}
	})

	t.Run("too new", func(t *testing.T) {
		path := filepath.Join(dir, "new.db")
		s := open(t, path)
		if _, err := s.db.Exec(`INSERT INTO schema_version VALUES (99, 0)`); err != nil {
			t.Fatal(err)
		}
		s.Close()
		_, err := Open(ctx, path, Options{})
		if !errors.Is(err, state.ErrTooNew) || !strings.Contains(err.Error(), "99") {
			t.Errorf("Open(newer schema) = %v, want ErrTooNew naming the version", err)
		}
	})

	t.Run("missing directory", func(t *testing.T) {
		path := filepath.Join(dir, "nope", "state.db")
		_, err := Open(ctx, path, Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "writable") {
			t.Errorf("Open(missing dir) = %v, want an error naming the file with a hint", err)
		}
	})

	t.Run("locked", func(t *testing.T) {
		path := filepath.Join(dir, "locked.db")
		s := open(t, path)
		// Another process holding the write lock.
		other, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		conn, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(ctx, "ROLLBACK")
		err = s.Update(ctx, func(state.Snapshot) (state.Changes, error) { return state.Changes{}, nil })
		if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "only one certwatch") {
			t.Errorf("Update while locked = %v, want ErrLocked naming the file with a hint", err)
		}
	})

	t.Run("full", func(t *testing.T) {
		path := filepath.Join(dir, "full.db")
		s := open(t, path)
		var pages int
		if err := s.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
			t.Fatal(err)
		}
		// A quota of the current size makes SQLite report a full disk.
		if _, err := s.db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
			t.Fatal(err)
		}
		var certs []state.Certificate
		for i := range 2000 {
			certs = append(certs, state.Certificate{SHA256: fmt.Sprintf("%064d", i), Subject: "x", LastSeen: t0})
		}
		err := s.Update(ctx, func(state.Snapshot) (state.Changes, error) { return state.Changes{Certificates: certs}, nil })
		if !errors.Is(err, state.ErrFull) || !strings.Contains(err.Error(), "free space") {
			t.Fatalf("Update on a full disk = %v, want ErrFull with a hint", err)
		}
		if _, ok, _ := s.Certificate(ctx, certs[0].SHA256); ok {
			t.Error("part of the failed update was written")
		}
	})
}

// BenchmarkStateSize100k reports the size of a state file holding 100,000
// certificates, each served at two addresses, plus 1,000 open alerts.
func BenchmarkStateSize100k(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "state.db")
		s := open(b, path)
		certs := make([]state.Certificate, n)
		for i := range certs {
			name := fmt.Sprintf("svc-%06d.internal.example", i)
			certs[i] = state.Certificate{
				SHA256: fmt.Sprintf("%064x", i), Subject: name, Issuer: "Example Internal CA G2",
				NotAfter: t0.AddDate(0, 0, i%400), LastSeen: t0,
				Endpoints: []policy.Endpoint{
					{Name: name, Port: 443, Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
					{Name: name, Port: 443, Address: fmt.Sprintf("10.%d.%d.%d", 128|i>>16&255, i>>8&255, i&255)},
				},
			}
		}
		var alerts []state.Alert
		for i := range 1000 {
			a := alert(certs[i].SHA256, policy.Warning, "certs", "oncall")
			alerts = append(alerts, a)
		}
		err := s.Update(context.Background(), func(state.Snapshot) (state.Changes, error) {
			return state.Changes{Certificates: certs, Alerts: alerts}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		size, err := s.sizeOnDisk()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(size), "bytes")
		b.ReportMetric(float64(size)/n, "bytes/cert")
	}
}

// TestConcurrentFirstOpen: processes starting together on a new state
// file (a daemon and `certwatch alerts`, say) all open it; only one applies
// the migrations.
func TestConcurrentFirstOpen(t *testing.T) {
	for round := range 5 {
		path := filepath.Join(t.TempDir(), "state.db")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				s, err := Open(context.Background(), path, Options{})
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: open %d: %v", round, i, err)
			}
		}
	}
}

func TestLease(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
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

func TestAbandonMarksOnlyPendingOfOtherChannels(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
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

func noop(state.Snapshot) (state.Changes, error) { return state.Changes{}, nil }

// TestCheckFollowsTheFile: a state file deleted, replaced or overwritten
// under an open store fails Check and every write, and is never recreated.
func TestCheckFollowsTheFile(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		harm  func(t *testing.T, path string)
		want  error
		exist bool
	}{
		{"deleted", func(t *testing.T, path string) {
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
		}, state.ErrReplaced, false},
		{"replaced", func(t *testing.T, path string) {
			other := path + ".new"
			open(t, other).Close()
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}, state.ErrReplaced, true},
		{"overwritten", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("garbage ", 1000)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, state.ErrCorrupt, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s := open(t, path)
			if err := s.Check(ctx); err != nil {
				t.Fatalf("Check of a fresh store = %v, want nil", err)
			}
			update(t, s, state.Changes{Alerts: []state.Alert{alert("aa", policy.Warning)}})
			tt.harm(t, path)
			if err := s.Check(ctx); !errors.Is(err, tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Check after the file was %s = %v, want %v naming the file", tt.name, err, tt.want)
			}
			err := s.Update(ctx, noop)
			if !errors.Is(err, tt.want) {
				t.Errorf("Update after the file was %s = %v, want %v", tt.name, err, tt.want)
			}
			if err := s.SetMemo(ctx, "k", []byte("v")); !errors.Is(err, tt.want) {
				t.Errorf("SetMemo after the file was %s = %v, want %v", tt.name, err, tt.want)
			}
			if _, err := os.Stat(path); (err == nil) != tt.exist {
				t.Errorf("state file exists = %v after the writes, want %v (never recreated)", err == nil, tt.exist)
			}
			if err := s.Check(ctx); !errors.Is(err, tt.want) {
				t.Errorf("Check after the failed writes = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestCheckKeepsAWriteFailure: a full disk still serves reads; Check stays
// failed until a write commits again.
func TestCheckKeepsAWriteFailure(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "full.db"))
	var pages int
	if err := s.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMemo(ctx, "big", make([]byte, 1<<20)); !errors.Is(err, state.ErrFull) {
		t.Fatalf("SetMemo on a full disk = %v, want ErrFull", err)
	}
	if _, err := s.OutboxStats(ctx); err != nil {
		t.Fatalf("OutboxStats on a full disk = %v, want reads to work", err)
	}
	if err := s.Check(ctx); !errors.Is(err, state.ErrFull) {
		t.Errorf("Check after a read on a full disk = %v, want ErrFull kept", err)
	}
	if _, err := s.db.Exec("PRAGMA max_page_count = 1000000"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMemo(ctx, "big", make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Errorf("Check after a write committed = %v, want nil", err)
	}
}

func TestCreatedAndMemos(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	if !s.Created() {
		t.Error("Created() of a new file = false, want true")
	}
	if v, err := s.Memo(ctx, "daemon/last_success/probe"); v != nil || err != nil {
		t.Errorf("Memo of a key never set = %q, %v; want nil, nil", v, err)
	}
	for _, v := range []string{"first", "second"} {
		if err := s.SetMemo(ctx, "daemon/last_success/probe", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = open(t, path)
	if s.Created() {
		t.Error("Created() of a reopened file = true, want false")
	}
	v, err := s.Memo(ctx, "daemon/last_success/probe")
	if err != nil || string(v) != "second" {
		t.Errorf("Memo after reopening = %q, %v; want \"second\"", v, err)
	}
}

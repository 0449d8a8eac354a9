package notify_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/sqlite"
)

// changesKept is a real store that keeps the last changes written to it.
type changesKept struct {
	*sqlite.Store
	last state.Changes
	// read are the findings of the open alerts the last changes were
	// made from, as the store gave them (the planner then updates them).
	read map[string]policy.Finding
}

func (c *changesKept) Update(ctx context.Context, fn func(state.Snapshot) (state.Changes, error)) error {
	return c.UpdateWith(ctx, nil, fn)
}

func (c *changesKept) UpdateWith(ctx context.Context, current state.Current, fn func(state.Snapshot) (state.Changes, error)) error {
	return c.Store.UpdateWith(ctx, current, func(s state.Snapshot) (state.Changes, error) {
		c.read = map[string]policy.Finding{}
		for id, a := range s.Alerts {
			c.read[id] = a.Finding
		}
		ch, err := fn(s)
		c.last = ch
		return ch, err
	})
}

// keptNotifier is a notifier of the test configuration, with reminders,
// on a store that keeps the changes written to it.
func keptNotifier(t *testing.T, reminders map[policy.Tier]time.Duration) (*notify.Notifier, *changesKept) {
	t.Helper()
	cfg := baseConfig(t.TempDir())
	cfg.Reminders = reminders
	store := &changesKept{Store: openStore(t, cfg.State)}
	rec := &recorder{now: func() time.Time { return t0 }}
	n, err := notify.New(cfg.Config, store, map[string]notify.Sender{"certs": rec, "incidents": rec, "oncall": rec, "team-a": rec}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return n, store
}

// TestAlertsSeenAgainAreNotRewritten: an open alert a run finds as stored
// is written as seen (its last seen time moves, nothing else is
// rewritten); one whose finding changed, or that a channel is told of
// again, is written whole.
func TestAlertsSeenAgainAreNotRewritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, store := keptNotifier(t, map[policy.Tier]time.Duration{policy.Warning: time.Hour})
	a := cert{subject: "a.example.com", notAfter: t0.Add(10 * day), eps: eps("a.example.com")}
	b := cert{subject: "b.example.com", notAfter: t0.Add(11 * day), eps: eps("b.example.com")}
	apply := func(at time.Time, certs ...cert) (written, seen []string) {
		t.Helper()
		if _, err := n.Apply(ctx, sweep(at, certs...), at); err != nil {
			t.Fatal(err)
		}
		for _, al := range store.last.Alerts {
			written = append(written, al.Finding.Subject)
		}
		alerts, err := store.Alerts(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, al := range alerts {
			present := slices.ContainsFunc(certs, func(c cert) bool { return c.subject == al.Finding.Subject })
			if present && !al.LastSeen.Equal(at) {
				t.Errorf("run at %v: alert of %s last seen %v", at.Format(time.TimeOnly), al.Finding.Subject, al.LastSeen.Format(time.TimeOnly))
			}
			if slices.Contains(store.last.Seen, al.ID) {
				seen = append(seen, al.Finding.Subject)
			}
		}
		slices.Sort(written)
		slices.Sort(seen)
		return written, seen
	}
	check := func(when string, gotWritten, gotSeen, wantWritten, wantSeen []string) {
		t.Helper()
		if !slices.Equal(gotWritten, wantWritten) || !slices.Equal(gotSeen, wantSeen) {
			t.Errorf("%s: written whole %q and as seen %q; want %q and %q", when, gotWritten, gotSeen, wantWritten, wantSeen)
		}
	}

	w, s := apply(t0, a, b)
	check("first run", w, s, []string{"a.example.com", "b.example.com"}, nil)

	w, s = apply(t0.Add(10*time.Minute), a, b)
	check("the same again", w, s, nil, []string{"a.example.com", "b.example.com"})

	b.eps = append(b.eps, policy.Endpoint{Name: "b2.example.com", Port: 443, Address: "10.0.1.1"})
	w, s = apply(t0.Add(20*time.Minute), a, b)
	check("b served at one more endpoint", w, s, []string{"b.example.com"}, []string{"a.example.com"})

	// An hour after the first announcement both are reminded: their
	// channels' last announcement moves.
	w, s = apply(t0.Add(time.Hour), a, b)
	check("reminded", w, s, []string{"a.example.com", "b.example.com"}, nil)

	w, s = apply(t0.Add(70*time.Minute), a)
	check("b not seen", w, s, []string{"b.example.com"}, []string{"a.example.com"})

	w, s = apply(t0.Add(80*time.Minute), a, b)
	check("b back after a run missing", w, s, []string{"b.example.com"}, []string{"a.example.com"})
}

// TestAlertsFoundAgainShareTheRunsFinding: an open alert a run finds again
// exactly as stored is given the run's finding, shared, rather than a copy
// decoded from the store (tens of megabytes at fleet size); one whose
// finding changed is given none (the store does not decode what the run
// replaces) and is written with the run's.
func TestAlertsFoundAgainShareTheRunsFinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, store := keptNotifier(t, nil)
	a := cert{subject: "a.example.com", notAfter: t0.Add(10 * day), eps: eps("a.example.com")}
	b := cert{subject: "b.example.com", notAfter: t0.Add(11 * day), eps: eps("b.example.com")}
	if _, err := n.Apply(ctx, sweep(t0, a, b), t0); err != nil {
		t.Fatal(err)
	}
	b.eps = append(b.eps, policy.Endpoint{Name: "b2.example.com", Port: 443, Address: "10.0.1.1"})
	at := t0.Add(10 * time.Minute)
	sw := sweep(at, a, b)
	if _, err := n.Apply(ctx, sw, at); err != nil {
		t.Fatal(err)
	}
	run := map[string]policy.Finding{}
	for _, f := range sw.Findings {
		run[f.Subject] = f
	}
	alerts, err := store.Alerts(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(store.read) != 2 || len(alerts) != 2 {
		t.Fatalf("the second run read %d open alerts and left %d, want 2 and 2", len(store.read), len(alerts))
	}
	for _, al := range alerts {
		got, ok := store.read[al.ID]
		if !ok {
			t.Errorf("alert of %s was not read by the second run", al.Finding.Subject)
			continue
		}
		f := run[al.Finding.Subject]
		switch al.Finding.Subject {
		case "a.example.com":
			if len(got.Endpoints) == 0 || &got.Endpoints[0] != &f.Endpoints[0] {
				t.Errorf("alert of a.example.com, found again as stored: decoded from the store, want the run's finding shared")
			}
		case "b.example.com":
			if got.Kind != "" {
				t.Errorf("alert of b.example.com, whose blast radius grew: read with its stored finding (%d endpoints), want none decoded", len(got.Endpoints))
			}
			if len(al.Finding.Endpoints) != 2 {
				t.Errorf("alert of b.example.com written with %d endpoints, want the run's 2", len(al.Finding.Endpoints))
			}
		default:
			t.Errorf("an alert of %q is open, want those of a.example.com and b.example.com", al.Finding.Subject)
		}
	}
}

// TestBrokenNowSeenAgainIsNotRewritten: a problem broken now (a chain
// that does not verify) has the time it was seen as its deadline, which
// moves with every run. Found again as it was, its alert is written as
// seen, not whole; read back, its deadline is the time it was last seen,
// as it was when the alert was rewritten at every run. A deadline that is
// a date (an expiry) is kept as it is.
func TestBrokenNowSeenAgainIsNotRewritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, store := keptNotifier(t, nil)
	broken := func(at time.Time) policy.Finding {
		return policy.Finding{Kind: policy.ChainUntrusted, Tier: policy.Page, Certificate: "c0ffee", Subject: "chain.example.com",
			Deadline: policy.At(at), Endpoints: eps("chain.example.com"), Message: "certificate chain does not verify: unknown authority"}
	}
	expiring := cert{subject: "a.example.com", notAfter: t0.Add(10 * day), eps: eps("a.example.com")}
	run := func(at time.Time) (written, seen int) {
		t.Helper()
		sw := sweep(at, expiring)
		sw.Findings = append(sw.Findings, broken(at))
		if _, err := n.Apply(ctx, sw, at); err != nil {
			t.Fatal(err)
		}
		return len(store.last.Alerts), len(store.last.Seen)
	}
	deadlines := func() map[policy.Kind]policy.Instant {
		t.Helper()
		alerts, err := store.Alerts(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		out := map[policy.Kind]policy.Instant{}
		for _, a := range alerts {
			out[a.Finding.Kind] = a.Finding.Deadline
		}
		return out
	}

	if w, s := run(t0); w != 2 || s != 0 {
		t.Fatalf("first run: %d alerts written whole, %d as seen; want 2 and 0", w, s)
	}
	for i, at := range []time.Time{t0.Add(10 * time.Minute), t0.Add(20 * time.Minute)} {
		if w, s := run(at); w != 0 || s != 2 {
			t.Errorf("run %d after the first: %d alerts written whole, %d as seen; want 0 and 2", i+1, w, s)
		}
		d := deadlines()
		if d[policy.ChainUntrusted] != policy.At(at) {
			t.Errorf("run %d after the first: the broken chain's alert reads back with deadline %v, want the run's time %v", i+1, d[policy.ChainUntrusted].Time(), at)
		}
		if d[policy.Expiring] != policy.At(expiring.notAfter) {
			t.Errorf("run %d after the first: the expiry's alert reads back with deadline %v, want the expiry %v", i+1, d[policy.Expiring].Time(), expiring.notAfter)
		}
	}
	changed := broken(t0.Add(30 * time.Minute))
	changed.Message += " (and more)"
	sw := sweep(t0.Add(30*time.Minute), expiring)
	sw.Findings = append(sw.Findings, changed)
	if _, err := n.Apply(ctx, sw, t0.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if len(store.last.Alerts) != 1 || store.last.Alerts[0].Finding.Message != changed.Message {
		t.Errorf("a broken chain whose message changed: %d alerts written whole, want it alone with its new message", len(store.last.Alerts))
	}
}

package notify_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/sqlite"
)

// bubble is a Notifier on real time inside a synctest bubble, with
// recorders for channels certs and oncall, delivering with Run.
type bubble struct {
	store *sqlite.Store
	n     *notify.Notifier
	rec   map[string]*recorder
	stop  func()
}

func startBubble(t *testing.T, retry notify.Retry) *bubble {
	return startBubbleWith(t, retry, nil, nil)
}

func startBubbleWith(t *testing.T, retry notify.Retry, wrap func(state.Outbox) state.Outbox, logger *slog.Logger) *bubble {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	cfg := notify.Config{
		Channels: []notify.Channel{
			{Name: "certs"},
			{Name: "oncall"},
		},
		Routes: []notify.Route{
			{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs"}},
			{Tiers: []policy.Tier{policy.Page, policy.Critical}, Channels: []string{"oncall"}},
		},
		Retry: retry,
	}
	store, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := &bubble{store: store, rec: map[string]*recorder{"certs": {}, "oncall": {}}}
	var st state.Outbox = store
	if wrap != nil {
		st = wrap(store)
	}
	b.n, err = notify.New(cfg, st, map[string]notify.Sender{"certs": b.rec["certs"], "oncall": b.rec["oncall"]}, logger)
	if err != nil {
		t.Fatal(err)
	}
	b.n.Rand = func() float64 { return 0.999 }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { b.n.Run(ctx) })
	b.stop = func() {
		cancel()
		wg.Wait()
		store.Close()
	}
	return b
}

func (b *bubble) apply(t *testing.T, fs ...policy.Finding) {
	t.Helper()
	if _, err := b.n.Apply(context.Background(), notify.Sweep{Findings: fs}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

func warning(subject string) policy.Finding {
	return policy.Finding{Kind: policy.HostnameMismatch, Tier: policy.Warning, Certificate: sha(subject), Subject: subject, Endpoints: eps(subject)}
}

var errServer = errors.New("slack certs chat.postMessage #certs: http 500")

func TestRetriesBackOffAndHonourRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, notify.Retry{Initial: time.Second, Max: time.Minute, AlertAfter: time.Hour})
		defer b.stop()
		start := time.Now()
		b.rec["certs"].fail(errServer, errServer, errServer, notify.RetryAfter(30*time.Second, errors.New("slack certs: rate limited")))
		b.apply(t, warning("first.example"), warning("second.example"))
		time.Sleep(time.Hour)
		synctest.Wait()

		r := b.rec["certs"]
		var gaps []time.Duration
		for i := 1; i < len(r.attempts); i++ {
			gaps = append(gaps, r.attempts[i].Sub(r.attempts[i-1]).Round(time.Millisecond))
		}
		// Full jitter with rand 0.999: just under 1s, 2s, 4s; then the
		// 30s asked for plus at most 10%; then the second notification.
		want := []time.Duration{999 * time.Millisecond, 1998 * time.Millisecond, 3996 * time.Millisecond, 32997 * time.Millisecond, 0}
		if diff := cmp.Diff(want, gaps); diff != "" {
			t.Errorf("gaps between attempts (-want +got):\n%s", diff)
		}
		if got := describe(r.take()); !cmp.Equal(got, []string{"new warning first.example", "new warning second.example"}) {
			t.Errorf("delivered %v, want both, in order", got)
		}
		if r.attempts[0] != start {
			t.Errorf("first attempt at %v, want at once (%v)", r.attempts[0], start)
		}
		h := b.n.Health()
		if h[0].Delivered != 2 || h[0].Retried != 4 || !h[0].FailingSince.IsZero() {
			t.Errorf("health = %+v, want 2 delivered, 4 retried, healthy now", h[0])
		}
	})
}

func TestFailingChannelIsReportedOnTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, notify.Retry{Initial: time.Second, Max: 5 * time.Minute, AlertAfter: 15 * time.Minute})
		defer b.stop()
		start := time.Now()
		b.rec["certs"].setFailing(errServer)
		b.apply(t, warning("a.example"))
		time.Sleep(14 * time.Minute)
		synctest.Wait()
		if got := b.rec["oncall"].take(); len(got) != 0 {
			t.Fatalf("oncall told %v before alert_after", describe(got))
		}
		if h := b.n.Health()[0]; h.FailingSince != start || !strings.Contains(h.LastError, "http 500") {
			t.Errorf("certs health = %+v, want failing since the first attempt", h)
		}
		// The next attempt after alert_after (backoff is at most 5m) raises
		// the alert.
		time.Sleep(6 * time.Minute)
		synctest.Wait()
		got := b.rec["oncall"].take()
		if len(got) != 1 || got[0].n.Finding.Kind != policy.ChannelFailing || got[0].n.Finding.Name != "certs" {
			t.Fatalf("oncall got %v, want one channel_failing alert about certs", describe(got))
		}
		if !strings.Contains(got[0].n.Finding.Message, "http 500") || !strings.Contains(got[0].n.Finding.Message, "Nothing is lost") {
			t.Errorf("alert message %q should carry the error and say nothing is lost", got[0].n.Finding.Message)
		}
		// Down for hours: no second alert, nothing dropped.
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if got := b.rec["oncall"].take(); len(got) != 0 {
			t.Errorf("oncall got %v during the outage, want the one alert only", describe(got))
		}
		b.rec["certs"].setFailing(nil)
		time.Sleep(6 * time.Minute)
		synctest.Wait()
		if got := describe(b.rec["certs"].take()); !cmp.Equal(got, []string{"new warning a.example"}) {
			t.Errorf("certs after recovery got %v, want the held notification", got)
		}
		got = b.rec["oncall"].take()
		if len(got) != 1 || got[0].n.Event != notify.EventResolved || got[0].n.Key != "channel_failing:certs" {
			t.Errorf("oncall after recovery got %v, want the alert resolved", describe(got))
		}
	})
}

func TestRefusedNotificationDoesNotBlockTheChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, notify.Retry{Initial: time.Second, Max: time.Minute, AlertAfter: time.Hour})
		defer b.stop()
		b.rec["certs"].fail(notify.Permanent(errors.New("slack certs chat.postMessage #certs: msg_too_long")))
		b.apply(t, warning("a.example"), warning("b.example"))
		synctest.Wait()
		if got := describe(b.rec["certs"].take()); !cmp.Equal(got, []string{"new warning b.example"}) {
			t.Errorf("certs got %v, want the second one delivered", got)
		}
		stats, err := b.store.OutboxStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stats {
			if s.Channel == "certs" && (s.Failed != 1 || s.Pending != 0) {
				t.Errorf("certs outbox = %+v, want one failed, none pending", s)
			}
		}
		// Refused at once is reported at once, and resolved by the next
		// delivery that works.
		got := describe(b.rec["oncall"].take())
		want := []string{"new warning notification channel certs", "resolved warning notification channel certs (thread)"}
		if !cmp.Equal(got, want) {
			t.Errorf("oncall got %v, want %v", got, want)
		}
	})
}

// TestChannelDownHoldsItsNotifications: a channel the service refuses as
// a whole (a revoked token, a bot not in the channel) loses nothing: its
// notifications wait, are tried again every retry.max, the other channels
// hear at once, the refusal is logged at Error once, and everything goes
// out when the channel is fixed.
func TestChannelDownHoldsItsNotifications(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &syncBuffer{}
		logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		b := startBubbleWith(t, notify.Retry{Initial: time.Second, Max: 5 * time.Minute, AlertAfter: time.Hour}, nil, logger)
		defer b.stop()
		start := time.Now()
		refusal := notify.ChannelDown(errors.New("slack certs chat.postMessage #certs: not_in_channel: invite the bot to the channel (/invite @bot)"))
		b.rec["certs"].setFailing(refusal)
		b.apply(t, warning("a.example"), warning("b.example"))
		synctest.Wait()
		got := b.rec["oncall"].take()
		if len(got) != 1 || got[0].n.Finding.Kind != policy.ChannelFailing || !strings.Contains(got[0].n.Finding.Message, "invite the bot") {
			t.Fatalf("oncall got %v at once, want one channel_failing alert about certs that says what to do", describe(got))
		}
		if got[0].at != start {
			t.Errorf("channel_failing sent %v after the refusal, want at once", got[0].at.Sub(start))
		}

		time.Sleep(time.Hour)
		synctest.Wait()
		r := b.rec["certs"]
		r.mu.Lock()
		attempts := slices.Clone(r.attempts)
		r.mu.Unlock()
		if len(attempts) < 2 || len(attempts) > 13 {
			t.Errorf("%d attempts in an hour, want one every retry.max (5m)", len(attempts))
		}
		for i := 1; i < len(attempts); i++ {
			if gap := attempts[i].Sub(attempts[i-1]); gap < 5*time.Minute {
				t.Errorf("attempt %d came %v after the previous one, want at least retry.max (5m)", i, gap)
			}
		}
		stats, err := b.store.OutboxStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stats {
			if s.Channel == "certs" && (s.Pending != 2 || s.Failed != 0 || !strings.Contains(s.LastError, "not_in_channel")) {
				t.Errorf("certs outbox = %+v, want both notifications pending, none failed", s)
			}
		}
		if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "invite the bot") {
			t.Errorf("%d Error lines, want the refusal logged once with its hint; logs:\n%s", n, logs.String())
		}
		if got := b.rec["oncall"].take(); len(got) != 0 {
			t.Errorf("oncall got %v while certs was down, want the one alert only", describe(got))
		}

		b.rec["certs"].setFailing(nil)
		time.Sleep(6 * time.Minute)
		synctest.Wait()
		if got := describe(b.rec["certs"].take()); !cmp.Equal(got, []string{"new warning a.example", "new warning b.example"}) {
			t.Errorf("certs after the fix got %v, want both held notifications", got)
		}
		got = b.rec["oncall"].take()
		if len(got) != 1 || got[0].n.Event != notify.EventResolved || got[0].n.Key != "channel_failing:certs" {
			t.Errorf("oncall after the fix got %v, want the alert resolved", describe(got))
		}
		if h := b.n.Health()[0]; h.Refused != 0 || h.Delivered != 2 || !h.FailingSince.IsZero() {
			t.Errorf("certs health = %+v, want nothing refused, both delivered, healthy", h)
		}
	})
}

func TestRunDeliversWhatApplyWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, notify.Retry{})
		defer b.stop()
		time.Sleep(10 * time.Second) // Run is idle, waiting
		start := time.Now()
		b.apply(t, policy.Finding{Kind: policy.SelfSigned, Tier: policy.Page, Certificate: sha("p"), Subject: "p.example"})
		synctest.Wait()
		got := b.rec["oncall"].take()
		if len(got) != 1 || got[0].at != start {
			t.Errorf("oncall got %v, want the page at once", describe(got))
		}
	})
}

// flakySettle fails the first few attempts to record an outcome, as a disk
// briefly full would.
type flakySettle struct {
	state.Outbox
	mu    *sync.Mutex
	fails *int
}

func (f flakySettle) Settle(ctx context.Context, ids []int64, s state.Settlement) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *f.fails > 0 {
		*f.fails--
		return fmt.Errorf("record delivery: %w", state.ErrFull)
	}
	return f.Outbox.Settle(ctx, ids, s)
}

func TestUnrecordedDeliveryIsNotSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fails := 3
		b := startBubbleWith(t, notify.Retry{}, func(s state.Outbox) state.Outbox {
			return flakySettle{Outbox: s, mu: &sync.Mutex{}, fails: &fails}
		}, nil)
		defer b.stop()
		b.apply(t, warning("a.example"), warning("b.example"))
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := describe(b.rec["certs"].take()); !cmp.Equal(got, []string{"new warning a.example", "new warning b.example"}) {
			t.Errorf("certs got %v, want each once despite the store failing to record", got)
		}
		if p, err := b.store.Pending(context.Background(), "certs", 10); err != nil || len(p) != 0 {
			t.Errorf("pending after recovery = %v, %v, want none", p, err)
		}
	})
}

// gate is a Sender that holds every delivery until opened, and counts what
// it delivered per key: the outside world shared by two processes.
type gate struct {
	open chan struct{}
	mu   sync.Mutex
	sent map[string]int
}

func (g *gate) Send(ctx context.Context, n notify.Notification) (string, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sent[n.Key]++
	return "", nil
}

// TestTwoProcessesDeliverEachNotificationOnce: `certwatch scan --notify`
// flushing the outbox while the daemon is delivering it must not send what
// the daemon is sending; it waits until the daemon has delivered it.
func TestTwoProcessesDeliverEachNotificationOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		cfg := notify.Config{
			Channels: []notify.Channel{{Name: "certs"}},
			Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs"}}},
		}
		g := &gate{open: make(chan struct{}), sent: map[string]int{}}
		process := func() *notify.Notifier {
			store, err := sqlite.Open(context.Background(), path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			n, err := notify.New(cfg, store, map[string]notify.Sender{"certs": g}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		daemon, scan := process(), process()
		if _, err := daemon.Apply(context.Background(), notify.Sweep{Findings: []policy.Finding{warning("a.example")}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { daemon.Run(ctx) })
		synctest.Wait() // the daemon is sending a.example
		var flushErr error
		wg.Go(func() {
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			flushErr = scan.Flush(fctx)
		})
		synctest.Wait()
		close(g.open)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		cancel()
		wg.Wait()
		if flushErr != nil {
			t.Errorf("Flush while the daemon delivers = %v, want nil once the daemon has delivered", flushErr)
		}
		if got := g.sent[notify.AlertID(warning("a.example"))]; got != 1 {
			t.Errorf("a.example delivered %d times, want once", got)
		}
	})
}

// TestFlushDoesNotWaitForAChannelThatIsDown: `certwatch scan --notify`
// does not wait retry.max for a channel the service refuses; it says so,
// still tells the other channels, and the next run after the fix delivers
// what was held.
func TestFlushDoesNotWaitForAChannelThatIsDown(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	h.rec["oncall"].setFailing(notify.ChannelDown(errors.New("pagerduty oncall trigger: http 400: invalid event: 'routing_key' is invalid: check the routing key")))
	p := cert{subject: "p.example.com", notAfter: t0.Add(5 * day), eps: eps("p.example.com")}
	h.clock.Set(t0)
	if _, err := h.n.Apply(context.Background(), sweep(t0, p), t0); err != nil {
		t.Fatal(err)
	}
	err := h.n.Flush(context.Background())
	if !notify.IsChannelDown(err) || !strings.Contains(err.Error(), "channel oncall refuses delivery, 1 notifications kept") || !strings.Contains(err.Error(), "check the routing key") {
		t.Errorf("Flush = %v, want oncall reported down with what it keeps and the hint", err)
	}
	if d := c.Now().Sub(t0); d > time.Minute {
		t.Errorf("Flush waited %v for a channel that is down", d)
	}
	want := map[string][]string{
		"certs":     {"new warning notification channel oncall"},
		"incidents": {"new warning notification channel oncall"},
		"team-a":    {"new warning notification channel oncall"},
	}
	if diff := cmp.Diff(want, h.took()); diff != "" {
		t.Errorf("while oncall is down (-want +got):\n%s", diff)
	}

	h.rec["oncall"].setFailing(nil)
	h.restart()
	h.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), p))
	want = map[string][]string{
		"oncall":    {"new page p.example.com"},
		"certs":     {"resolved warning notification channel oncall (thread)"},
		"incidents": {"resolved warning notification channel oncall (thread)"},
		"team-a":    {"resolved warning notification channel oncall (thread)"},
	}
	if diff := cmp.Diff(want, h.took()); diff != "" {
		t.Errorf("after the fix (-want +got):\n%s", diff)
	}
}

// decodedKept is a store that notes, for every update, how many of the
// snapshot's open alerts have a finding (decoded or given) and the
// changes written.
type decodedKept struct {
	state.Outbox
	mu      sync.Mutex
	decoded []int
	changes []state.Changes
}

func (d *decodedKept) Update(ctx context.Context, fn func(state.Snapshot) (state.Changes, error)) error {
	return d.UpdateWith(ctx, nil, fn)
}

func (d *decodedKept) UpdateWith(ctx context.Context, current state.Current, fn func(state.Snapshot) (state.Changes, error)) error {
	return d.Outbox.UpdateWith(ctx, current, func(s state.Snapshot) (state.Changes, error) {
		n := 0
		for _, a := range s.Alerts {
			if a.Finding.Kind != "" {
				n++
			}
		}
		ch, err := fn(s)
		d.mu.Lock()
		d.decoded, d.changes = append(d.decoded, n), append(d.changes, ch)
		d.mu.Unlock()
		return ch, err
	})
}

// TestChannelAlertReadAlone: raising and resolving a channel's
// channel_failing alert reads that alert's finding alone, not every open
// alert's: a fleet has tens of thousands.
func TestChannelAlertReadAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var kept *decodedKept
		b := startBubbleWith(t, notify.Retry{Initial: time.Second, Max: time.Minute, AlertAfter: time.Hour}, func(s state.Outbox) state.Outbox {
			kept = &decodedKept{Outbox: s}
			return kept
		}, nil)
		defer b.stop()
		b.apply(t, warning("a.example"), warning("b.example"), warning("c.example"))
		synctest.Wait()
		b.rec["certs"].fail(notify.Permanent(errors.New("slack certs chat.postMessage #certs: msg_too_long")))
		b.apply(t, warning("a.example"), warning("b.example"), warning("c.example"), warning("d.example"))
		synctest.Wait()
		b.apply(t, warning("a.example"), warning("b.example"), warning("c.example"), warning("d.example"), warning("e.example"))
		synctest.Wait()
		if got := describe(b.rec["oncall"].take()); !slices.Contains(got, "resolved warning notification channel certs (thread)") {
			t.Fatalf("oncall got %v, want the channel's failure raised and resolved", got)
		}
		kept.mu.Lock()
		defer kept.mu.Unlock()
		seen := 0
		for i, ch := range kept.changes {
			for _, a := range ch.Alerts {
				if a.Finding.Kind != policy.ChannelFailing {
					continue
				}
				seen++
				if want := map[bool]int{false: 0, true: 1}[!a.Open()]; kept.decoded[i] != want {
					t.Errorf("update writing the channel alert (open %v) read %d open alerts' findings, want %d", a.Open(), kept.decoded[i], want)
				}
			}
		}
		if seen != 2 {
			t.Errorf("the channel alert was written %d times, want raised once and resolved once", seen)
		}
	})
}

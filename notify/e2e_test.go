package notify_test

// End-to-end tests: the real slack-go client and the PagerDuty sender
// against local servers speaking Slack's Web API and the Events API v2,
// state in a SQLite file, and a new process (store and notifier) for every
// run, as `certwatch scan --notify` from cron would be.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/pagerdutytest"
	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/pagerduty"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/sqlite"
)

const (
	slackToken = "xoxb-4242-4242-S3CRETslacktoken"
	routingKey = "PDR0UT1NGK3Y0000000000000000abcd"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// world is certwatch with Slack (#certs, #incidents) and PagerDuty.
type world struct {
	t   *testing.T
	cfg notify.Config
	// state is the state file; slackCh and pdCh are the channels' own
	// settings, by channel name.
	state   string
	slackCh map[string]slack.Config
	pdCh    map[string]pagerduty.Config
	slack   *slacktest.Server
	pd      *pagerdutytest.Server
	clock   *clock
	logs    *syncBuffer
	// wrap, when set, wraps the store of the next process.
	wrap  func(state.Outbox) state.Outbox
	store *sqlite.Store
	n     *notify.Notifier
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{
		t:     t,
		slack: slacktest.New(t, slackToken, "#certs", "#incidents"),
		pd:    pagerdutytest.New(t, routingKey),
		clock: newClock(t0),
		logs:  &syncBuffer{},
	}
	w.state = filepath.Join(t.TempDir(), "state.db")
	w.slackCh = map[string]slack.Config{
		"certs":     {Name: "certs", Channel: "#certs", Token: slackToken, APIURL: w.slack.URL()},
		"incidents": {Name: "incidents", Channel: "#incidents", Token: slackToken, APIURL: w.slack.URL()},
	}
	w.pdCh = map[string]pagerduty.Config{"oncall": {Name: "oncall", RoutingKey: routingKey, URL: w.pd.URL()}}
	w.cfg = notify.Config{
		Channels: []notify.Channel{
			{Name: "certs", Rate: notify.DefaultSlackRate},
			{Name: "incidents", Rate: notify.DefaultSlackRate},
			{Name: "oncall", Rate: notify.DefaultPagerDutyRate, KeepsIncidents: true},
		},
		Routes: []notify.Route{
			{Tiers: []policy.Tier{policy.Notice}, Channels: []string{"certs"}, Digest: true},
			{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs"}},
			{Tiers: []policy.Tier{policy.Page}, Channels: []string{"oncall"}},
			{Tiers: []policy.Tier{policy.Critical}, Channels: []string{"oncall", "incidents"}},
		},
		Retry: notify.Retry{Initial: time.Second, Max: time.Minute, AlertAfter: 10 * time.Minute},
	}
	t.Cleanup(w.stop)
	return w
}

// start is a new certwatch process on the state file.
func (w *world) start() {
	w.t.Helper()
	w.stop()
	logger := slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	store, err := sqlite.Open(context.Background(), w.state, sqlite.Options{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.store = store
	senders := map[string]notify.Sender{}
	var workspace []*slack.Sender
	for _, c := range w.cfg.Channels {
		if c, ok := w.slackCh[c.Name]; ok {
			s, err := slack.New(c, nil)
			if err != nil {
				w.t.Fatal(err)
			}
			s.RunbookURL = "https://wiki.example/certs"
			s.Now = w.clock.Now
			senders[c.Name] = s
			workspace = append(workspace, s)
		}
		if c, ok := w.pdCh[c.Name]; ok {
			s, err := pagerduty.New(c, nil)
			if err != nil {
				w.t.Fatal(err)
			}
			senders[c.Name] = s
		}
	}
	slack.Share(workspace...)
	var st state.Outbox = store
	if w.wrap != nil {
		st = w.wrap(store)
	}
	w.n, err = notify.New(w.cfg, st, senders, logger)
	if err != nil {
		w.t.Fatal(err)
	}
	w.n.Now, w.n.After = w.clock.Now, w.clock.After
}

func (w *world) stop() {
	if w.store != nil {
		w.store.Close()
		w.store, w.n = nil, nil
	}
}

// run is one `certwatch scan --notify`: a fresh process applies the sweep
// and flushes the outbox.
func (w *world) run(at time.Time, sw notify.Sweep) {
	w.t.Helper()
	w.start()
	w.clock.Set(at)
	if _, err := w.n.Apply(context.Background(), sw, at); err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.n.Flush(ctx); err != nil {
		w.t.Fatal(err)
	}
	w.stop()
}

func texts(ms []slacktest.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestEndToEndWalkAcrossRestarts is the walk-through of the issue over the
// wire: a certificate from 40 days before expiry to its renewal, one
// process per run, twice a day.
func TestEndToEndWalkAcrossRestarts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	old := cert{subject: "api.internal.example", notAfter: t0.Add(40 * day), eps: eps("api.internal.example", "api.internal.example", "gw.internal.example")}
	renewed := cert{subject: "api.internal.example", notAfter: t0.Add(400 * day), eps: old.eps}
	at := t0
	for ; at.Before(old.notAfter.Add(12 * time.Hour)); at = at.Add(12 * time.Hour) {
		w.run(at, sweep(at, old))
	}
	w.run(at, sweep(at, renewed))
	for end := at.Add(3 * day); at.Before(end); at = at.Add(12 * time.Hour) {
		w.run(at, sweep(at, renewed))
	}

	// #certs: the notice in a digest (and weekly reminders there), one
	// message at warning whose thread carries the daily reminders, the
	// escalations and the resolution, with the header edited to match.
	equalLines(t, "#certs top level", texts(w.slack.TopLevel("#certs")), []string{
		"certwatch digest: 1 item",
		"certwatch digest: 1 item",
		"certwatch digest: 1 item",
		"RESOLVED: api.internal.example (was critical): certificate replaced on api.internal.example:443 (10.0.0.1) by api.internal.example (" + renewed.sha()[:12] + "), valid until 2031-02-05",
		"Reminder, warning: api.internal.example: certificate expires in 13 days",
		"Reminder, warning: api.internal.example: certificate expires in 12 days",
		"Reminder, warning: api.internal.example: certificate expires in 11 days",
		"Reminder, warning: api.internal.example: certificate expires in 10 days",
		"Reminder, warning: api.internal.example: certificate expires in 9 days",
		"Reminder, warning: api.internal.example: certificate expires in 8 days",
		"PAGE (was warning): api.internal.example: certificate expires in 7 days",
		"CRITICAL (was page): api.internal.example: certificate expires in 2 days",
	})
	top := w.slack.TopLevel("#certs")
	original := top[3]
	thread := w.slack.Thread("#certs", original.TS)
	if len(thread) != 9 || original.Edits != 9 || !strings.HasPrefix(thread[8].Text, "RESOLVED") {
		t.Errorf("#certs thread has %d replies, original edited %d times, want 9 and 9 ending in the resolution", len(thread), original.Edits)
	}
	if !strings.Contains(original.Blocks, "*Issuer*\\nExample Test CA") {
		t.Errorf("finding message does not name the issuer: %s", original.Blocks)
	}
	if !strings.Contains(top[0].Blocks, "notice") || !strings.Contains(top[1].Blocks, "still open") {
		t.Errorf("digests do not show the notice and its reminder: %s / %s", top[0].Blocks, top[1].Blocks)
	}

	// #incidents: only critical, then resolved in its thread.
	inc := w.slack.TopLevel("#incidents")
	if len(inc) != 1 || !strings.HasPrefix(inc[0].Text, "RESOLVED") {
		t.Errorf("#incidents top level = %q, want the one critical message, now resolved", texts(inc))
	}
	equalLines(t, "#incidents thread", texts(w.slack.Thread("#incidents", inc[0].TS)), []string{
		"RESOLVED: api.internal.example (was critical): certificate replaced on api.internal.example:443 (10.0.0.1) by api.internal.example (" + renewed.sha()[:12] + "), valid until 2031-02-05",
	})

	// PagerDuty: triggered at page (severity warning), re-triggered at
	// critical, resolved on renewal: one alert, paged once.
	var evs []string
	for _, e := range w.pd.Events() {
		evs = append(evs, fmt.Sprintf("%s %s %s %d", e.EventAction, e.DedupKey, e.Payload.Severity, e.Status))
	}
	key := pagerduty.DedupKey(notify.AlertID(policy.Finding{Kind: policy.Expiring, Certificate: old.sha()}))
	equalLines(t, "pagerduty events", evs, []string{
		"trigger " + key + " warning 202",
		"trigger " + key + " critical 202",
		"resolve " + key + "  202",
	})
	if a := w.pd.Alerts(); len(a) != 1 || a[0].Opened != 1 || a[0].Status != "resolved" {
		t.Errorf("pagerduty alerts = %+v, want one, opened once, resolved", a)
	}
	assertNoSecrets(t, w)
}

func TestEndToEndCrashBeforeDeliveryDeliversOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := cert{subject: "db.internal.example", notAfter: t0.Add(36 * time.Hour), eps: eps("db.internal.example")}
	// The process writes the transitions and dies before delivering.
	w.start()
	if _, err := w.n.Apply(context.Background(), sweep(t0, c), t0); err != nil {
		t.Fatal(err)
	}
	w.stop()
	if n := len(w.slack.Calls()) + len(w.pd.Events()); n != 0 {
		t.Fatalf("%d requests before any delivery", n)
	}
	// Restart: delivered once. Another restart: nothing more.
	for range 2 {
		w.start()
		w.clock.Set(t0.Add(time.Minute))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.n.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		w.stop()
	}
	if got := len(w.slack.TopLevel("#incidents")); got != 1 {
		t.Errorf("#incidents has %d messages, want 1", got)
	}
	if got := len(w.pd.Events()); got != 1 {
		t.Errorf("pagerduty got %d events, want 1", got)
	}
}

// crashAfterSend is a store whose process dies right after a delivery
// succeeds and before it is recorded.
type crashAfterSend struct {
	state.Outbox
	cancel context.CancelFunc
}

func (c crashAfterSend) Settle(ctx context.Context, ids []int64, s state.Settlement) error {
	if s.Delivered {
		c.cancel()
		return errors.New("process killed")
	}
	return c.Outbox.Settle(ctx, ids, s)
}

func TestEndToEndCrashAfterDeliveryDoesNotPageTwice(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := cert{subject: "db.internal.example", notAfter: t0.Add(5 * day), eps: eps("db.internal.example")}
	ctx, cancel := context.WithCancel(context.Background())
	w.wrap = func(s state.Outbox) state.Outbox { return crashAfterSend{Outbox: s, cancel: cancel} }
	w.start()
	if _, err := w.n.Apply(ctx, sweep(t0, c), t0); err != nil {
		t.Fatal(err)
	}
	_ = w.n.Flush(ctx) // dies after PagerDuty accepted the trigger
	w.stop()
	w.wrap = nil
	w.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), c))

	evs := w.pd.Events()
	if len(evs) != 2 || evs[0].DedupKey != evs[1].DedupKey {
		t.Fatalf("pagerduty got %d events, want the trigger and its retry with the same dedup key", len(evs))
	}
	if a := w.pd.Alerts(); len(a) != 1 || a[0].Opened != 1 {
		t.Errorf("pagerduty alerts = %+v, want one alert, paged once", a)
	}
}

func TestEndToEndRateLimitsAndServerErrorsAreRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var mu sync.Mutex
	var seen []time.Time
	// The first three posts fail (the looks at the history that precede
	// each retry, for a post that may have gone through, succeed).
	script := []slacktest.Response{{Status: 429, RetryAfter: "20"}, {Status: 500}, {Status: 503}}
	w.slack.SetHook(func(c slacktest.Call) (slacktest.Response, bool) {
		if c.Method != "chat.postMessage" {
			return slacktest.Response{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, w.clock.Now())
		if len(seen) <= len(script) {
			return script[len(seen)-1], true
		}
		return slacktest.Response{}, false
	})
	w.pd.Script(pagerdutytest.Response{Status: 500}, pagerdutytest.Response{Status: 429, RetryAfter: "30"}, pagerdutytest.Response{Status: 502})
	c := cert{subject: "edge.example.com", notAfter: t0.Add(36 * time.Hour), eps: eps("edge.example.com")}
	w.run(t0, sweep(t0, c))

	if got := len(w.slack.TopLevel("#incidents")); got != 1 {
		t.Errorf("#incidents has %d messages, want exactly 1 after the retries", got)
	}
	if len(seen) != 4 || seen[1].Sub(seen[0]) < 20*time.Second {
		t.Errorf("slack attempts at %v, want 4 with the second at least 20s (Retry-After) after the first", seen)
	}
	evs := w.pd.Events()
	if len(evs) != 4 || evs[3].Status != 202 || w.pd.Alerts()[0].Opened != 1 {
		t.Errorf("pagerduty got %d events, want 3 failures and one accepted trigger", len(evs))
	}
	if !strings.Contains(w.logs.String(), `"msg":"delivery failed, will retry"`) {
		t.Error("retries were not logged")
	}
	// The delay is logged for humans ("22s"), not in nanoseconds.
	if !regexp.MustCompile(`"retry_in":"[0-9.]+[mµn]?s"`).MatchString(w.logs.String()) {
		t.Errorf("retry delays not logged as durations:\n%s", w.logs.String())
	}
}

func TestEndToEndLongOutageLosesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	down := true
	var mu sync.Mutex
	certsID := w.slack.ChannelID("#certs")
	w.slack.SetHook(func(c slacktest.Call) (slacktest.Response, bool) {
		mu.Lock()
		defer mu.Unlock()
		if down && (c.Channel == "#certs" || c.Channel == certsID) {
			return slacktest.Response{Status: 503}, true
		}
		return slacktest.Response{}, false
	})
	a := cert{subject: "a.example.com", notAfter: t0.Add(10 * day), eps: eps("a.example.com")}
	b := cert{subject: "b.example.com", notAfter: t0.Add(12 * day), eps: eps("b.example.com")}
	// Slack is down for two days of runs, every six hours; each run gives
	// up after its flush deadline and leaves the rest queued.
	for i := range 8 {
		at := t0.Add(time.Duration(i) * 6 * time.Hour)
		certs := []cert{a}
		if i >= 2 {
			certs = append(certs, b)
		}
		if i == 5 {
			a.notAfter = a.notAfter.Add(365 * day) // renewed while Slack is down
		}
		w.start()
		w.clock.Set(at)
		if _, err := w.n.Apply(context.Background(), sweep(at, certs...), at); err != nil {
			t.Fatal(err)
		}
		// The flush gives up after a quarter of an hour (on the test clock).
		ctx, cancel := context.WithCancelCause(context.Background())
		w.clock.Alarm(at.Add(15*time.Minute), func() { cancel(errors.New("flush budget of 15m spent")) })
		err := w.n.Flush(ctx)
		cancel(nil)
		if err == nil || !strings.Contains(err.Error(), "still queued") || !strings.Contains(err.Error(), "flush budget of 15m spent") {
			t.Fatalf("run %d: Flush during the outage = %v, want it to report what is still queued and why it stopped", i, err)
		}
		w.stop()
	}
	mu.Lock()
	down = false
	mu.Unlock()
	w.run(t0.Add(2*day), sweep(t0.Add(2*day), a, b))

	// Everything queued in two days arrives, in order: both warnings, the
	// daily reminders (broadcast from their threads), and a's renewal
	// (in a's thread, its header edited).
	equalLines(t, "#certs top level", texts(w.slack.TopLevel("#certs")), []string{
		"RESOLVED: a.example.com (was warning): certificate replaced on a.example.com:443 (10.0.0.1) by a.example.com (" + a.sha()[:12] + "), valid until 2031-01-11",
		"WARNING: b.example.com: certificate expires in 11 days", // edited by the reminder; calendar days to 2030-01-13
		"Reminder, warning: a.example.com: certificate expires in 9 days",
		"Reminder, warning: b.example.com: certificate expires in 11 days",
	})
	// PagerDuty and #incidents heard that #certs was failing, once, and
	// that it recovered.
	var evs []string
	for _, e := range w.pd.Events() {
		evs = append(evs, e.EventAction+" "+e.Payload.Summary)
	}
	equalLines(t, "pagerduty", evs, []string{"trigger WARNING: notification channel certs: notifications cannot be delivered", "resolve "})
	equalLines(t, "#incidents", texts(w.slack.TopLevel("#incidents")), []string{"RESOLVED: notification channel certs (was warning): channel certs delivers again"})
}

func TestEndToEndStormIsOneMessage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var certs []cert
	for i := range 500 {
		name := fmt.Sprintf("node%03d.internal.example", i)
		certs = append(certs, cert{subject: name, notAfter: t0.Add(5 * day), eps: eps(name)})
	}
	w.run(t0, sweep(t0, certs...))
	if evs := w.pd.Events(); len(evs) != 1 || !strings.HasPrefix(evs[0].Payload.Summary, "certwatch: 500 notifications at once") {
		t.Errorf("pagerduty got %d events (%v), want one summary", len(evs), evs)
	}
	if n := len(w.slack.Calls()); n != 0 {
		t.Errorf("slack got %d calls, want none (pages go to PagerDuty only)", n)
	}
	openIncidents := func() []string {
		var out []string
		for _, a := range w.pd.Alerts() {
			if a.Status != "resolved" {
				out = append(out, a.Summary)
			}
		}
		return out
	}
	// The summary's incident stands for the 500 pages: it stays open
	// through quiet runs and while any of them is open.
	w.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), certs...))
	for i := range certs[:499] {
		certs[i].notAfter = certs[i].notAfter.Add(400 * day)
	}
	w.run(t0.Add(2*time.Hour), sweep(t0.Add(2*time.Hour), certs...))
	if got := openIncidents(); len(got) != 1 || !strings.HasPrefix(got[0], "certwatch: 500 notifications at once") {
		t.Errorf("open incidents with one page left = %q, want the summary's", got)
	}
	// The last one renewed: the summary's incident resolves.
	certs[499].notAfter = certs[499].notAfter.Add(400 * day)
	w.run(t0.Add(3*time.Hour), sweep(t0.Add(3*time.Hour), certs...))
	if got := openIncidents(); len(got) != 0 {
		t.Errorf("open incidents after every page resolved = %q, want none", got)
	}
	evs := w.pd.Events()
	if last := evs[len(evs)-1]; last.EventAction != "resolve" || last.DedupKey != evs[0].DedupKey {
		t.Errorf("last event = %s %s, want a resolve of the summary's dedup_key %s", last.EventAction, last.DedupKey, evs[0].DedupKey)
	}
	if n := len(evs); n != 2 {
		t.Errorf("pagerduty got %d events, want the summary's trigger and resolve only", n)
	}
	// Nothing more: the summary's alert is closed.
	w.run(t0.Add(4*time.Hour), sweep(t0.Add(4*time.Hour), certs...))
	if n := len(w.pd.Events()); n != 2 {
		t.Errorf("pagerduty got %d events after a quiet run, want still 2", n)
	}
}

// TestStormSummaryResolvesWhenItsAlertsHaveTheirOwn: alerts told only in a
// summary that later escalate get incidents of their own, and the summary's
// incident, which no longer stands for anything, resolves.
func TestStormSummaryResolvesWhenItsAlertsHaveTheirOwn(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var certs []cert
	for i := range 25 {
		// 15 expire a day before the other 10.
		name := fmt.Sprintf("node%03d.internal.example", i)
		certs = append(certs, cert{subject: name, notAfter: t0.Add(time.Duration(5+i/15) * day), eps: eps(name)})
	}
	w.run(t0, sweep(t0, certs...))
	open := func() (summary bool, own int) {
		for _, a := range w.pd.Alerts() {
			switch {
			case a.Status == "resolved":
			case strings.HasPrefix(a.Summary, "certwatch:"):
				summary = true
			default:
				own++
			}
		}
		return summary, own
	}
	if summary, own := open(); !summary || own != 0 {
		t.Fatalf("after the storm: summary open %v, %d incidents of their own, want only the summary", summary, own)
	}
	// 15 escalate to critical, each with an incident of its own; the
	// summary still stands for the other 10.
	at := t0.Add(3*day + 12*time.Hour)
	w.run(at, sweep(at, certs...))
	if summary, own := open(); !summary || own != 15 {
		t.Errorf("after 15 escalations: summary open %v, %d incidents of their own, want the summary and 15", summary, own)
	}
	// The other 10 escalate: the summary stands for nothing any more.
	at = at.Add(day)
	w.run(at, sweep(at, certs...))
	if summary, own := open(); summary || own != 25 {
		t.Errorf("after all escalated: summary open %v, %d incidents of their own, want the summary resolved and 25", summary, own)
	}
}

// assertNoSecrets checks the logs and the state file for the token and the
// routing key.
func assertNoSecrets(t *testing.T, w *world) {
	t.Helper()
	logs := w.logs.String()
	if logs == "" {
		t.Error("no logs captured")
	}
	db, err := os.ReadFile(w.state)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{slackToken, routingKey} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain a secret")
		}
		if bytes.Contains(db, []byte(secret)) {
			t.Errorf("state file contains a secret")
		}
	}
}

func TestSecretsNeverReachLogsOrState(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// Every failure path: rate limit, server errors, a refused message, a
	// refused channel whose answer echoes the routing key.
	w.slack.Script(slacktest.Response{Status: 429, RetryAfter: "1"}, slacktest.Response{Status: 500}, slacktest.Response{Error: "msg_too_long"})
	w.pd.Script(pagerdutytest.Response{Status: 400, Body: `{"status":"invalid event","message":"routing key ` + routingKey + ` is disabled"}`})
	c := cert{subject: "s.example.com", notAfter: t0.Add(36 * time.Hour), eps: eps("s.example.com")}
	d := cert{subject: "t.example.com", notAfter: t0.Add(36 * time.Hour), eps: eps("t.example.com")}
	w.start()
	if _, err := w.n.Apply(context.Background(), sweep(t0, c, d), t0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := w.n.Flush(ctx)
	if !notify.IsChannelDown(err) || strings.Contains(err.Error(), routingKey) {
		t.Errorf("Flush = %v, want oncall reported down, without the routing key", err)
	}
	if err := w.n.Test(context.Background(), "oncall"); err != nil {
		t.Fatal(err)
	}
	stats, err := w.store.OutboxStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w.stop()
	for _, msg := range []string{"notification refused", "notification channel refuses delivery"} {
		if !strings.Contains(w.logs.String(), msg) {
			t.Fatalf("%q was not logged; logs:\n%s", msg, w.logs.String())
		}
	}
	for _, s := range stats {
		if strings.Contains(s.LastError, routingKey) || strings.Contains(s.LastError, slackToken) {
			t.Errorf("outbox error for %s contains a secret", s.Channel)
		}
	}
	assertNoSecrets(t, w)
}

// BenchmarkDeliveryUnder429 measures notifications delivered per second to
// a Slack that allows 20 requests a second and answers 429 with
// Retry-After: 1 beyond that, in real time.
func BenchmarkDeliveryUnder429(b *testing.B) {
	const total, allowed = 100, 20
	for b.Loop() {
		api := slacktest.New(b, slackToken, "#certs")
		var mu sync.Mutex
		var window time.Time
		var inWindow, limited int
		api.SetHook(func(slacktest.Call) (slacktest.Response, bool) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			if now.Sub(window) >= time.Second {
				window, inWindow = now, 0
			}
			if inWindow >= allowed {
				limited++
				return slacktest.Response{Status: 429, RetryAfter: "1"}, true
			}
			inWindow++
			return slacktest.Response{}, false
		})
		path := filepath.Join(b.TempDir(), "state.db")
		cfg := notify.Config{
			Channels: []notify.Channel{{Name: "certs", Rate: 1000, Burst: 1000}},
			Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs"}}},
			Storm:    notify.Storm{MaxNewFindings: total},
		}
		store, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		s, _ := slack.New(slack.Config{Name: "certs", Channel: "#certs", Token: slackToken, APIURL: api.URL()}, nil)
		n, err := notify.New(cfg, store, map[string]notify.Sender{"certs": s}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var fs []policy.Finding
		for i := range total {
			fs = append(fs, warning(fmt.Sprintf("w%03d.example.com", i)))
		}
		if _, err := n.Apply(context.Background(), notify.Sweep{Findings: fs}, time.Now()); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := n.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		store.Close()
		if got := len(api.TopLevel("#certs")); got != total {
			b.Fatalf("delivered %d, want %d", got, total)
		}
		b.ReportMetric(float64(total)/elapsed.Seconds(), "notifications/s")
		b.ReportMetric(float64(limited), "429s")
	}
}

// TestEndToEndFleetRenewalResolvesEveryIncident: certificates paged one by
// one (each run under the storm cap) and then renewed together resolve
// their own PagerDuty incidents; a wave of resolutions is never turned into
// a summary, which PagerDuty would take as a new incident.
func TestEndToEndFleetRenewalResolvesEveryIncident(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var certs []cert
	for i := range 30 {
		name := fmt.Sprintf("fleet%02d.internal.example", i)
		certs = append(certs, cert{subject: name, notAfter: t0.Add(5 * day), eps: eps(name)})
	}
	w.run(t0, sweep(t0, certs[:15]...))
	w.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), certs...))
	if a := w.pd.Alerts(); len(a) != 30 {
		t.Fatalf("pagerduty has %d alerts before the renewal, want 30 paged one by one", len(a))
	}
	for i := range certs {
		certs[i].notAfter = certs[i].notAfter.Add(400 * day)
	}
	at := t0.Add(2 * time.Hour)
	w.run(at, sweep(at, certs...))
	alerts := w.pd.Alerts()
	open := 0
	for _, a := range alerts {
		if a.Status != "resolved" {
			open++
		}
	}
	if len(alerts) != 30 || open != 0 {
		t.Errorf("after the fleet renewal pagerduty has %d alerts, %d still open; want the 30, all resolved", len(alerts), open)
	}
}

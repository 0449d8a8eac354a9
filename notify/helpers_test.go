package notify_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
	"github.com/certwatch/certwatch/state/sqlite"
)

var t0 = time.Date(2030, 1, 1, 6, 0, 0, 0, time.UTC)

// clock is a manual clock whose After advances it at once: a Flush then
// waits out backoffs without real time passing.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	alarms []alarm
}

type alarm struct {
	at time.Time
	fn func()
}

// Alarm calls fn once the clock reaches at.
func (c *clock) Alarm(at time.Time, fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alarms = append(c.alarms, alarm{at, fn})
}

// ring calls the alarms that are due; c.mu is held.
func (c *clock) ring() {
	var keep []alarm
	for _, a := range c.alarms {
		if c.now.Before(a.at) {
			keep = append(keep, a)
		} else {
			a.fn()
		}
	}
	c.alarms = keep
}

func newClock(t time.Time) *clock { return &clock{now: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	c.ring()
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.ring()
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// sent is one notification a recorder received, with the time it arrived.
type sent struct {
	at time.Time
	n  notify.Notification
}

// recorder is an in-memory Sender: it records every attempt and fails the
// attempts its script says to.
type recorder struct {
	now func() time.Time

	mu       sync.Mutex
	got      []sent
	attempts []time.Time
	script   []error
	failing  error
}

func (r *recorder) Send(_ context.Context, n notify.Notification) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := time.Now()
	if r.now != nil {
		at = r.now()
	}
	r.attempts = append(r.attempts, at)
	if len(r.script) > 0 {
		err := r.script[0]
		r.script = r.script[1:]
		if err != nil {
			return "", err
		}
	} else if r.failing != nil {
		return "", r.failing
	}
	r.got = append(r.got, sent{at: at, n: n})
	return "ref:" + n.Key, nil
}

func (r *recorder) fail(errs ...error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = append(r.script, errs...)
}

func (r *recorder) setFailing(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = err
}

// take returns what arrived since the last take.
func (r *recorder) take() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

// describe renders notifications as "event tier key" lines for comparison.
func describe(ss []sent) []string {
	var out []string
	for _, s := range ss {
		n := s.n
		line := string(n.Event)
		switch n.Event {
		case notify.EventDigest, notify.EventSummary:
			var items []string
			for _, it := range n.Items {
				items = append(items, string(it.Event)+" "+it.Finding.Tier.String()+" "+it.Finding.Subject)
			}
			line += fmt.Sprintf(" %d [%s]", n.Total, strings.Join(items, ", "))
		default:
			line += " " + n.Finding.Tier.String() + " " + notify.Subject(n.Finding)
			if n.Ref != "" {
				line += " (thread)"
			}
		}
		out = append(out, line)
	}
	return out
}

func openStore(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// baseConfig routes as the issue describes: notices to #certs in the daily
// digest, warnings to #certs, pages to PagerDuty, critical to PagerDuty and
// #incidents; team-a's zone goes to its own channel instead.
func baseConfig(dir string) testConfig {
	return testConfig{
		State: filepath.Join(dir, "state.db"),
		Config: notify.Config{
			Channels: []notify.Channel{
				{Name: "certs"},
				{Name: "incidents"},
				{Name: "oncall"},
				{Name: "team-a"},
			},
			Routes: []notify.Route{
				{Tiers: []policy.Tier{policy.Notice}, Channels: []string{"certs"}, Digest: true},
				{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs"}},
				{Tiers: []policy.Tier{policy.Page}, Channels: []string{"oncall"}},
				{Tiers: []policy.Tier{policy.Critical}, Channels: []string{"oncall", "incidents"}},
				{Tiers: []policy.Tier{policy.Notice, policy.Warning, policy.Page, policy.Critical}, Channels: []string{"team-a"}, Zones: []string{"team-a.example"}},
			},
			Retry: notify.Retry{Initial: time.Second, Max: time.Minute},
		}}
}

// testConfig is a Notifier's configuration and the state file it keeps.
type testConfig struct {
	notify.Config
	State string
}

// harness is a Notifier on a SQLite file with recorders for every channel.
type harness struct {
	t     *testing.T
	cfg   testConfig
	clock *clock
	store *sqlite.Store
	n     *notify.Notifier
	rec   map[string]*recorder
	// logs receives the Notifier's log, at Debug level.
	logs *syncBuffer
	// wrap, when set, wraps the store the next restart's Notifier uses.
	wrap func(state.Outbox) state.Outbox
}

func newHarness(t *testing.T, cfg testConfig, c *clock) *harness {
	t.Helper()
	h := &harness{t: t, cfg: cfg, clock: c, rec: map[string]*recorder{}, logs: &syncBuffer{}}
	for _, ch := range cfg.Channels {
		h.rec[ch.Name] = &recorder{now: c.Now}
	}
	h.restart()
	return h
}

// restart opens the state file afresh with a new Notifier, as a new
// process would; recorders (the outside world) are kept.
func (h *harness) restart() {
	h.t.Helper()
	if h.store != nil {
		h.store.Close()
	}
	h.store = openStore(h.t, h.cfg.State)
	senders := map[string]notify.Sender{}
	for name, r := range h.rec {
		senders[name] = r
	}
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var st state.Outbox = h.store
	if h.wrap != nil {
		st = h.wrap(h.store)
	}
	n, err := notify.New(h.cfg.Config, st, senders, logger)
	if err != nil {
		h.t.Fatal(err)
	}
	n.Now, n.After = h.clock.Now, h.clock.After
	n.Rand = func() float64 { return 0.5 }
	h.n = n
}

// run applies one sweep at time at and flushes the outbox.
func (h *harness) run(at time.Time, sw notify.Sweep) notify.Report {
	h.t.Helper()
	h.clock.Set(at)
	rep, err := h.n.Apply(context.Background(), sw, at)
	if err != nil {
		h.t.Fatal(err)
	}
	h.flush()
	return rep
}

func (h *harness) flush() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.n.Flush(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// took returns every channel's new notifications, by channel, omitting
// channels that got none.
func (h *harness) took() map[string][]string {
	out := map[string][]string{}
	for name, r := range h.rec {
		if d := describe(r.take()); len(d) > 0 {
			out[name] = d
		}
	}
	return out
}

func sha(s string) string { return fmt.Sprintf("%064x", []byte(s)) }

// cert is a test certificate served at some endpoints.
type cert struct {
	subject  string
	notAfter time.Time
	eps      []policy.Endpoint
}

func (c cert) sha() string { return sha(c.subject + c.notAfter.String()) }

// finding is what policy reports for c at now, with the default tiers.
func (c cert) finding(now time.Time) (policy.Finding, bool) {
	tier := policy.TierFor(c.notAfter.AddDate(-1, 0, 0), c.notAfter, policy.DefaultRules().Tiers, now)
	kind := policy.Expiring
	if !c.notAfter.After(now) {
		kind = policy.Expired
	}
	if tier < policy.Notice {
		return policy.Finding{}, false
	}
	return policy.Finding{Kind: kind, Tier: tier, Certificate: c.sha(), Subject: c.subject, Deadline: policy.At(c.notAfter),
		Endpoints: c.eps, Message: "renew " + c.subject}, true
}

// sweep is what a run at now sees when certs are served.
func sweep(now time.Time, certs ...cert) notify.Sweep {
	var sw notify.Sweep
	for _, c := range certs {
		if f, ok := c.finding(now); ok {
			sw.Findings = append(sw.Findings, f)
		}
		sw.Certificates = append(sw.Certificates, policy.Certificate{SHA256: c.sha(), Subject: c.subject, Issuer: "Example Test CA", NotAfter: policy.At(c.notAfter)})
		for _, e := range c.eps {
			sw.Endpoints = append(sw.Endpoints, served(e, c.sha()))
		}
	}
	return sw
}

// served is e as a report lists it when it served the certificate sha.
func served(e policy.Endpoint, sha string) policy.Probed {
	return policy.Probed{Name: e.Name, Port: e.Port, Address: e.Address, Via: e.Via, Certificate: sha}
}

// failedWith is e as a report lists it when its probe failed with failure
// (a probes.Failure: "timeout" is unanswered, "refused" answered).
func failedWith(e policy.Endpoint, failure string) policy.Probed {
	return policy.Probed{Name: e.Name, Port: e.Port, Address: e.Address, Via: e.Via, Failed: &policy.Failed{Failure: failure, Error: failure}}
}

func eps(names ...string) []policy.Endpoint {
	var out []policy.Endpoint
	for i, n := range names {
		out = append(out, policy.Endpoint{Name: n, Port: 443, Address: fmt.Sprintf("10.0.0.%d", i+1)})
	}
	return out
}

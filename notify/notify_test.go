package notify_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

const day = 24 * time.Hour

// TestWalkToExpiryAndRenewal follows one certificate from 40 days before
// expiry, through expiry, to its renewal, with a run every twelve hours, and
// checks exactly which channel hears what: the notice in the next daily
// digest, the warning once, the page once, critical to PagerDuty and
// #incidents (with #certs's thread updated), nothing between steps, and the
// resolution on renewal to everyone who was told.
func TestWalkToExpiryAndRenewal(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	old := cert{subject: "api.example.com", notAfter: t0.Add(40 * day), eps: eps("api.example.com", "api.example.com")}
	renewed := cert{subject: "api.example.com", notAfter: t0.Add(400 * day), eps: old.eps}

	type step struct {
		at   time.Time
		want map[string][]string
	}
	var got []step
	for at := t0; at.Before(t0.Add(40*day + 12*time.Hour)); at = at.Add(12 * time.Hour) {
		h.run(at, sweep(at, old))
		if m := h.took(); len(m) > 0 {
			got = append(got, step{at, m})
		}
	}
	// Renewed half a day after expiry (certwatch keeps nagging until then).
	at := t0.Add(40*day + 12*time.Hour)
	h.run(at, sweep(at, renewed))
	if m := h.took(); len(m) > 0 {
		got = append(got, step{at, m})
	}
	// And quiet afterwards.
	for at := at.Add(12 * time.Hour); at.Before(t0.Add(44 * day)); at = at.Add(12 * time.Hour) {
		h.run(at, sweep(at, renewed))
		if m := h.took(); len(m) > 0 {
			got = append(got, step{at, m})
		}
	}

	want := []step{
		// Notice from day 10 (30 days left): in the digest, due at
		// midnight, sent by the first run after it.
		{t0.Add(11 * day), map[string][]string{"certs": {"digest 1 [new notice api.example.com]"}}},
		// Weekly notice reminders, in the digest.
		{t0.Add(18 * day), map[string][]string{"certs": {"digest 1 [reminder notice api.example.com]"}}},
		{t0.Add(25 * day), map[string][]string{"certs": {"digest 1 [reminder notice api.example.com]"}}},
		// Warning at 14 days left: its own message in #certs (the notice was
		// only a digest line, so there is no thread to continue).
		{t0.Add(26 * day), map[string][]string{"certs": {"escalated warning api.example.com"}}},
		// Daily warning reminders in the thread.
		{t0.Add(27 * day), map[string][]string{"certs": {"reminder warning api.example.com (thread)"}}},
		{t0.Add(28 * day), map[string][]string{"certs": {"reminder warning api.example.com (thread)"}}},
		{t0.Add(29 * day), map[string][]string{"certs": {"reminder warning api.example.com (thread)"}}},
		{t0.Add(30 * day), map[string][]string{"certs": {"reminder warning api.example.com (thread)"}}},
		{t0.Add(31 * day), map[string][]string{"certs": {"reminder warning api.example.com (thread)"}}},
		{t0.Add(32 * day), map[string][]string{"certs": {"reminder warning api.example.com (thread)"}}},
		// Page at 7 days: PagerDuty, and #certs's thread follows.
		{t0.Add(33 * day), map[string][]string{
			"certs":  {"escalated page api.example.com (thread)"},
			"oncall": {"new page api.example.com"},
		}},
		// Critical at 2 days: PagerDuty escalates, #incidents hears.
		{t0.Add(38 * day), map[string][]string{
			"certs":     {"escalated critical api.example.com (thread)"},
			"incidents": {"new critical api.example.com"},
			"oncall":    {"escalated critical api.example.com (thread)"},
		}},
		// Expiry itself is the same alert: no new page. Renewal resolves.
		{t0.Add(40*day + 12*time.Hour), map[string][]string{
			"certs":     {"resolved critical api.example.com (thread)"},
			"incidents": {"resolved critical api.example.com (thread)"},
			"oncall":    {"resolved critical api.example.com (thread)"},
		}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(step{})); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}

	alerts, err := h.store.Alerts(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 1 || alerts[0].Open() || !strings.HasPrefix(alerts[0].Resolution, "certificate replaced on api.example.com:443") {
		t.Errorf("alerts = %+v, want one, resolved by the replacement", alerts)
	}
}

func TestFlappingFindingResolvesAfterConsecutiveAbsences(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	cw := cert{subject: "flappy.example.com", notAfter: t0.Add(10 * day), eps: eps("flappy.example.com")}
	present, absent := sweep(t0, cw), notify.Sweep{}

	var got []string
	for i, sw := range []notify.Sweep{present, absent, present, absent, present, absent, absent, absent} {
		h.run(t0.Add(time.Duration(i)*time.Hour), sw)
		for _, line := range h.took()["certs"] {
			got = append(got, fmt.Sprintf("run %d: %s", i, line))
		}
	}
	want := []string{"run 0: new warning flappy.example.com", "run 6: resolved warning flappy.example.com (thread)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}

func TestReplacedCertificateResolvesAtOnce(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	old := cert{subject: "shop.example.com", notAfter: t0.Add(5 * day), eps: eps("shop.example.com", "www.example.com")}
	h.run(t0, sweep(t0, old))
	h.took()
	// One endpoint already serves the new certificate, the other still the
	// old one: not resolved.
	renewed := cert{subject: "shop.example.com", notAfter: t0.Add(300 * day), eps: old.eps[:1]}
	partial := sweep(t0.Add(time.Hour), renewed, cert{subject: old.subject, notAfter: old.notAfter, eps: old.eps[1:]})
	h.run(t0.Add(time.Hour), partial)
	if got := h.took(); len(got) != 0 {
		t.Errorf("half-renewed: notifications %v, want none", got)
	}
	renewed.eps = old.eps
	h.run(t0.Add(2*time.Hour), sweep(t0.Add(2*time.Hour), renewed))
	if diff := cmp.Diff(map[string][]string{"oncall": {"resolved page shop.example.com (thread)"}}, h.took()); diff != "" {
		t.Errorf("renewed: (-want +got):\n%s", diff)
	}
}

func TestStormOfNewFindingsIsOneSummaryPerChannel(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	var certs []cert
	for i := range 500 {
		certs = append(certs, cert{subject: fmt.Sprintf("svc%03d.example.com", i), notAfter: t0.Add(time.Duration(36+i%60) * time.Hour), eps: eps(fmt.Sprintf("svc%03d.example.com", i))})
	}
	rep := h.run(t0, sweep(t0, certs...))
	if !rep.Storm || rep.New != 500 {
		t.Errorf("report = %+v, want a storm of 500 new findings", rep)
	}
	critical := 0
	for _, c := range certs {
		if f, _ := c.finding(t0); f.Tier == policy.Critical {
			critical++
		}
	}
	for name, total := range map[string]int{"oncall": 500, "incidents": critical} {
		got := h.rec[name].take()
		if len(got) != 1 || got[0].n.Event != notify.EventSummary || got[0].n.Total != total || len(got[0].n.Items) != 10 {
			t.Fatalf("%s got %v, want one summary of %d listing 10", name, describe(got), total)
		}
		first := got[0].n.Items[0].Finding
		if first.Tier != policy.Critical || !first.Deadline.Equal(t0.Add(36*time.Hour)) {
			t.Errorf("%s summary starts with %s due %v, want the most urgent (critical, soonest)", name, first.Tier, first.Deadline)
		}
		if !strings.Contains(got[0].n.Reason, "500 new findings") {
			t.Errorf("summary reason = %q", got[0].n.Reason)
		}
	}
	if got := h.took(); len(got) != 0 {
		t.Errorf("other channels got %v, want nothing", got)
	}
	// The next run is quiet: everything was announced in the summary.
	h.run(t0.Add(time.Minute), sweep(t0.Add(time.Minute), certs...))
	if got := h.took(); len(got) != 0 {
		t.Errorf("run after the storm: %v, want nothing", got)
	}
	// All renewed at once: one summary of resolutions at most per channel.
	for i := range certs {
		certs[i].notAfter = certs[i].notAfter.Add(400 * day)
	}
	h.run(t0.Add(2*time.Minute), sweep(t0.Add(2*time.Minute), certs...))
	if got := h.took(); len(got) != 0 {
		t.Errorf("fleet renewal after a storm: %v, want nothing (told only in a summary)", got)
	}
}

func TestEscalationWaveIsCappedPerChannel(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	var certs []cert
	for i := range 30 {
		// Fifteen a run: under the cap of 20 new findings.
		certs = append(certs, cert{subject: fmt.Sprintf("b%02d.example.com", i), notAfter: t0.Add(10*day + time.Duration(i)*time.Minute), eps: eps(fmt.Sprintf("b%02d.example.com", i))})
	}
	h.run(t0, sweep(t0, certs[:15]...))
	h.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), certs...))
	if got := len(h.rec["certs"].take()); got != 30 {
		t.Fatalf("certs got %d warnings, want 30 one by one", got)
	}
	// Three days later all 30 cross into page together.
	at := t0.Add(3*day + 2*time.Hour)
	h.run(at, sweep(at, certs...))
	got := h.took()
	want := map[string][]string{"oncall": {"summary 30 [" + strings.TrimSuffix(strings.Repeat("new page x, ", 10), ", ") + "]"}}
	for i := range got["oncall"] {
		got["oncall"][i] = subjectsTo(got["oncall"][i], "x")
	}
	for i := range got["certs"] {
		got["certs"][i] = subjectsTo(got["certs"][i], "x")
	}
	want["certs"] = []string{"summary 30 [" + strings.TrimSuffix(strings.Repeat("escalated page x, ", 10), ", ") + "]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// subjectsTo replaces test subjects "bNN.example.com" with s.
func subjectsTo(line, s string) string {
	for i := range 100 {
		line = strings.ReplaceAll(line, fmt.Sprintf("b%02d.example.com", i), s)
	}
	return line
}

func TestOutageIsNotAResolution(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	var certs []cert
	for i := range 20 {
		certs = append(certs, cert{subject: fmt.Sprintf("o%02d.example.com", i), notAfter: t0.Add(10 * day), eps: eps(fmt.Sprintf("o%02d.example.com", i))})
	}
	h.run(t0, sweep(t0, certs...))
	h.took()
	// Three runs in which certwatch's network is down: 18 of 20 fail.
	for r := 1; r <= 3; r++ {
		at := t0.Add(time.Duration(r) * time.Hour)
		sw := sweep(at, certs[:2]...)
		for _, c := range certs[2:] {
			sw.Endpoints = append(sw.Endpoints, failedWith(c.eps[0], "timeout"))
			sw.Findings = append(sw.Findings, policy.Finding{Kind: policy.Unreachable, Tier: policy.Warning, Name: c.eps[0].Name + ":443", Endpoints: c.eps})
		}
		rep := h.run(at, sw)
		if r == 1 && (!rep.Storm || !strings.Contains(rep.Reason, "18 of 20 endpoints")) {
			t.Errorf("run %d report = %+v, want a storm naming the failure share", r, rep)
		}
	}
	got := h.took()
	if len(got["certs"]) != 1 || !strings.HasPrefix(got["certs"][0], "summary 18") {
		t.Errorf("during the outage certs got %v, want one summary of the 18 unreachable", got["certs"])
	}
	for _, lines := range got {
		for _, l := range lines {
			if strings.HasPrefix(l, "resolved") {
				t.Errorf("outage resolved a finding: %s", l)
			}
		}
	}
	// Network back: nothing to say about the certificates, which were never
	// fixed.
	at := t0.Add(4 * time.Hour)
	h.run(at, sweep(at, certs...))
	for ch, lines := range h.took() {
		for _, l := range lines {
			if strings.Contains(l, "o0") || strings.Contains(l, "o1") {
				t.Errorf("after the outage %s got %q, want no news about the certificates", ch, l)
			}
		}
	}
}

func TestRoutingOverrideByZone(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	team := cert{subject: "api.team-a.example", notAfter: t0.Add(10 * day), eps: eps("api.team-a.example")}
	other := cert{subject: "api.other.example", notAfter: t0.Add(10 * day), eps: eps("api.other.example")}
	h.run(t0, sweep(t0, team, other))
	want := map[string][]string{"team-a": {"new warning api.team-a.example"}, "certs": {"new warning api.other.example"}}
	if diff := cmp.Diff(want, h.took()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTierDropAndRiseIsNotReannounced(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	f := policy.Finding{Kind: policy.HostnameMismatch, Tier: policy.Page, Certificate: sha("x"), Subject: "x.example", Endpoints: eps("x.example")}
	var got []string
	for i, tier := range []policy.Tier{policy.Page, policy.Warning, policy.Page, policy.Critical} {
		f.Tier = tier
		at := t0.Add(time.Duration(i) * time.Hour)
		h.run(at, notify.Sweep{Findings: []policy.Finding{f}})
		got = append(got, h.took()["oncall"]...)
	}
	want := []string{"new page x.example", "escalated critical x.example (thread)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("oncall (-want +got):\n%s", diff)
	}
}

func TestDigestWaitsAndIsSupersededByEscalation(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	a := cert{subject: "a.example.com", notAfter: t0.Add(20 * day), eps: eps("a.example.com")}
	b := cert{subject: "b.example.com", notAfter: t0.Add(14*day + time.Hour), eps: eps("b.example.com")}
	h.run(t0, sweep(t0, a, b))
	if got := h.took(); len(got) != 0 {
		t.Fatalf("notices went out before the digest: %v", got)
	}
	// b reaches warning before midnight: its own message, and the digest
	// does not repeat it as a notice.
	at := t0.Add(2 * time.Hour)
	h.run(at, sweep(at, a, b))
	if diff := cmp.Diff(map[string][]string{"certs": {"escalated warning b.example.com"}}, h.took()); diff != "" {
		t.Errorf("escalation (-want +got):\n%s", diff)
	}
	at = t0.Add(18 * time.Hour) // just past midnight UTC
	h.run(at, sweep(at, a, b))
	if diff := cmp.Diff(map[string][]string{"certs": {"digest 1 [new notice a.example.com]"}}, h.took()); diff != "" {
		t.Errorf("digest (-want +got):\n%s", diff)
	}
}

func TestRemovedChannelHearsNothingMore(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	cfg := baseConfig(t.TempDir())
	h := newHarness(t, cfg, c)
	x := cert{subject: "x.example.com", notAfter: t0.Add(10 * day), eps: eps("x.example.com")}
	h.run(t0, sweep(t0, x))
	h.took()
	// certs is removed; warnings now go to incidents.
	h.cfg.Channels = slices.DeleteFunc(slices.Clone(cfg.Channels), func(ch notify.Channel) bool { return ch.Name == "certs" })
	h.cfg.Routes = []notify.Route{{Tiers: []policy.Tier{policy.Warning, policy.Page, policy.Critical}, Channels: []string{"incidents"}}}
	delete(h.rec, "certs")
	h.restart()
	h.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), x))
	h.run(t0.Add(2*time.Hour), notify.Sweep{})
	h.run(t0.Add(3*time.Hour), notify.Sweep{})
	want := map[string][]string{"incidents": {"new warning x.example.com", "resolved warning x.example.com (thread)"}}
	if diff := cmp.Diff(want, h.took()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	stats, err := h.store.OutboxStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Pending != 0 {
			t.Errorf("outbox of %s has %d pending, want none", s.Channel, s.Pending)
		}
	}
}

// TestRemovedChannelLeavesNothingBehind: a channel removed while it was
// down leaves neither notifications waiting in the outbox for ever nor its
// channel_failing alert open on the others.
func TestRemovedChannelLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	cfg := baseConfig(t.TempDir())
	h := newHarness(t, cfg, c)
	h.rec["certs"].setFailing(notify.ChannelDown(errors.New("slack certs chat.postMessage #certs: is_archived")))
	x := cert{subject: "x.example.com", notAfter: t0.Add(10 * day), eps: eps("x.example.com")}
	y := cert{subject: "y.example.com", notAfter: t0.Add(11 * day), eps: eps("y.example.com")}
	if _, err := h.n.Apply(context.Background(), sweep(t0, x, y), t0); err != nil {
		t.Fatal(err)
	}
	if err := h.n.Flush(context.Background()); !notify.IsChannelDown(err) {
		t.Fatalf("Flush = %v, want certs down", err)
	}
	if got := h.took()["oncall"]; !cmp.Equal(got, []string{"new warning notification channel certs"}) {
		t.Fatalf("oncall got %v, want told that certs fails", got)
	}

	// certs is removed: warnings now go to incidents.
	h.cfg.Channels = slices.DeleteFunc(slices.Clone(cfg.Channels), func(ch notify.Channel) bool { return ch.Name == "certs" })
	h.cfg.Routes = []notify.Route{{Tiers: []policy.Tier{policy.Warning, policy.Page, policy.Critical}, Channels: []string{"incidents"}}}
	delete(h.rec, "certs")
	var kept *decodedKept
	h.wrap = func(s state.Outbox) state.Outbox {
		kept = &decodedKept{Outbox: s}
		return kept
	}
	h.restart()
	h.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), x, y))
	// Resolving the removed channel's alert at the start reads that
	// alert's finding alone, not a decoded copy of every open alert's.
	kept.mu.Lock()
	for i, ch := range kept.changes {
		for _, a := range ch.Alerts {
			if a.Finding.Kind == policy.ChannelFailing && !a.Open() && kept.decoded[i] != 1 {
				t.Errorf("the update resolving the removed channel's alert read %d open alerts' findings, want 1 (its own)", kept.decoded[i])
			}
		}
	}
	kept.mu.Unlock()
	want := map[string][]string{
		"incidents": {"new warning x.example.com", "new warning y.example.com", "resolved warning notification channel certs (thread)"},
		"oncall":    {"resolved warning notification channel certs (thread)"},
		"team-a":    {"resolved warning notification channel certs (thread)"},
	}
	if diff := cmp.Diff(want, h.took()); diff != "" {
		t.Errorf("after certs was removed (-want +got):\n%s", diff)
	}
	stats, err := h.store.OutboxStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Channel == "certs" && (s.Pending != 0 || s.Failed != 2) {
			t.Errorf("outbox of the removed channel = %+v, want its 2 notifications given up, none pending", s)
		}
	}
	if n := strings.Count(h.logs.String(), "its undelivered notifications are dropped"); n != 1 || !strings.Contains(h.logs.String(), "channel=certs notifications=2") {
		t.Errorf("drop logged %d times, want once with the count; logs:\n%s", n, h.logs.String())
	}
	// Later runs of the same process do not drop or log again.
	h.run(t0.Add(2*time.Hour), sweep(t0.Add(2*time.Hour), x, y))
	if n := strings.Count(h.logs.String(), "its undelivered notifications are dropped"); n != 1 {
		t.Errorf("drop logged %d times after another run, want once", n)
	}
}

func TestNewRejectsMissingSender(t *testing.T) {
	t.Parallel()
	cfg := baseConfig(t.TempDir())
	s := openStore(t, cfg.State)
	_, err := notify.New(cfg.Config, s, map[string]notify.Sender{"certs": &recorder{}}, nil)
	if err == nil || !strings.Contains(err.Error(), "has no sender") {
		t.Errorf("New without senders = %v, want an error naming the channel", err)
	}
	// A tier the configuration file cannot name ("loud") is refused at
	// load (config's tests); one it can but routes do not take is refused
	// here too.
	cfg.Routes = append(cfg.Routes, notify.Route{Tiers: []policy.Tier{policy.Info}, Channels: []string{"certs"}})
	_, err = notify.New(cfg.Config, s, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown tier "info"`) {
		t.Errorf("New with a bad route = %v, want the config error", err)
	}
}

func TestTestMessage(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	if err := h.n.Test(context.Background(), "incidents"); err != nil {
		t.Fatal(err)
	}
	got := h.rec["incidents"].take()
	if len(got) != 1 || got[0].n.Event != notify.EventTest {
		t.Errorf("incidents got %v, want one test message", describe(got))
	}
	h.rec["oncall"].fail(notify.Permanent(fmt.Errorf("pagerduty oncall trigger: http 400")))
	if err := h.n.Test(context.Background(), "oncall"); err == nil || !strings.Contains(err.Error(), "http 400") {
		t.Errorf("Test(oncall) = %v, want the sender's error", err)
	}
	if err := h.n.Test(context.Background(), "nope"); err == nil || !strings.Contains(err.Error(), "certs") {
		t.Errorf("Test(nope) = %v, want an error listing the channels", err)
	}
}

// TestAlertEscalatedInASummaryResolvesInItsThread: a channel that had its
// own message about an alert, and then heard of its escalation only in a
// summary, still gets the resolution in that message's thread.
func TestAlertEscalatedInASummaryResolvesInItsThread(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	var certs []cert
	for i := range 30 {
		certs = append(certs, cert{subject: fmt.Sprintf("b%02d.example.com", i), notAfter: t0.Add(10*day + time.Duration(i)*time.Minute), eps: eps(fmt.Sprintf("b%02d.example.com", i))})
	}
	h.run(t0, sweep(t0, certs[:15]...))
	h.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), certs...))
	at := t0.Add(3*day + 2*time.Hour) // all 30 reach page together: summaries
	h.run(at, sweep(at, certs...))
	h.took()

	// Five are renewed.
	for i := range 5 {
		certs[i].notAfter = certs[i].notAfter.Add(400 * day)
	}
	at = at.Add(time.Hour)
	h.run(at, sweep(at, certs...))
	got := h.took()
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("resolved page b%02d.example.com (thread)", i))
	}
	slices.Sort(got["certs"])
	if diff := cmp.Diff(want, got["certs"]); diff != "" {
		t.Errorf("certs, which had a message for each (-want +got):\n%s", diff)
	}
	if len(got["oncall"]) != 0 {
		t.Errorf("oncall, told only in a summary, got %v; want nothing", got["oncall"])
	}
}

// TestUnreachableEndpointIsNotAResolution: a certificate whose only
// endpoint cannot be probed for a while is not thereby fixed; its alert
// stays open, and nothing is announced again when the endpoint answers.
// An endpoint that is gone from the inventory does resolve.
func TestUnreachableEndpointIsNotAResolution(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	x := cert{subject: "x.example.com", notAfter: t0.Add(10 * day), eps: eps("x.example.com")}
	healthy := cert{subject: "ok.example.com", notAfter: t0.Add(300 * day), eps: []policy.Endpoint{{Name: "ok.example.com", Port: 443, Address: "10.0.1.1"}}}
	h.run(t0, sweep(t0, x, healthy))
	h.took()
	var got []string
	for r := 1; r <= 4; r++ {
		at := t0.Add(time.Duration(r) * time.Hour)
		sw := sweep(at, healthy)
		sw.Endpoints = append(sw.Endpoints, failedWith(x.eps[0], "refused"))
		h.run(at, sw)
		for _, l := range h.took()["certs"] {
			got = append(got, fmt.Sprintf("run %d: %s", r, l))
		}
	}
	at := t0.Add(5 * time.Hour)
	h.run(at, sweep(at, x, healthy))
	for _, l := range h.took()["certs"] {
		got = append(got, "back: "+l)
	}
	// Decommissioned: no longer in the inventory at all.
	for r := 6; r <= 7; r++ {
		at := t0.Add(time.Duration(r) * time.Hour)
		h.run(at, sweep(at, healthy))
		for _, l := range h.took()["certs"] {
			got = append(got, fmt.Sprintf("run %d: %s", r, l))
		}
	}
	want := []string{"run 7: resolved warning x.example.com (thread)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("certs (-want +got):\n%s", diff)
	}
}

// TestRemindersDoNotPileUpWhileAChannelIsDown: a channel down for most of
// a week gets, when it is back, the alert and one reminder, not one
// reminder per day it missed.
func TestRemindersDoNotPileUpWhileAChannelIsDown(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	x := cert{subject: "x.example.com", notAfter: t0.Add(13*day + 12*time.Hour), eps: eps("x.example.com")}
	h.rec["certs"].setFailing(errors.New("slack certs chat.postMessage #certs: http 503"))
	for d := range 6 {
		at := t0.Add(time.Duration(d) * day)
		c.Set(at)
		if _, err := h.n.Apply(context.Background(), sweep(at, x), at); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.Alarm(at.Add(5*time.Minute), cancel)
		_ = h.n.Flush(ctx) // gives up: certs is down
		cancel()
	}
	h.rec["certs"].setFailing(nil)
	at := t0.Add(6 * day)
	h.run(at, sweep(at, x))
	want := []string{"new warning x.example.com", "reminder warning x.example.com (thread)"}
	if diff := cmp.Diff(want, h.took()["certs"]); diff != "" {
		t.Errorf("certs after a week down (-want +got):\n%s", diff)
	}
}

// TestLeaseOfADeadProcessIsWaitedOut: a process that died while delivering
// a channel keeps its lease until the lease ends; the next one waits that
// out and then delivers.
func TestLeaseOfADeadProcessIsWaitedOut(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	if held, _, err := h.store.Lease(context.Background(), "certs", "dead process", t0, t0.Add(time.Minute)); err != nil || !held {
		t.Fatalf("lease for the dead process = %v, %v", held, err)
	}
	x := cert{subject: "x.example.com", notAfter: t0.Add(10 * day), eps: eps("x.example.com")}
	h.run(t0, sweep(t0, x))
	got := h.rec["certs"].take()
	if len(got) != 1 || got[0].at.Before(t0.Add(time.Minute)) {
		t.Errorf("certs got %v at %v, want the warning once, after the dead process's lease ended at %v", describe(got), got, t0.Add(time.Minute))
	}
	// The wait is said once per channel, with when the lease ends.
	wait := `msg="another certwatch process is delivering this channel; waiting for it" channel=certs lease_ends=` + t0.Add(time.Minute).UTC().Format(time.RFC3339)
	if n := strings.Count(h.logs.String(), wait); n != 1 {
		t.Errorf("the log says %d times %q, want once:\n%s", n, wait, h.logs.String())
	}
}

// An endpoint asked for its name at a load balancer (Via) is not the
// endpoint of that name at the same address: when the name's own endpoint
// does not answer while the load balancer serves another certificate for
// it, the alert about the certificate the name served stays open (it was
// not seen, not replaced) rather than resolve as "replaced on" the
// endpoint that did not answer.
func TestViaEndpointDoesNotReplaceThePlainOne(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	old := cert{subject: "shop.example.com", notAfter: t0.Add(5 * day), eps: eps("shop.example.com")}
	h.run(t0, sweep(t0, old))
	h.took()

	at := t0.Add(time.Hour)
	other := cert{subject: "www.example.com", notAfter: t0.Add(300 * day)}
	via := old.eps[0]
	via.Via = "web-1.eu-west-1.elb.amazonaws.com"
	sw := notify.Sweep{
		Certificates: []policy.Certificate{{SHA256: other.sha(), Subject: other.subject, Issuer: "Example Test CA", NotAfter: policy.At(other.notAfter)}},
		Endpoints: []policy.Probed{
			failedWith(old.eps[0], "timeout"),
			served(via, other.sha()),
		},
	}
	h.run(at, sw)
	if got := h.took(); len(got) != 0 {
		t.Errorf("notifications %v, want none: the endpoint that served the certificate did not answer", got)
	}
	alerts, err := h.store.Alerts(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 1 || !alerts[0].Open() {
		t.Errorf("alerts = %+v, want the one about shop.example.com still open", alerts)
	}
}

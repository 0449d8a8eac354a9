package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// walk runs the harness every 12 hours from from to before to while the
// certificates are served, and returns what each run sent, by run time.
func walk(h *harness, from, to time.Time, certs ...cert) map[time.Time]map[string][]string {
	got := map[time.Time]map[string][]string{}
	for at := from; at.Before(to); at = at.Add(12 * time.Hour) {
		h.run(at, sweep(at, certs...))
		if m := h.took(); len(m) > 0 {
			got[at] = m
		}
	}
	return got
}

func addSilence(t *testing.T, h *harness, s state.Silence) {
	t.Helper()
	if err := h.store.AddSilence(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// TestSilencedPageIsAnnouncedOnceWhenTheSilenceEnds: a page-tier finding
// silenced for two days reaches no channel while the silence holds, and is
// announced at the first run after it ends, as it stands then, once.
func TestSilencedPageIsAnnouncedOnceWhenTheSilenceEnds(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	api := cert{subject: "api.example.com", notAfter: t0.Add(5 * day), eps: eps("api.example.com")}
	end := t0.Add(2*day + time.Hour)
	addSilence(t, h, state.Silence{ID: "s-1", Match: state.Matchers{Name: "*.example.com"}, UpTo: policy.Page,
		Reason: "renewal booked", Author: "alice", Created: t0, Until: end})

	rep := h.run(t0, sweep(t0, api))
	if rep.New != 0 || rep.Silenced != 1 || rep.Queued != 0 {
		t.Errorf("first run report = %+v, want 1 silenced, nothing new or queued", rep)
	}
	// The report marks it as Apply decided.
	fs := sweep(t0, api).Findings
	if n := h.n.MarkSilenced(fs, mustSilences(t, h), t0); n != 1 || fs[0].Silenced == nil || fs[0].Silenced.Author != "alice" || !fs[0].Silenced.Until.Equal(end) {
		t.Errorf("MarkSilenced = %d, %+v; want the finding marked with alice's silence until %v", n, fs[0].Silenced, end)
	}

	got := walk(h, t0.Add(12*time.Hour), t0.Add(3*day), api) // critical from 3d
	want := map[time.Time]map[string][]string{
		// 2d12h is the first run after the silence ends at 2d01h; 3 days
		// are left then, still page.
		t0.Add(2*day + 12*time.Hour): {"oncall": {"new page api.example.com"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
	if n := h.n.MarkSilenced(fs, mustSilences(t, h), end); n != 0 || fs[0].Silenced != nil {
		t.Errorf("MarkSilenced after the end = %d, %+v; want nothing marked", n, fs[0].Silenced)
	}
	alerts, err := h.store.Alerts(context.Background(), false)
	if err != nil || len(alerts) != 1 || alerts[0].Announced != policy.Page || !alerts[0].FirstRaised.Equal(t0) {
		t.Errorf("alerts = %+v, %v; want one, first raised at %v, announced at page", alerts, err, t0)
	}
}

func mustSilences(t *testing.T, h *harness) []state.Silence {
	t.Helper()
	s, err := h.store.Silences(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSilenceCoversUpToItsTier: a warning silenced up to warning is quiet;
// when it becomes a page (above the silence) it is announced at once, as
// new (it never was), and later escalations follow as usual.
func TestSilenceCoversUpToItsTier(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	api := cert{subject: "api.example.com", notAfter: t0.Add(10 * day), eps: eps("api.example.com")}
	addSilence(t, h, state.Silence{ID: "s-1", Match: state.Matchers{Certificate: api.sha()[:12]}, UpTo: policy.Warning,
		Reason: "known", Author: "alice", Created: t0, Until: t0.Add(60 * day)})

	got := walk(h, t0, t0.Add(9*day), api)
	want := map[time.Time]map[string][]string{
		// 7 days left: page, above the silence.
		t0.Add(3 * day): {"oncall": {"new page api.example.com"}},
		// 2 days left: critical, escalated where the page went.
		t0.Add(8 * day): {"incidents": {"new critical api.example.com"}, "oncall": {"escalated critical api.example.com (thread)"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}

// TestSilenceAfterAnnouncementHoldsRemindersAndEscalation: a warning
// already announced, then silenced up to page, gets no reminder and no
// escalation to page while silenced; expired early, the next run
// escalates it as it stands then (page), once.
func TestSilenceAfterAnnouncementHoldsRemindersAndEscalation(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	api := cert{subject: "api.example.com", notAfter: t0.Add(10 * day), eps: eps("api.example.com")}
	h.run(t0, sweep(t0, api))
	if got := h.took(); !cmp.Equal(got, map[string][]string{"certs": {"new warning api.example.com"}}) {
		t.Fatalf("first run sent %v, want the warning in #certs", got)
	}
	addSilence(t, h, state.Silence{ID: "s-1", Match: state.Matchers{Kind: policy.Expiring, Zone: "example.com"}, UpTo: policy.Page,
		Reason: "migrating", Author: "bob", Created: t0, Until: t0.Add(30 * day)})
	// Daily warning reminders and the page at 7 days left are held.
	if got := walk(h, t0.Add(12*time.Hour), t0.Add(5*day), api); len(got) != 0 {
		t.Errorf("while silenced, sent %v; want nothing", got)
	}
	at := t0.Add(5 * day)
	if _, err := h.store.ExpireSilence(context.Background(), "s-1", at); err != nil {
		t.Fatal(err)
	}
	got := walk(h, at, at.Add(2*day), api)
	want := map[time.Time]map[string][]string{
		at: {"certs": {"escalated page api.example.com (thread)"}, "oncall": {"new page api.example.com"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the silence was expired (-want +got):\n%s", diff)
	}
}

// TestConfiguredSilenceAndQuietResolution: a silence from the
// configuration holds like a stored one, and a finding resolved while
// silenced and never announced tells no one.
func TestConfiguredSilenceAndQuietResolution(t *testing.T) {
	t.Parallel()
	c := newClock(t0)
	h := newHarness(t, baseConfig(t.TempDir()), c)
	h.n.Silences = []state.Silence{{ID: "config:1", Match: state.Matchers{FindingID: "expiring:" + cert{subject: "a.team-a.example", notAfter: t0.Add(day)}.sha()},
		UpTo: policy.Critical, Reason: "in git", Author: "config", Until: t0.Add(10 * day), Config: true}}
	a := cert{subject: "a.team-a.example", notAfter: t0.Add(day), eps: eps("a.team-a.example")}
	renewed := cert{subject: "a.team-a.example", notAfter: t0.Add(300 * day), eps: a.eps}
	// Past its expiry the finding is "expired" but keeps its alert, which
	// the finding-ID silence names.
	if got := walk(h, t0, t0.Add(2*day), a); len(got) != 0 {
		t.Errorf("while silenced, sent %v; want nothing", got)
	}
	if got := walk(h, t0.Add(2*day), t0.Add(3*day), renewed); len(got) != 0 {
		t.Errorf("resolution of a never-announced finding sent %v; want nothing", got)
	}
	alerts, err := h.store.Alerts(context.Background(), true)
	if err != nil || len(alerts) != 1 || alerts[0].Open() {
		t.Errorf("alerts = %+v, %v; want one, resolved", alerts, err)
	}
}

func TestSilenceMatches(t *testing.T) {
	f := policy.Finding{Kind: policy.Expired, Tier: policy.Critical, Certificate: strings.Repeat("ab", 32), Subject: "api.pay.example.com",
		Endpoints: []policy.Endpoint{{Name: "api.pay.example.com", Port: 443}, {Name: "www.shop.example", Port: 443}}}
	labels := map[string]string{"team": "payments"}
	tests := []struct {
		name string
		m    state.Matchers
		want bool
	}{
		{"finding ID", state.Matchers{FindingID: f.ID()}, true},
		{"alert ID of an expired certificate", state.Matchers{FindingID: "expiring:" + f.Certificate}, true},
		{"other finding ID", state.Matchers{FindingID: "expiring:cd"}, false},
		{"former ID of an expired certificate, in a silence added before", state.Matchers{FindingID: "expired:" + f.Certificate}, true},
		{"former ID of another expired certificate", state.Matchers{FindingID: "expired:" + strings.Repeat("cd", 32)}, false},
		{"kind", state.Matchers{Kind: policy.Expired}, true},
		{"other kind", state.Matchers{Kind: policy.TLSBroken}, false},
		{"name glob", state.Matchers{Name: "*.pay.example.com"}, true},
		{"name glob on a second endpoint", state.Matchers{Name: "WWW.*"}, true},
		{"name glob that matches none", state.Matchers{Name: "*.internal"}, false},
		{"zone", state.Matchers{Zone: "Example.COM."}, true},
		{"zone that holds none", state.Matchers{Zone: "ample.com"}, false},
		{"label", state.Matchers{Labels: map[string]string{"team": "payments"}}, true},
		{"label with another value", state.Matchers{Labels: map[string]string{"team": "web"}}, false},
		{"fingerprint prefix with colons", state.Matchers{Certificate: "AB:AB:AB:AB"}, true},
		{"other fingerprint", state.Matchers{Certificate: "abababac"}, false},
		{"every matcher", state.Matchers{Kind: policy.Expired, Zone: "shop.example", Labels: labels, Certificate: "abab"}, true},
		{"one of several fails", state.Matchers{Kind: policy.Expired, Zone: "other.example"}, false},
		{"no matcher selects nothing", state.Matchers{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := notify.SilenceMatches(state.Silence{Match: tt.m}, f, labels); got != tt.want {
				t.Errorf("SilenceMatches(%+v) = %v, want %v", tt.m, got, tt.want)
			}
		})
	}
}

func TestCheckSilence(t *testing.T) {
	ok := state.Silence{Match: state.Matchers{Kind: policy.Expiring}, UpTo: policy.Page, Reason: "ticket 42", Author: "alice", Until: t0.Add(7 * day)}
	const max = 90 * day
	if err := notify.CheckSilence(ok, t0, max); err != nil {
		t.Fatalf("CheckSilence(valid) = %v", err)
	}
	tests := []struct {
		name string
		edit func(*state.Silence)
		want string
	}{
		{"longer than the maximum", func(s *state.Silence) { s.Until = t0.Add(91 * day) }, "it would last 91d, longer than notify.silence_max (90d)"},
		{"in the past", func(s *state.Silence) { s.Until = t0.Add(-time.Minute) }, "not in the future"},
		{"no reason", func(s *state.Silence) { s.Reason = " " }, "a reason is required"},
		{"no author", func(s *state.Silence) { s.Author = "" }, "an author is required"},
		{"no matcher", func(s *state.Silence) { s.Match = state.Matchers{} }, "at least one matcher"},
		{"unknown kind", func(s *state.Silence) { s.Match.Kind = "expirin" }, `unknown finding kind "expirin"`},
		{"short fingerprint", func(s *state.Silence) { s.Match.Certificate = "abc" }, "at least its first 8 digits"},
		{"not hex", func(s *state.Silence) { s.Match.Certificate = "zzzzzzzzzz" }, "want a SHA-256 fingerprint"},
		{"tier below notice", func(s *state.Silence) { s.UpTo = policy.Info }, "up to tier info"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.edit(&s)
			if err := notify.CheckSilence(s, t0, max); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckSilence = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestExpirySilenceCoversRenewalMissed: a silence of a certificate's
// expiring finding, by kind or by the finding's ID, also covers the
// certificate's renewal_missed; one of another kind or certificate does
// not, nor does a silence of renewal_missed cover expiring.
func TestExpirySilenceCoversRenewalMissed(t *testing.T) {
	cert := strings.Repeat("cd", 32)
	missed := policy.Finding{Kind: policy.RenewalMissed, Tier: policy.Warning, Certificate: cert, Subject: "old.example.com",
		Endpoints: []policy.Endpoint{{Name: "old.example.com", Port: 443}}}
	expiring := missed
	expiring.Kind = policy.Expiring
	tests := []struct {
		name string
		m    state.Matchers
		f    policy.Finding
		want bool
	}{
		{"expiring by kind and name", state.Matchers{Kind: policy.Expiring, Name: "old.example.com"}, missed, true},
		{"expiring by the expiring finding's ID", state.Matchers{FindingID: expiring.ID()}, missed, true},
		{"expiring of another certificate", state.Matchers{FindingID: "expiring:" + strings.Repeat("ef", 32)}, missed, false},
		{"expiring by kind, other name", state.Matchers{Kind: policy.Expiring, Name: "new.example.com"}, missed, false},
		{"another kind", state.Matchers{Kind: policy.WeakKey}, missed, false},
		{"renewal_missed does not cover expiring", state.Matchers{Kind: policy.RenewalMissed}, expiring, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := notify.SilenceMatches(state.Silence{Match: tt.m}, tt.f, nil); got != tt.want {
				t.Errorf("SilenceMatches(%+v, %s) = %v, want %v", tt.m, tt.f.Kind, got, tt.want)
			}
		})
	}
}

// TestExpirySilenceCoversCertManager: a silence of a certificate's
// expiring finding, by kind or by the finding's ID, also covers
// cert-manager's findings about the certificate (certmanager_not_ready,
// certmanager_renewal_overdue), which sit beside it; not those of another
// certificate, not a certmanager_not_ready about a Certificate resource
// whose Secret holds none, and a silence of a cert-manager kind does not
// cover expiring.
func TestExpirySilenceCoversCertManager(t *testing.T) {
	cert := strings.Repeat("ab", 32)
	notReady := policy.Finding{Kind: policy.CertManagerNotReady, Tier: policy.Page, Certificate: cert, Subject: "api.payments.svc",
		Endpoints: []policy.Endpoint{}, Records: &policy.Records{Locations: []atrest.Location{{Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt"}}}}
	overdue := notReady
	overdue.Kind = policy.CertManagerRenewalOverdue
	expiring := notReady
	expiring.Kind = policy.Expiring
	resource := policy.Finding{Kind: policy.CertManagerNotReady, Tier: policy.Warning, Name: "certificate payments/pending", Subject: "certificate payments/pending",
		Endpoints: []policy.Endpoint{}}
	tests := []struct {
		name string
		m    state.Matchers
		f    policy.Finding
		want bool
	}{
		{"not ready, expiring by kind", state.Matchers{Kind: policy.Expiring}, notReady, true},
		{"overdue, expiring by kind", state.Matchers{Kind: policy.Expiring}, overdue, true},
		{"not ready, expiring by ID", state.Matchers{FindingID: expiring.ID()}, notReady, true},
		{"overdue, expiring by ID", state.Matchers{FindingID: expiring.ID()}, overdue, true},
		{"overdue, expiring by kind and certificate", state.Matchers{Kind: policy.Expiring, Certificate: cert[:12]}, overdue, true},
		{"expiring of another certificate", state.Matchers{FindingID: "expiring:" + strings.Repeat("ef", 32)}, notReady, false},
		{"expiring by kind, another certificate", state.Matchers{Kind: policy.Expiring, Certificate: strings.Repeat("ef", 6)}, overdue, false},
		{"resource without a certificate", state.Matchers{Kind: policy.Expiring}, resource, false},
		{"certmanager_not_ready does not cover expiring", state.Matchers{Kind: policy.CertManagerNotReady}, expiring, false},
		{"certmanager_renewal_overdue does not cover expiring", state.Matchers{FindingID: overdue.ID()}, expiring, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := notify.SilenceMatches(state.Silence{Match: tt.m}, tt.f, nil); got != tt.want {
				t.Errorf("SilenceMatches(%+v, %s) = %v, want %v", tt.m, tt.f.Kind, got, tt.want)
			}
		})
	}
}

// TestExpirySilenceCoversRenewalUpToWarning: a silence of an expiring
// finding by its ID covers up to the tier the expiry had then, usually
// notice; the renewal_missed and cert-manager findings beside it start at
// warning, and the silence covers them up to warning at least, but not a
// page it does not cover itself.
func TestExpirySilenceCoversRenewalUpToWarning(t *testing.T) {
	t.Parallel()
	cert := strings.Repeat("cd", 32)
	missed := policy.Finding{Kind: policy.RenewalMissed, Tier: policy.Warning, Certificate: cert, Subject: "old.example.com",
		Endpoints: []policy.Endpoint{{Name: "old.example.com", Port: 443}}}
	expiring := missed
	expiring.Kind, expiring.Tier = policy.Expiring, policy.Notice
	overdue := missed
	overdue.Kind = policy.CertManagerRenewalOverdue
	at := func(f policy.Finding, tier policy.Tier) policy.Finding { f.Tier = tier; return f }
	tests := []struct {
		name string
		m    state.Matchers
		upTo policy.Tier
		f    policy.Finding
		want bool
	}{
		{"expiring notice itself", state.Matchers{FindingID: expiring.ID()}, policy.Notice, expiring, true},
		{"expiring now a warning", state.Matchers{FindingID: expiring.ID()}, policy.Notice, at(expiring, policy.Warning), false},
		{"renewal_missed warning, by ID", state.Matchers{FindingID: expiring.ID()}, policy.Notice, missed, true},
		{"renewal_missed warning, by kind up to notice", state.Matchers{Kind: policy.Expiring}, policy.Notice, missed, true},
		{"certmanager_renewal_overdue warning, by ID", state.Matchers{FindingID: expiring.ID()}, policy.Notice, overdue, true},
		{"renewal_missed page, up to notice", state.Matchers{FindingID: expiring.ID()}, policy.Notice, at(missed, policy.Page), false},
		{"renewal_missed page, up to warning", state.Matchers{FindingID: expiring.ID()}, policy.Warning, at(missed, policy.Page), false},
		{"renewal_missed page, up to page", state.Matchers{FindingID: expiring.ID()}, policy.Page, at(missed, policy.Page), true},
		{"renewal_missed warning, by its own kind up to notice", state.Matchers{Kind: policy.RenewalMissed}, policy.Notice, missed, false},
		{"renewal_missed warning, by name up to notice", state.Matchers{Name: "old.example.com"}, policy.Notice, missed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := state.Silence{ID: "s-1", Match: tt.m, UpTo: tt.upTo, Author: "alice", Reason: "renewal booked", Created: t0, Until: t0.Add(day)}
			fs := []policy.Finding{tt.f}
			n := (&notify.Notifier{}).MarkSilenced(fs, []state.Silence{s}, t0)
			if got := n == 1; got != tt.want {
				t.Fatalf("MarkSilenced(%s %s, silence up to %s) = %d, want covered %v", tt.f.Kind, tt.f.Tier, tt.upTo, n, tt.want)
			}
			if tt.want && fs[0].Silenced.UpTo < tt.f.Tier {
				t.Errorf("Silenced.UpTo = %s, want at least %s", fs[0].Silenced.UpTo, tt.f.Tier)
			}
		})
	}
}

package alertmanager_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/alertmanagertest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/alertmanager"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state/sqlite"
)

const (
	shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// process is one certwatch process's notifier on the state file.
type process struct {
	n     *notify.Notifier
	close func()
}

// setup is a notifier's configuration with its one Alertmanager channel.
type setup struct {
	notify    notify.Config
	channel   alertmanager.Config
	statusURL string
}

// amChannel is the channel "am" as the notifier sees it.
var amChannel = notify.Channel{Name: "am", Rate: notify.DefaultHTTPRate, KeepsIncidents: true}

func start(t *testing.T, cfg setup, path string) process {
	t.Helper()
	store, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := alertmanager.New(cfg.channel, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.StatusURL = cfg.statusURL
	n, err := notify.New(cfg.notify, store, map[string]notify.Sender{"am": s}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = func(f policy.Finding) map[string]string {
		for _, e := range f.Endpoints {
			if strings.HasSuffix(e.Name, ".pay.example.test") {
				return map[string]string{"team": "payments", "env-name": "prod"}
			}
		}
		return nil
	}
	n.Rand = func() float64 { return 0 }
	return process{n: n, close: func() { store.Close() }}
}

func expiring(sha, name string, tier policy.Tier, now time.Time) policy.Finding {
	return policy.Finding{
		Kind: policy.Expiring, Tier: tier, Certificate: sha, Subject: name,
		Deadline:  policy.At(now.Add(5 * 24 * time.Hour)),
		Endpoints: []policy.Endpoint{{Name: name, Port: 443, Address: "127.0.0.1"}},
		Message:   "Renew the certificate of " + name + " and deploy it.",
	}
}

// sweep is a run in which each name served the certificate given.
func sweep(findings []policy.Finding, served map[string]string) notify.Sweep {
	sw := notify.Sweep{Findings: findings}
	for _, name := range slices.Sorted(maps.Keys(served)) {
		sw.Endpoints = append(sw.Endpoints, policy.Probed{Name: name, Port: 443, Address: "127.0.0.1", Certificate: served[name]})
		sw.Certificates = append(sw.Certificates, policy.Certificate{SHA256: served[name], Subject: name})
	}
	return sw
}

// byCert indexes alerts by their certificate label and severity.
func byCert(alerts []alertmanagertest.Alert) map[string]alertmanagertest.Alert {
	m := map[string]alertmanagertest.Alert{}
	for _, a := range alerts {
		m[a.Labels["certificate_sha256"]+"/"+a.Labels["severity"]] = a
	}
	return m
}

func flush(t *testing.T, p process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.n.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// TestRealAlertmanager drives certwatch's Alertmanager channel against a
// real Alertmanager: an alert appears with its labels, a restart of
// certwatch re-sends it without a duplicate, an Alertmanager restart (it
// keeps no alerts) loses neither the open alert (the next re-send restores
// it) nor a transition made while it was down (the outbox delivers it), an
// escalation replaces the lower tier's alert, and a replaced certificate
// resolves its alert.
func TestRealAlertmanager(t *testing.T) {
	am := alertmanagertest.Start(t)
	path := filepath.Join(t.TempDir(), "state.db")
	cfg := setup{
		statusURL: "https://certwatch.example.test/",
		channel:   alertmanager.Config{Name: "am", URL: am.URL, ResendInterval: time.Minute, EndsAfter: 10 * time.Minute},
		notify: notify.Config{
			Channels: []notify.Channel{amChannel},
			Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Warning, policy.Page, policy.Critical}, Channels: []string{"am"}}},
			Retry:    notify.Retry{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond},
		},
	}

	// 1. A page-tier finding: one alert, with its labels.
	p := start(t, cfg, path)
	now := time.Now()
	a := expiring(shaA, "api.pay.example.test", policy.Page, now)
	if _, err := p.n.Apply(context.Background(), sweep([]policy.Finding{a}, map[string]string{"api.pay.example.test": shaA}), now); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	got := am.Alerts(t)
	if len(got) != 1 {
		t.Fatalf("Alertmanager holds %d alerts, want 1: %+v", len(got), got)
	}
	want := map[string]string{
		"alertname": "CertwatchExpiring", "kind": "expiring", "severity": "page",
		"certificate_sha256": shaA, "subject": "api.pay.example.test", "team": "payments", "env_name": "prod",
	}
	for k, v := range want {
		if got[0].Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, got[0].Labels[k], v, got[0].Labels)
		}
	}
	if got[0].Status.State != "active" || !got[0].EndsAt.After(now.Add(9*time.Minute)) {
		t.Errorf("alert state %q ends %v, want active and ending about 10m after %v", got[0].Status.State, got[0].EndsAt, now)
	}
	if got[0].GeneratorURL != cfg.statusURL || got[0].Annotations["deadline"] == "" || !strings.Contains(got[0].Annotations["description"], "Renew the certificate") {
		t.Errorf("generatorURL %q, annotations %v: want the status page, a deadline and what to do", got[0].GeneratorURL, got[0].Annotations)
	}
	first := got[0]

	// 2. certwatch restarts: the same finding is no transition; the
	// re-send updates the one alert (same labels, same fingerprint).
	p.close()
	p = start(t, cfg, path)
	defer func() { p.close() }()
	now = time.Now()
	if rep, err := p.n.Apply(context.Background(), sweep([]policy.Finding{a}, map[string]string{"api.pay.example.test": shaA}), now); err != nil || rep.Queued != 0 {
		t.Fatalf("Apply after restart: %+v, %v; want nothing queued", rep, err)
	}
	flush(t, p)
	got = am.Alerts(t)
	if len(got) != 1 || got[0].Fingerprint != first.Fingerprint {
		t.Fatalf("after a certwatch restart Alertmanager holds %+v, want the one alert %s", got, first.Fingerprint)
	}
	if !got[0].StartsAt.Equal(first.StartsAt) {
		t.Errorf("startsAt moved from %v to %v on a re-send", first.StartsAt, got[0].StartsAt)
	}

	// 3. Alertmanager stops; meanwhile a warning appears. The re-send
	// fails loudly, the transition waits in the outbox.
	am.Stop()
	b := expiring(shaB, "www.example.test", policy.Warning, now)
	served := map[string]string{"api.pay.example.test": shaA, "www.example.test": shaB}
	if _, err := p.n.Apply(context.Background(), sweep([]policy.Finding{a, b}, served), now); err != nil {
		t.Fatal(err)
	}
	if err := p.n.Refresh(context.Background()); err == nil {
		t.Error("Refresh with Alertmanager down: no error")
	}
	if h := p.n.Health(); h[0].FailingSince.IsZero() || h[0].LastError == "" {
		t.Errorf("health with Alertmanager down: %+v, want failing with an error", h[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if err := p.n.Flush(ctx); err == nil {
		t.Error("Flush with Alertmanager down: no error")
	}
	cancel()

	// ... and comes back empty: the re-send restores the open alert, the
	// outbox delivers the new one.
	am.Resume(t)
	if n := len(am.Alerts(t)); n != 0 {
		t.Logf("restarted Alertmanager holds %d alerts", n)
	}
	if err := p.n.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh after Alertmanager restart: %v", err)
	}
	if _, ok := byCert(am.Alerts(t))[shaA+"/page"]; !ok {
		t.Fatalf("the re-send did not restore the open alert: %+v", am.Alerts(t))
	}
	flush(t, p)
	got = am.Alerts(t)
	if m := byCert(got); len(got) != 2 || m[shaA+"/page"].Fingerprint != first.Fingerprint || m[shaB+"/warning"].Labels == nil {
		t.Fatalf("after Alertmanager restart: %+v, want A at page (fingerprint %s) and B at warning", got, first.Fingerprint)
	}
	if h := p.n.Health(); !h[0].FailingSince.IsZero() {
		t.Errorf("health after recovery: %+v, want not failing", h[0])
	}

	// 4. B escalates to page: its warning alert resolves, a page alert
	// fires.
	now = time.Now()
	b.Tier = policy.Page
	if _, err := p.n.Apply(context.Background(), sweep([]policy.Finding{a, b}, served), now); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	got = am.Alerts(t)
	if m := byCert(got); len(got) != 2 || m[shaB+"/page"].Labels == nil {
		t.Fatalf("after B's escalation: %+v, want A and B at page only", got)
	}

	// 5. A's certificate is replaced: its alert resolves (endsAt now) and
	// leaves the active list; B's stays.
	now = time.Now()
	served["api.pay.example.test"] = shaC
	if rep, err := p.n.Apply(context.Background(), sweep([]policy.Finding{b}, served), now); err != nil || rep.Resolved != 1 {
		t.Fatalf("Apply with A replaced: %+v, %v; want 1 resolved", rep, err)
	}
	flush(t, p)
	got = am.Alerts(t)
	if len(got) != 1 || got[0].Labels["certificate_sha256"] != shaB {
		t.Fatalf("after A was replaced: %+v, want only B", got)
	}
}

// TestRunResendsOpenAlerts: the dispatcher of `certwatch run` re-sends the
// open alerts on its own every resend_interval, so an Alertmanager that
// restarted empty has them back without any transition.
func TestRunResendsOpenAlerts(t *testing.T) {
	am := alertmanagertest.Start(t)
	path := filepath.Join(t.TempDir(), "state.db")
	cfg := setup{
		channel: alertmanager.Config{Name: "am", URL: am.URL, ResendInterval: 20 * time.Millisecond, EndsAfter: time.Minute},
		notify: notify.Config{
			Channels: []notify.Channel{amChannel},
			Routes:   []notify.Route{{Tiers: []policy.Tier{policy.Page}, Channels: []string{"am"}}},
		},
	}
	p := start(t, cfg, path)
	defer p.close()
	now := time.Now()
	a := expiring(shaA, "api.example.test", policy.Page, now)
	if _, err := p.n.Apply(context.Background(), sweep([]policy.Finding{a}, map[string]string{"api.example.test": shaA}), now); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.n.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string) {
		t.Helper()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(10 * time.Second)
		for {
			if _, ok := byCert(am.Alerts(t))[shaA+"/page"]; ok {
				return
			}
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("%s: Alertmanager holds %+v, want A at page", what, am.Alerts(t))
			}
		}
	}
	waitFor("after Apply")
	am.Restart(t)
	waitFor("after Alertmanager restarted")
}

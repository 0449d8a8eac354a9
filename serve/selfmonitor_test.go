package serve_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/serve"
)

// TestStateHealthInMetricsAndPage: certwatch_state_up follows the state
// store's health check, not only whether the outbox can be read, and the
// page says why the store is down.
func TestStateHealthInMetricsAndPage(t *testing.T) {
	health := error(nil)
	// A snapshot of the store is good for a nanosecond: every request here
	// sees the store as it is.
	_, base := newServer(t, serve.Options{Outbox: fakeOutbox{}, State: func(context.Context) error { return health }, StoreTTL: time.Nanosecond})
	if got, ok := value(scrape(t, base), "certwatch_state_up", map[string]string{}); !ok || got != 1 {
		t.Errorf("certwatch_state_up with a working store = %v (present %v), want 1", got, ok)
	}
	health = errors.New("update state /var/lib/certwatch/state.db: disk full")
	fams := scrape(t, base)
	if got, ok := value(fams, "certwatch_state_up", map[string]string{}); !ok || got != 0 {
		t.Errorf("certwatch_state_up with a full disk = %v (present %v), want 0", got, ok)
	}
	if _, ok := value(fams, "certwatch_outbox_depth", map[string]string{"channel": "certs"}); !ok {
		t.Error("certwatch_outbox_depth gone while the outbox can still be read")
	}
	_, _, page := get(t, base+"/")
	if !strings.Contains(page, `class="banner banner-error"`) || !strings.Contains(page, "disk full") {
		t.Error("status page has no error banner naming the state failure")
	}
}

// TestUnverifiedFindings: a finding kept from an earlier run stays in the
// metrics at its tier, is counted as unverified, keeps its certificate's
// expiry series, and carries a badge on the page.
func TestUnverifiedFindings(t *testing.T) {
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	r, obs := testReport()
	since := now.Add(-time.Hour)
	for i := range r.Findings {
		if r.Findings[i].Kind == policy.Expired {
			r.Findings[i].UnverifiedSince = policy.At(since)
		}
	}
	for i := range r.Endpoints {
		if r.Endpoints[i].Name == "expired.internal.example" {
			r.Endpoints[i].Certificate, r.Endpoints[i].Failed = "", &policy.Failed{Error: "connection refused", Failure: "refused"}
			obs[i].Failure = "refused"
		}
	}
	for i := range obs {
		s.ObserveProbe(&obs[i])
	}
	s.RecordReport(r)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()

	fams := scrape(t, hs.URL)
	for _, name := range []string{"certwatch_findings", "certwatch_findings_unverified"} {
		if got, ok := value(fams, name, map[string]string{"kind": "expired", "tier": "critical"}); got != 1 {
			t.Errorf("%s{kind=expired,tier=critical} = %v (present %v), want 1", name, got, ok)
		}
	}
	if got, ok := value(fams, "certwatch_findings_unverified", map[string]string{"kind": "expiring", "tier": "page"}); ok {
		t.Errorf("certwatch_findings_unverified{kind=expiring} = %v, want no series for a verified finding", got)
	}
	if _, ok := value(fams, "certwatch_certificate_expiry_timestamp_seconds", map[string]string{
		"sha256": shaExpired, "subject_cn": "expired.internal.example", "issuer_cn": "Example Issuing CA 2", "source": "dnszone:internal.example"}); !ok {
		t.Error("the unverified certificate's expiry series lost its source label")
	}
	code, _, page := get(t, hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	if !strings.Contains(page, `data-unverified="`+since.UTC().Format(time.RFC3339)) || !strings.Contains(page, `<span class="unverified"`) {
		t.Error("status page does not mark the unverified finding")
	}
	if strings.Count(page, `<span class="unverified"`) != 1 {
		t.Errorf("%d unverified badges, want 1", strings.Count(page, `<span class="unverified"`))
	}
	if !strings.Contains(page, "1 findings are unverified") {
		t.Error("status page has no banner counting unverified findings")
	}
}

// TestLastSuccessFromStartup: the last success kept across a restart is
// exported before any run, and a newer run replaces it.
func TestLastSuccessFromStartup(t *testing.T) {
	s := serve.New(serve.Options{})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	before := now.Add(-3 * time.Hour)
	s.RecordLastSuccess(daemon.JobProbe, before)
	got, ok := value(scrape(t, hs.URL), "certwatch_last_success_timestamp_seconds", map[string]string{"daemon_job": "probe"})
	if !ok || got != float64(before.Unix()) {
		t.Errorf("last success before any run = %v (present %v), want %d", got, ok, before.Unix())
	}
	_, _, page := get(t, hs.URL+"/")
	if !strings.Contains(page, "not run since start") || !strings.Contains(page, before.UTC().Format("2006-01-02 15:04:05 UTC")) {
		t.Error("status page job table does not show the restored last success")
	}
	s.RecordRun(daemon.JobProbe, now, time.Second, nil)
	if got, _ := value(scrape(t, hs.URL), "certwatch_last_success_timestamp_seconds", map[string]string{"daemon_job": "probe"}); got != float64(now.Add(time.Second).Unix()) {
		t.Errorf("last success after a run = %v, want the run's end %d", got, now.Add(time.Second).Unix())
	}
}

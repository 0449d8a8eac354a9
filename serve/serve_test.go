package serve_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

var now = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

const (
	shaWildcard = "aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111aaaa1111"
	shaHealthy  = "bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222bbbb2222"
	shaExpired  = "cccc3333cccc3333cccc3333cccc3333cccc3333cccc3333cccc3333cccc3333"
)

// testReport is a small estate: a shared wildcard expiring in 5 days on two
// names, a healthy certificate, an expired one, an unreachable target and a
// degraded discovery source.
func testReport() (*scan.Report, []probes.Observation) {
	day := 24 * time.Hour
	certs := []policy.Certificate{
		{SHA256: shaExpired, Subject: "expired.internal.example", Issuer: "Example Issuing CA 2", DNSNames: []string{"expired.internal.example"}, NotBefore: policy.At(now.Add(-400 * day)), NotAfter: policy.At(now.Add(-3 * day))},
		{SHA256: shaWildcard, Subject: "*.internal.example", Issuer: "Example Issuing CA 2", DNSNames: []string{"*.internal.example"}, NotBefore: policy.At(now.Add(-360 * day)), NotAfter: policy.At(now.Add(5 * day))},
		{SHA256: shaHealthy, Subject: "www.internal.example", Issuer: "Example Issuing CA 2", DNSNames: []string{"www.internal.example"}, NotBefore: policy.At(now.Add(-30 * day)), NotAfter: policy.At(now.Add(200 * day))},
	}
	eps := []scan.Endpoint{
		{Name: "api.internal.example", Port: 443, Address: "127.0.0.3", Certificate: shaWildcard},
		{Name: "auth.internal.example", Port: 443, Address: "127.0.0.4", Certificate: shaWildcard},
		{Name: "expired.internal.example", Port: 443, Address: "127.0.0.7", Certificate: shaExpired},
		{Name: "hung.internal.example", Port: 443, Address: "127.0.0.16", Failed: &policy.Failed{Error: "handshake timed out", Failure: "timeout"}},
		{Name: "www.internal.example", Port: 443, Address: "127.0.0.2", Certificate: shaHealthy,
			TLSVersion: tls.VersionTLS13, CipherSuite: probes.CipherSuite(tls.TLS_AES_128_GCM_SHA256),
			KeyExchange: probes.KeyExchange(tls.X25519MLKEM768), PostQuantum: new(true)},
	}
	r := &scan.Report{
		GeneratedAt: now, Targets: 5, Endpoints: eps, Certificates: certs,
		Revocation: policy.RevocationSummary{ByCRL: 2, ByOCSP: 1, ByNeither: 0, CRLs: []policy.CRLState{
			{URL: "http://crl.internal.example/issuing2.crl", ThisUpdate: now.Add(-time.Hour), NextUpdate: now.Add(23 * time.Hour), Leaves: 2}}},
		Sources: []scan.SourceResult{{Name: "dnszone:internal.example", Targets: 5}, {Name: "route53", Error: "list hosted zones: access denied"}},
		Findings: []policy.Finding{
			{Kind: policy.Expired, Tier: policy.Critical, Certificate: shaExpired, Subject: "expired.internal.example", Deadline: policy.At(now.Add(-3 * day)),
				Endpoints: []policy.Endpoint{{Name: "expired.internal.example", Port: 443, Address: "127.0.0.7"}}, Message: "expired 3 days ago; renew it"},
			{Kind: policy.Expiring, Tier: policy.Page, Certificate: shaWildcard, Subject: "*.internal.example", Deadline: policy.At(now.Add(5 * day)),
				Endpoints: []policy.Endpoint{{Name: "api.internal.example", Port: 443, Address: "127.0.0.3"}, {Name: "auth.internal.example", Port: 443, Address: "127.0.0.4"}},
				Message:   "expires in 5 days; renew it"},
			{Kind: policy.Unreachable, Tier: policy.Warning, Name: "vault.internal.example:8200", Deadline: policy.At(now),
				Endpoints: []policy.Endpoint{{Name: "vault.internal.example", Port: 8200}}, Message: "vault.internal.example:8200 could not be probed"},
			{Kind: policy.DiscoveryDegraded, Tier: policy.Warning, Name: "route53", Deadline: policy.At(now.Add(-time.Hour)), Message: "discovery source route53 failed"},
		},
	}
	// The observations the report was judged from: each endpoint's
	// sources and probe duration are theirs (policy.Probed).
	var obs []probes.Observation
	for i, ep := range eps {
		o := probes.Observation{Name: ep.Name, Port: ep.Port, Address: netip.MustParseAddr(ep.Address), Sources: []string{"dnszone:internal.example"},
			Duration: 20 * time.Millisecond, Attempts: 1, Failure: probes.Failure(ep.Fault().Failure)}
		if ep.Name == "www.internal.example" {
			o.Sources = append(o.Sources, "static")
		}
		eps[i].Sources, eps[i].Duration = o.Sources, o.Duration
		obs = append(obs, o)
	}
	return r, obs
}

type fakeOutbox struct{ err error }

func (f fakeOutbox) OutboxStats(context.Context) ([]state.ChannelStats, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []state.ChannelStats{{Channel: "certs", Pending: 3, Failed: 1}, {Channel: "oncall", Pending: 0}}, nil
}

// newServer returns a Server that has recorded testReport, served on
// loopback.
func newServer(t *testing.T, o serve.Options) (*serve.Server, string) {
	t.Helper()
	if o.Now == nil {
		o.Now = func() time.Time { return now }
	}
	s := serve.New(o)
	r, obs := testReport()
	s.RecordDiscovery(r.Sources, 5)
	for i := range obs {
		s.ObserveProbe(&obs[i])
	}
	s.RecordReport(r)
	s.RecordRun(daemon.JobProbe, now.Add(-time.Minute), 30*time.Second, nil)
	s.RecordRun(daemon.JobDiscovery, now.Add(-2*time.Minute), time.Second, errors.New("discovery degraded: 1 of 2 sources failed or shrank"))
	s.RecordRun(daemon.JobProbe, now, 0, daemon.ErrSkipped)
	s.RecordRun(daemon.JobProbe, now, 0, fmt.Errorf("probe run: %w", daemon.ErrTimeout))
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, hs.URL
}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, _, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// value returns the value of the series of family name with exactly the
// given labels, and whether it exists.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		if !cmp.Equal(got, labels) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	_, base := newServer(t, serve.Options{
		Outbox: fakeOutbox{},
		Channels: func() []serve.ChannelStats {
			return []serve.ChannelStats{{Channel: "certs", Delivered: 7, Retried: 2}, {Channel: "oncall", Delivered: 1, Refused: 1, Failing: true}}
		},
		Version: "v1.2.3",
	})
	fams := scrape(t, base)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"certwatch_certificate_expiry_timestamp_seconds",
			map[string]string{"sha256": shaWildcard, "subject_cn": "*.internal.example", "issuer_cn": "Example Issuing CA 2", "source": "dnszone:internal.example"},
			float64(now.Add(5 * 24 * time.Hour).Unix())},
		{"certwatch_certificate_expiry_timestamp_seconds",
			map[string]string{"sha256": shaHealthy, "subject_cn": "www.internal.example", "issuer_cn": "Example Issuing CA 2", "source": "static"},
			float64(now.Add(200 * 24 * time.Hour).Unix())},
		{"certwatch_certificate_not_before_timestamp_seconds",
			map[string]string{"sha256": shaHealthy, "subject_cn": "www.internal.example", "issuer_cn": "Example Issuing CA 2", "source": "static"},
			float64(now.Add(-30 * 24 * time.Hour).Unix())},
		// Per endpoint, joinable to probe_success on name, port and address.
		{"certwatch_endpoint_certificate_expiry_timestamp_seconds", map[string]string{"name": "auth.internal.example", "port": "443", "address": "127.0.0.4", "sha256": shaWildcard},
			float64(now.Add(5 * 24 * time.Hour).Unix())},
		{"certwatch_endpoint_certificate_not_before_timestamp_seconds", map[string]string{"name": "www.internal.example", "port": "443", "address": "127.0.0.2", "sha256": shaHealthy},
			float64(now.Add(-30 * 24 * time.Hour).Unix())},
		{"certwatch_endpoint_tls_info", map[string]string{"name": "www.internal.example", "port": "443", "address": "127.0.0.2", "version": "TLS 1.3", "cipher": "TLS_AES_128_GCM_SHA256", "key_exchange": "X25519MLKEM768"}, 1},
		{"certwatch_metrics_series_dropped", map[string]string{"family": "endpoint_certificate"}, 0},
		{"certwatch_revocation_checked_certificates", map[string]string{"method": "crl"}, 2},
		{"certwatch_revocation_checked_certificates", map[string]string{"method": "ocsp"}, 1},
		{"certwatch_revocation_checked_certificates", map[string]string{"method": "none"}, 0},
		{"certwatch_crl_this_update_timestamp_seconds", map[string]string{"url": "http://crl.internal.example/issuing2.crl"}, float64(now.Add(-time.Hour).Unix())},
		{"certwatch_crl_next_update_timestamp_seconds", map[string]string{"url": "http://crl.internal.example/issuing2.crl"}, float64(now.Add(23 * time.Hour).Unix())},
		{"certwatch_probe_success", map[string]string{"name": "hung.internal.example", "port": "443", "address": "127.0.0.16"}, 0},
		{"certwatch_probe_success", map[string]string{"name": "www.internal.example", "port": "443", "address": "127.0.0.2"}, 1},
		{"certwatch_probe_duration_seconds", map[string]string{"name": "www.internal.example", "port": "443", "address": "127.0.0.2"}, 0.02},
		{"certwatch_endpoints", map[string]string{"result": "timeout"}, 1},
		{"certwatch_endpoints", map[string]string{"result": "ok"}, 4},
		{"certwatch_findings", map[string]string{"kind": "expiring", "tier": "page"}, 1},
		{"certwatch_findings", map[string]string{"kind": "discovery_degraded", "tier": "warning"}, 1},
		{"certwatch_discovery_targets", map[string]string{"source": "dnszone:internal.example"}, 5},
		{"certwatch_discovery_targets", map[string]string{"source": "route53"}, 0},
		{"certwatch_inventory_targets", map[string]string{}, 5},
		{"certwatch_last_success_timestamp_seconds", map[string]string{"daemon_job": "probe"}, float64(now.Add(-30 * time.Second).Unix())},
		{"certwatch_job_runs_total", map[string]string{"daemon_job": "probe", "result": "skipped"}, 1},
		{"certwatch_job_runs_total", map[string]string{"daemon_job": "probe", "result": "timeout"}, 1},
		{"certwatch_job_runs_total", map[string]string{"daemon_job": "discovery", "result": "error"}, 1},
		{"certwatch_outbox_depth", map[string]string{"channel": "certs"}, 3},
		{"certwatch_outbox_failed", map[string]string{"channel": "certs"}, 1},
		{"certwatch_state_up", map[string]string{}, 1},
		{"certwatch_notifications_total", map[string]string{"channel": "certs", "result": "delivered"}, 7},
		{"certwatch_notifications_total", map[string]string{"channel": "oncall", "result": "refused"}, 1},
		{"certwatch_channel_failing", map[string]string{"channel": "oncall"}, 1},
		{"certwatch_report_timestamp_seconds", map[string]string{}, float64(now.Unix())},
		{"certwatch_metrics_series_dropped", map[string]string{"family": "probe"}, 0},
	}
	for _, tt := range tests {
		got, ok := value(fams, tt.name, tt.labels)
		if !ok {
			t.Errorf("%s%v: no such series", tt.name, tt.labels)
			continue
		}
		if got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	if _, ok := value(fams, "certwatch_last_success_timestamp_seconds", map[string]string{"daemon_job": "discovery"}); ok {
		t.Error("discovery has a last success timestamp, but its only run failed")
	}
	h := fams["certwatch_probe_latency_seconds"]
	if h == nil || h.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("certwatch_probe_latency_seconds = %v, want a histogram", h)
	}
	var count uint64
	for _, m := range h.Metric {
		count += m.Histogram.GetSampleCount()
	}
	if count != 5 {
		t.Errorf("probe latency histogram counts %d probes, want 5", count)
	}
	for _, global := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if fams[global] == nil {
			t.Errorf("%s missing: runtime collectors not registered", global)
		}
	}
}

// TestMetricsAvoidTargetLabels: Prometheus attaches job and instance to
// every scraped series; a series exposing one of them has it renamed to
// exported_job, and rules written against the documented name never match.
func TestMetricsAvoidTargetLabels(t *testing.T) {
	srv, base := newServer(t, serve.Options{})
	srv.RecordRun("probe", now, time.Second, nil)
	srv.RecordRun("discovery", now, time.Second, errors.New("boom"))
	for name, f := range scrape(t, base) {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "job" || l.GetName() == "instance" {
					t.Errorf("%s has the label %q, which Prometheus reserves for the scrape target", name, l.GetName())
				}
			}
		}
	}
}

func TestMetricsSeriesLimitKeepsMostUrgent(t *testing.T) {
	_, base := newServer(t, serve.Options{SeriesLimit: 2})
	fams := scrape(t, base)
	var subjects []string
	for _, m := range fams["certwatch_certificate_expiry_timestamp_seconds"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "subject_cn" {
				subjects = append(subjects, l.GetValue())
			}
		}
	}
	if want := []string{"*.internal.example", "expired.internal.example"}; !cmp.Equal(sortStrings(subjects), want) {
		t.Errorf("expiry series for %q, want the two most urgent %q", subjects, want)
	}
	if got, _ := value(fams, "certwatch_metrics_series_dropped", map[string]string{"family": "certificate_expiry"}); got != 2 {
		t.Errorf("dropped certificate_expiry series = %v, want 2 (healthy cert via two sources)", got)
	}
	var names []string
	for _, m := range fams["certwatch_endpoint_certificate_expiry_timestamp_seconds"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "name" {
				names = append(names, l.GetValue())
			}
		}
	}
	if want := []string{"api.internal.example", "expired.internal.example"}; !cmp.Equal(sortStrings(names), want) {
		t.Errorf("endpoint expiry series for %q, want the two whose leaf expires first %q", names, want)
	}
	if got, _ := value(fams, "certwatch_metrics_series_dropped", map[string]string{"family": "endpoint_certificate"}); got != 2 {
		t.Errorf("dropped endpoint_certificate series = %v, want 2 (auth and www)", got)
	}
	var failing int
	for _, m := range fams["certwatch_probe_success"].GetMetric() {
		if m.Gauge.GetValue() == 0 {
			failing++
		}
	}
	if n := len(fams["certwatch_probe_success"].GetMetric()); n != 2 || failing != 1 {
		t.Errorf("probe_success: %d series with %d failing, want 2 with the failing endpoint kept", n, failing)
	}
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestStateDownInMetrics(t *testing.T) {
	_, base := newServer(t, serve.Options{Outbox: fakeOutbox{err: errors.New("open state /var/lib/certwatch/state.db: state file is corrupt")}})
	fams := scrape(t, base)
	if got, ok := value(fams, "certwatch_state_up", map[string]string{}); !ok || got != 0 {
		t.Errorf("certwatch_state_up = %v (present %v), want 0", got, ok)
	}
}

func TestReadyz(t *testing.T) {
	ready := errors.New("no inventory yet: the first discovery has not finished")
	store := error(nil)
	_, base := newServer(t, serve.Options{Ready: []serve.Check{
		{Name: "state", Check: func(context.Context) error { return store }},
		{Name: "inventory", Check: func(context.Context) error { return ready }},
	}})
	code, _, body := get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "inventory: no inventory yet") || strings.Contains(body, "state:") {
		t.Errorf("GET /readyz before inventory = %d %q, want 503 naming the inventory check only", code, body)
	}
	ready = nil
	if code, _, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz when ready = %d %q, want 200", code, body)
	}
	store = errors.New("state is locked by another process")
	if code, _, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "state: state is locked") {
		t.Errorf("GET /readyz with the store locked = %d %q, want 503 naming the store", code, body)
	}
	if code, _, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q, want 200 ok", code, body)
	}
}

func TestAPIReport(t *testing.T) {
	s := serve.New(serve.Options{})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	if code, _, _ := get(t, hs.URL+"/api/v1/report"); code != http.StatusServiceUnavailable {
		t.Errorf("GET /api/v1/report before any report = %d, want 503", code)
	}
	r, _ := testReport()
	release := s.RecordReport(r)
	code, h, body := get(t, hs.URL+"/api/v1/report")
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /api/v1/report = %d %s", code, h.Get("Content-Type"))
	}
	var got scan.Report
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	// As recorded, with the summary of it that every view renders, and
	// without what the daemon keeps of each endpoint beyond the JSON
	// (its sources and probe duration).
	want := *r
	want.Summary = scan.NewSummary(r)
	want.Endpoints = slices.Clone(r.Endpoints)
	for i := range want.Endpoints {
		want.Endpoints[i].Sources, want.Endpoints[i].Duration = nil, 0
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report served differs from the one recorded (-recorded +served):\n%s", diff)
	}
	if got.Summary.Findings != len(r.Findings) || got.Summary.Findings == 0 {
		t.Errorf("served summary counts %d findings, want the report's %d", got.Summary.Findings, len(r.Findings))
	}
	// While the daemon holds the report, and once it is released and the
	// server keeps it compressed: a client that accepts gzip gets it so,
	// one that does not gets the same JSON plain.
	encodings := []struct {
		accept string
		gzip   bool
	}{{"gzip", true}, {"br, gzip;q=0.5", true}, {"*", true}, {"identity", false}, {"gzip;q=0", false}, {"gzip;q=0, *", false}, {"", false}}
	for _, released := range []bool{false, true} {
		if released {
			release()
		}
		for _, tc := range encodings {
			req, err := http.NewRequest(http.MethodGet, hs.URL+"/api/v1/report", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept-Encoding", tc.accept) // set, so the client does not decompress
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if enc := resp.Header.Get("Content-Encoding"); (enc == "gzip") != tc.gzip || resp.Header.Get("Vary") != "Accept-Encoding" {
				t.Errorf("released %v, Accept-Encoding %q: Content-Encoding %q, Vary %q; want gzip %v, Vary Accept-Encoding", released, tc.accept, enc, resp.Header.Get("Vary"), tc.gzip)
				continue
			}
			if tc.gzip {
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatalf("released %v, Accept-Encoding %q: %v", released, tc.accept, err)
				}
				if raw, err = io.ReadAll(zr); err != nil {
					t.Fatalf("released %v, Accept-Encoding %q: %v", released, tc.accept, err)
				}
			}
			if string(raw) != body {
				t.Errorf("released %v, Accept-Encoding %q: the JSON differs from the first request's", released, tc.accept)
			}
		}
	}
}

var rowRe = regexp.MustCompile(`(?s)<tr class="tier-([a-z]+)"[^>]*data-deadline="([^"]+)"([^>]*)>.*?<span class="subject">([^<]*)</span>`)

type pageRow struct {
	tier, deadline, subject string
	hidden                  bool
}

func pageRows(t *testing.T, html string) []pageRow {
	t.Helper()
	var rows []pageRow
	for _, m := range rowRe.FindAllStringSubmatch(html, -1) {
		rows = append(rows, pageRow{tier: m[1], deadline: m[2], subject: m[4], hidden: strings.Contains(m[3], "hidden")})
	}
	return rows
}

// TestStatusPageInTierOrder: rows are most urgent first, by tier and then
// deadline (a warning due now sorts below a page due in 5 days), and the
// header counts findings by tier as `certwatch scan` does.
func TestStatusPageInTierOrder(t *testing.T) {
	_, base := newServer(t, serve.Options{})
	code, h, body := get(t, base+"/")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", code, h.Get("Content-Type"))
	}
	want := []pageRow{
		{"critical", "2029-12-29T12:00:00Z", "expired.internal.example", false},
		{"page", "2030-01-06T12:00:00Z", "*.internal.example", false},
		{"warning", "2030-01-01T11:00:00Z", "route53", false},
		{"warning", "2030-01-01T12:00:00Z", "vault.internal.example:8200", false},
		{"ok", "2030-07-20T12:00:00Z", "www.internal.example", false},
	}
	if diff := cmp.Diff(want, pageRows(t, body), cmp.AllowUnexported(pageRow{})); diff != "" {
		t.Errorf("status page rows (-want +got):\n%s", diff)
	}
	for _, s := range []string{
		`<summary>2 endpoints, 2 names</summary>`,            // blast radius of the wildcard
		`api.internal.example:443 (127.0.0.3)`,               // and its members
		`due: not renewed yet`,                               // renewal status
		`Discovery source route53 failed: list hosted zones`, // banner
		`<link rel="stylesheet" href="/static/style.css">`,   // no CDN
		`<meta name="viewport"`,                              // phone
		`<option value="dnszone:internal.example">`,          // source filter
		`<option value="static">`,                            // static targets too
		`<span id="finding-count">4 findings</span>`,         // as the CLI counts them
		`<li class="tier-warning"><span class="badge">warning</span> 2</li>`,
		// The timeline: one bar for what is due, then one per week.
		`<g class="bar"><title>due now or overdue: 1 critical, 1 warning</title>`,
		`<g class="bar"><title>week of 2030-01-01: 1 page, 1 warning</title>`,
		`<g class="bar"><title>week of 2030-01-08</title>`,
		`<option value="discovery_degraded">discovery_degraded`, // kind filter, by the name every view gives it
		// Key exchange of the endpoints that answered: the hybrid was
		// offered to one, the others' probes predate the field.
		`Key exchange (post-quantum hybrid offered): <span class="mono">RSA key transport</span> 3, <span class="mono">X25519MLKEM768</span> 1`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("status page lacks %q", s)
		}
	}
	if strings.Contains(body, "http://") && regexp.MustCompile(`(src|href)="https?://`).MatchString(body) {
		t.Error("status page loads an external resource")
	}
	for _, asset := range []string{"/static/style.css", "/static/app.js"} {
		if code, _, _ := get(t, base+asset); code != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", asset, code)
		}
	}
	if code, _, _ := get(t, base+"/templates/status.html"); code == http.StatusOK {
		t.Error("templates are served")
	}
}

func TestStatusPageFilters(t *testing.T) {
	_, base := newServer(t, serve.Options{})
	tests := []struct {
		query string
		want  []string // subjects shown
	}{
		{"", []string{"expired.internal.example", "*.internal.example", "route53", "vault.internal.example:8200", "www.internal.example"}},
		{"?tier=page", []string{"expired.internal.example", "*.internal.example"}},
		{"?kind=unreachable", []string{"vault.internal.example:8200"}},
		// The unreachable target was listed by hand: static.
		{"?source=static", []string{"vault.internal.example:8200", "www.internal.example"}},
		{"?q=AUTH.internal", []string{"*.internal.example"}},
		{"?q=127.0.0.7", []string{"expired.internal.example"}},
		{"?tier=critical&q=www", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			_, _, body := get(t, base+"/"+tt.query)
			var shown []string
			for _, r := range pageRows(t, body) {
				if !r.hidden {
					shown = append(shown, r.subject)
				}
			}
			if !cmp.Equal(shown, tt.want) {
				t.Errorf("rows shown = %q, want %q", shown, tt.want)
			}
			if empty := strings.Contains(body, `<p id="empty">`); empty != (len(tt.want) == 0) {
				t.Errorf("'nothing matches' shown = %v, want %v", empty, len(tt.want) == 0)
			}
		})
	}
}

func TestStatusPageEscapes(t *testing.T) {
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	s.RecordReport(&scan.Report{GeneratedAt: now, Certificates: []policy.Certificate{
		{SHA256: shaHealthy, Subject: `<script>alert(1)</script>`, Issuer: `"><img src=x>`, NotAfter: policy.At(now.Add(time.Hour))},
	}})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	_, h, body := get(t, hs.URL+"/")
	if strings.Contains(body, "<script>alert") || strings.Contains(body, `"><img`) {
		t.Error("certificate fields are not escaped")
	}
	if !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("Content-Security-Policy = %q, want script-src 'self'", h.Get("Content-Security-Policy"))
	}
}

func TestNoReportYet(t *testing.T) {
	s := serve.New(serve.Options{})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	code, _, body := get(t, hs.URL+"/")
	if code != http.StatusOK || !strings.Contains(body, "No report yet") {
		t.Errorf("GET / before any report = %d, want 200 saying there is no report yet", code)
	}
}

// TestRenderingBracketsEachPage: Options.Rendering is called as each
// rendering of the status page starts and its done once after it, once
// the page is sent, and neither for the metrics, the report's JSON or the
// health checks.
func TestRenderingBracketsEachPage(t *testing.T) {
	var started, done atomic.Int32
	_, url := newServer(t, serve.Options{Rendering: func() func() {
		started.Add(1)
		return func() { done.Add(1) }
	}})
	// The page is sent, its length said, before done is called: the
	// client may have it first.
	calls := func(want int32) (int32, int32) {
		deadline := time.Now().Add(5 * time.Second)
		for done.Load() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond) // a call too many would come now
		return started.Load(), done.Load()
	}
	for _, path := range []string{"/metrics", "/api/v1/report", "/healthz", "/readyz"} {
		get(t, url+path)
	}
	if s, d := calls(0); s != 0 || d != 0 {
		t.Fatalf("Rendering called %d times and its done %d without a rendering of the page", s, d)
	}
	for i := range 2 {
		if code, _, body := get(t, url+"/"); code != http.StatusOK || !strings.Contains(body, "</html>") {
			t.Fatalf("GET / = %d, want the whole page", code)
		}
		if s, d := calls(int32(i + 1)); s != int32(i+1) || d != int32(i+1) {
			t.Fatalf("Rendering called %d times and its done %d after %d renderings, want once each", s, d, i+1)
		}
	}
}

func TestPprofOnlyWhenEnabled(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			hs := httptest.NewServer(serve.New(serve.Options{Pprof: on}).Handler())
			defer hs.Close()
			code, _, _ := get(t, hs.URL+"/debug/pprof/goroutine?debug=1")
			if (code == http.StatusOK) != on {
				t.Errorf("pprof %v: GET /debug/pprof/goroutine = %d", on, code)
			}
		})
	}
}

func TestServeStopsOnCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	s := serve.New(serve.Options{})
	go func() { done <- s.Serve(ctx, ln) }()
	if code, _, _ := get(t, "http://"+ln.Addr().String()+"/healthz"); code != http.StatusOK {
		t.Fatalf("GET /healthz = %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Error("server still answers after Serve returned")
	}
}

func TestStatusPageACM(t *testing.T) {
	const (
		servedARN   = "arn:aws:acm:eu-west-1:123456789012:certificate/11111111-aaaa"
		unservedARN = "arn:aws:acm:us-east-1:123456789012:certificate/22222222-bbbb"
		albARN      = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/app/shop/abc"
		cfARN       = "arn:aws:cloudfront::123456789012:distribution/E2ABC"
	)
	r, _ := testReport()
	r.Sources = append(r.Sources, scan.SourceResult{Name: "acm:123456789012", Certificates: 2})
	r.ACM = []policy.ACMCertificate{
		{SHA256: shaWildcard, Renewal: policy.AutoRenews, RenewBy: now.Add(-25 * 24 * time.Hour)},
		{Renewal: policy.RenewalManual},
	}
	r.ACM[0].ARN, r.ACM[0].InUseBy = servedARN, []string{albARN}
	a := &r.ACM[1]
	a.ARN, a.Account, a.DomainName, a.Issuer, a.NotAfter, a.InUseBy = unservedARN, "123456789012", "cdn.example.com", "Amazon RSA 2048 M02", now.Add(3*24*time.Hour), []string{cfARN}
	r.Findings = append(r.Findings, policy.Finding{Kind: policy.Expiring, Tier: policy.Page, Name: unservedARN, Subject: "cdn.example.com",
		Deadline: policy.At(now.Add(3 * 24 * time.Hour)), Message: "imported certificate expires in 3 days; ACM never renews it"})

	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	s.RecordReport(r)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	_, _, body := get(t, hs.URL+"/")

	var subjects []string
	for _, row := range pageRows(t, body) {
		subjects = append(subjects, row.subject)
	}
	want := []string{"expired.internal.example", "cdn.example.com", "*.internal.example", "route53", "vault.internal.example:8200", "www.internal.example"}
	if !cmp.Equal(subjects, want) {
		t.Errorf("rows %q, want %q (the ACM certificate no endpoint serves in tier, then deadline order)", subjects, want)
	}
	for _, s := range []string{
		cfARN, albARN, unservedARN, // blast radius and identity
		"ACM: manual",                            // renewal of the imported one
		"imported certificate expires in 3 days", // its finding, on its row
		`0 endpoints, 0 names, 1 AWS resource`,   // the unserved one
		`<option value="acm:123456789012">`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("status page lacks %q", s)
		}
	}
	if strings.Count(body, unservedARN) < 1 || strings.Contains(body, `<span class="subject">`+unservedARN) {
		t.Error("the unserved ACM certificate's finding got a row of its own instead of joining the certificate's")
	}
}

func TestStatusPageRenewal(t *testing.T) {
	day := 24 * time.Hour
	old := policy.Certificate{SHA256: shaExpired, Subject: "shop.example.com", DNSNames: []string{"shop.example.com"}, NotAfter: policy.At(now.Add(4 * day))}
	renewed := policy.Certificate{SHA256: shaHealthy, Subject: "shop.example.com", DNSNames: []string{"shop.example.com"}, NotAfter: policy.At(now.Add(300 * day))}
	expiring := policy.Finding{Kind: policy.Expiring, Tier: policy.Page, Certificate: shaExpired, Deadline: policy.At(old.NotAfter.Time())}
	stale := old
	stale.RenewedBy = &policy.Replacement{SHA256: renewed.SHA256, NotAfter: renewed.NotAfter.Time()}
	tests := []struct {
		name     string
		certs    []policy.Certificate
		findings []policy.Finding
		want     string
	}{
		{"due", []policy.Certificate{old}, []policy.Finding{expiring}, "due: not renewed yet"},
		// A newer certificate for the same names is no renewal unless
		// policy says so (TestStatusPageRenewalIsPolicys).
		{"newer, not judged a renewal", []policy.Certificate{old, renewed}, []policy.Finding{expiring}, "due: not renewed yet"},
		{"stale deployment", []policy.Certificate{stale, renewed}, []policy.Finding{{Kind: policy.StaleDeployment, Tier: policy.Page, Certificate: shaExpired, Deadline: policy.At(old.NotAfter.Time())}}, "renewed, but not deployed on these endpoints"},
		{"acm renewal failed", []policy.Certificate{old}, []policy.Finding{{Kind: policy.RenewalFailed, Tier: policy.Warning, Certificate: shaExpired, Deadline: policy.At(old.NotAfter.Time())}}, "renewal failed"},
		{"healthy", []policy.Certificate{renewed}, nil, "–"},
	}
	cell := regexp.MustCompile(`<td data-label="Renewal" class="renewal">([^<]*)</td>`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := serve.New(serve.Options{Now: func() time.Time { return now }})
			s.RecordReport(&scan.Report{GeneratedAt: now, Certificates: tt.certs, Findings: tt.findings})
			hs := httptest.NewServer(s.Handler())
			defer hs.Close()
			_, _, body := get(t, hs.URL+"/")
			m := cell.FindStringSubmatch(body)
			if m == nil {
				t.Fatal("no renewal cell")
			}
			if got := html.UnescapeString(m[1]); got != tt.want {
				t.Errorf("renewal = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStatusPageAtRest: a served certificate also held at rest lists its
// places beside its endpoints; one held at rest only is a row of its own
// that its finding joins, and a finding about its renewal (cert-manager's)
// is its renewal; each place is a metric series, under the series limit.
func TestStatusPageAtRest(t *testing.T) {
	const shaClient = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
	r, _ := testReport()
	file := atrest.Location{Kind: atrest.File, Where: "/etc/ssl/wildcard.pem"}
	sec := atrest.Location{Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt"}
	client := atrest.Location{Kind: atrest.Secret, Where: "mtls/client", Key: "tls.crt"}
	r.AtRest = []policy.AtRestCertificate{
		{Certificate: atrest.Certificate{SHA256: shaClient, Subject: "client.internal.example", Issuer: "Example Issuing CA 2", NotAfter: now.Add(4 * 24 * time.Hour), Locations: []atrest.Location{client}}},
		{Certificate: atrest.Certificate{SHA256: shaWildcard, Subject: "*.internal.example", NotAfter: now.Add(5 * 24 * time.Hour), Locations: []atrest.Location{file, sec}}},
	}
	rec := r.Findings[1].Refs()
	rec.Locations = []atrest.Location{file, sec}
	r.Findings[1].Records = &rec
	r.Findings = append(r.Findings, policy.Finding{Kind: policy.CertManagerRenewalOverdue, Tier: policy.Page, Certificate: shaClient, Subject: "client.internal.example",
		Deadline: policy.At(now.Add(4 * 24 * time.Hour)), Endpoints: []policy.Endpoint{}, Records: &policy.Records{Locations: []atrest.Location{client}}, Message: "certificate held at rest expires in 4 days"})

	s := serve.New(serve.Options{Now: func() time.Time { return now }, SeriesLimit: 2})
	s.RecordReport(r)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	_, _, body := get(t, hs.URL+"/")
	var subjects []string
	for _, row := range pageRows(t, body) {
		subjects = append(subjects, row.subject)
	}
	want := []string{"expired.internal.example", "client.internal.example", "*.internal.example", "route53", "vault.internal.example:8200", "www.internal.example"}
	if !cmp.Equal(subjects, want) {
		t.Errorf("rows %q, want %q (the certificate held at rest only in tier, then deadline order)", subjects, want)
	}
	for _, s := range []string{
		"2 endpoints, 2 names, held at rest in 2 places", "file /etc/ssl/wildcard.pem", "secret payments/api-tls tls.crt",
		"0 endpoints, 0 names, held at rest in 1 place", "secret mtls/client tls.crt", "certificate held at rest expires in 4 days",
		`class="renewal">certmanager renewal overdue<`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("status page lacks %q", s)
		}
	}
	fams := scrape(t, hs.URL)
	if got, ok := value(fams, "certwatch_certificate_at_rest_expiry_timestamp_seconds", map[string]string{"kind": "secret", "location": "secret mtls/client tls.crt", "sha256": shaClient, "subject_cn": "client.internal.example"}); !ok || got != float64(now.Add(4*24*time.Hour).Unix()) {
		t.Errorf("at rest expiry of the client certificate = %v, %v", got, ok)
	}
	if n := len(fams["certwatch_certificate_at_rest_expiry_timestamp_seconds"].GetMetric()); n != 2 {
		t.Errorf("%d at rest series, want the limit, 2", n)
	}
	if got, _ := value(fams, "certwatch_metrics_series_dropped", map[string]string{"family": "certificate_at_rest"}); got != 1 {
		t.Errorf("dropped certificate_at_rest series = %v, want 1", got)
	}
}

// TestEndpointViaALoadBalancerListedOnce: a certificate served on a name
// through an AWS load balancer (Endpoint.Via), with a finding naming that
// endpoint, has one endpoint in its blast radius, not one with and one
// without the load balancer.
func TestEndpointViaALoadBalancerListedOnce(t *testing.T) {
	const lb = "internal-api-123.eu-west-1.elb.amazonaws.com"
	sha := strings.Repeat("ab", 32)
	ep := policy.Endpoint{Name: "api.internal.example", Port: 443, Address: "10.0.0.7", Via: lb}
	r := &scan.Report{
		GeneratedAt:  now,
		Certificates: []policy.Certificate{{SHA256: sha, Subject: "api.internal.example", Issuer: "Internal CA", DNSNames: []string{"api.internal.example"}, NotBefore: policy.At(now.Add(-80 * 24 * time.Hour)), NotAfter: policy.At(now.Add(10 * 24 * time.Hour))}},
		Endpoints:    []policy.Probed{{Name: ep.Name, Port: ep.Port, Address: ep.Address, Via: lb, Certificate: sha}},
		Findings: []policy.Finding{{Kind: policy.Expiring, Tier: policy.Page, Certificate: sha, Subject: "api.internal.example", Deadline: policy.At(now.Add(10 * 24 * time.Hour)),
			Endpoints: []policy.Endpoint{ep}, Message: "expires in 10 days"}},
	}
	s := serve.New(serve.Options{Now: func() time.Time { return now }})
	s.RecordReport(r)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	_, _, body := get(t, hs.URL+"/")
	if !strings.Contains(body, "<summary>1 endpoint, 1 name</summary>") {
		i := strings.Index(body, "<summary>")
		t.Errorf("blast radius of a certificate served through a load balancer: want 1 endpoint; page has %q", body[i:min(len(body), i+200)])
	}
}

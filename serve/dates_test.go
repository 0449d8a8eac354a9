package serve_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
)

// TestFarDates serves certificates valid until 9999-12-31 (RFC 5280's "no
// well-defined expiration date") and from year 0001 on loopback, scans
// them with the real prober, and checks every number a user reads: the
// metrics hold the exact Unix time (UnixNano overflows and said 1816), the
// page the exact number of days (a saturated Duration said 106751d), and
// no finding but the expiry and renewal_missed of the one valid since
// year 1 fires.
func TestFarDates(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	noExpiry := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	ancient := time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Far Dates Root", ancient, noExpiry)
	forever := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"forever.example"}, NotBefore: now.AddDate(-1, 0, 0), NotAfter: noExpiry})
	old := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"old.example"}, NotBefore: ancient, NotAfter: now.AddDate(0, 0, 10)})

	var targets []discovery.Target
	for _, l := range []*certtest.Leaf{forever, old} {
		s, err := certtest.Serve("127.0.0.1:0", l.TLSCertificate())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		targets = append(targets, discovery.Target{Name: l.Cert.DNSNames[0], Port: int(s.Addr().Port()), Addresses: []netip.Addr{s.Addr().Addr()}, Sources: []string{"static"}})
	}
	srv := serve.New(serve.Options{Now: func() time.Time { return now }})
	pass := &scan.Pass{
		Prober:        probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), Now: func() time.Time { return now }}),
		Rules:         policy.DefaultRules(),
		Now:           func() time.Time { return now },
		OnObservation: srv.ObserveProbe,
	}
	r := pass.Probe(t.Context(), targets, now)
	// The one valid since year 1 expires in 10 days: it is expiring, and
	// past its expected renewal (30 days before expiry, when the notice
	// tier starts) and the grace after it (a thirtieth of its lifetime,
	// at most half of those 30 days).
	var kinds []string
	for _, f := range r.Findings {
		kinds = append(kinds, string(f.Kind)+" "+f.Subject)
		if f.Kind == policy.RenewalMissed && !strings.Contains(f.Message, "should have been renewed by 2029-12-12") {
			t.Errorf("renewal_missed message: %s; want renewal by 2029-12-12", f.Message)
		}
	}
	if slices.Sort(kinds); strings.Join(kinds, ", ") != "expiring old.example, renewal_missed old.example" {
		t.Errorf("findings %v, want only old.example's expiring and renewal_missed", kinds)
	}
	srv.RecordReport(r)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	fams := scrape(t, hs.URL)
	got := map[string]float64{}
	for _, m := range fams["certwatch_certificate_expiry_timestamp_seconds"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "subject_cn" {
				got[l.GetValue()] = m.Gauge.GetValue()
			}
		}
	}
	if want := float64(noExpiry.Unix()); got["forever.example"] != want { // 253402300799
		t.Errorf("expiry of forever.example = %v (%s), want %v (9999-12-31)", got["forever.example"], time.Unix(int64(got["forever.example"]), 0).UTC(), want)
	}
	if want := float64(now.AddDate(0, 0, 10).Unix()); got["old.example"] != want {
		t.Errorf("expiry of old.example = %v, want %v", got["old.example"], want)
	}

	var endpointExpiry []float64
	for _, m := range fams["certwatch_endpoint_certificate_expiry_timestamp_seconds"].GetMetric() {
		endpointExpiry = append(endpointExpiry, m.Gauge.GetValue())
	}
	if len(endpointExpiry) != 2 || !slices.Contains(endpointExpiry, float64(noExpiry.Unix())) {
		t.Errorf("endpoint expiry series = %v, want two, one at %d", endpointExpiry, noExpiry.Unix())
	}
	if n := len(fams["certwatch_endpoint_tls_info"].GetMetric()); n != 2 {
		t.Errorf("%d certwatch_endpoint_tls_info series, want one per endpoint (2)", n)
	}

	_, _, page := get(t, hs.URL+"/")
	days := policy.DaysUntil(noExpiry, now) // 2914853
	if !strings.Contains(page, fmt.Sprintf(`<td data-label="Left" class="left">%dd</td>`, days)) || strings.Contains(page, "106751d") {
		t.Errorf("status page does not show %dd left for the 9999 certificate", days)
	}
	if !strings.Contains(page, "9999-12-31 23:59 UTC") {
		t.Error("status page does not show the 9999-12-31 not-after date")
	}
	_, _, api := get(t, hs.URL+"/api/v1/report")
	// The endpoints say what their handshake negotiated (certtest's servers
	// take crypto/tls's defaults).
	for _, s := range []string{`"not_after": "9999-12-31T23:59:59Z"`, `"not_before": "0001-01-02T00:00:00Z"`, `"tls_version": "TLS 1.3"`, `"cipher_suite": "TLS_AES_`} {
		if !strings.Contains(api, s) {
			t.Errorf("report JSON lacks %s", s)
		}
	}
}

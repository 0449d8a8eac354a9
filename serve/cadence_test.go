package serve_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
)

// TestRenewalCadenceShown: a certificate's expected renewal and the date
// it last changed reach /metrics (certwatch_certificate_expected_renewal_
// and _last_changed_timestamp_seconds, only when known, within the series
// limit) and the status page's renewal column; one never seen to change
// says since when.
func TestRenewalCadenceShown(t *testing.T) {
	t.Parallel()
	changed, first := now.AddDate(0, 0, -20), now.AddDate(0, 0, -50)
	due := now.AddDate(0, 0, 40)
	certs := []policy.Certificate{
		{SHA256: strings.Repeat("a", 64), Subject: "renewed.example", Issuer: "CA", DNSNames: []string{"renewed.example"},
			NotBefore: policy.At(changed), NotAfter: policy.At(now.AddDate(0, 0, 70)), ExpectedRenewal: policy.At(due), Lineage: &policy.Lineage{FirstSeen: changed, LastChanged: changed, Previous: strings.Repeat("b", 64)}},
		{SHA256: strings.Repeat("c", 64), Subject: "steady.example", Issuer: "CA", DNSNames: []string{"steady.example"},
			NotBefore: policy.At(first), NotAfter: policy.At(now.AddDate(0, 0, 100)), ExpectedRenewal: policy.At(now.AddDate(0, 0, 50)), Lineage: &policy.Lineage{FirstSeen: first}},
	}
	s := serve.New(serve.Options{Now: func() time.Time { return now }, SeriesLimit: 1})
	s.RecordReport(&scan.Report{GeneratedAt: now, Endpoints: []scan.Endpoint{}, Certificates: certs})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()

	fams := scrape(t, hs.URL)
	lc := fams["certwatch_certificate_last_changed_timestamp_seconds"].GetMetric()
	if len(lc) != 1 || lc[0].GetGauge().GetValue() != float64(changed.Unix()) {
		t.Errorf("certwatch_certificate_last_changed_timestamp_seconds = %v, want one series at %v (the series limit keeps one certificate)", lc, changed.Unix())
	}
	er := fams["certwatch_certificate_expected_renewal_timestamp_seconds"].GetMetric()
	if len(er) != 1 || er[0].GetGauge().GetValue() != float64(due.Unix()) {
		t.Errorf("certwatch_certificate_expected_renewal_timestamp_seconds = %v, want one series at %v", er, due.Unix())
	}

	s = serve.New(serve.Options{Now: func() time.Time { return now }})
	s.RecordReport(&scan.Report{GeneratedAt: now, Endpoints: []scan.Endpoint{}, Certificates: certs})
	hs2 := httptest.NewServer(s.Handler())
	defer hs2.Close()
	_, _, body := get(t, hs2.URL+"/")
	for _, want := range []string{"renew by <time datetime=\"" + due.Format(time.RFC3339), "last changed <time datetime=\"" + changed.Format(time.RFC3339),
		"unchanged since <time datetime=\"" + first.Format(time.RFC3339)} {
		if !strings.Contains(body, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
}

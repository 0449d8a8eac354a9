package serve_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
)

// BenchmarkRecordReport10k records a report of 10,000 endpoints, each with
// a certificate of its own and an expiring finding, as the leader does
// after every probe run: the status page's view is built from it.
// view-MB is what the server holds for it once recorded, beyond the
// report itself.
//
//	go test -run '^$' -bench RecordReport10k -benchtime 5x ./serve/
func BenchmarkRecordReport10k(b *testing.B) {
	r := farmReport(10000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := serve.New(serve.Options{})
	s.RecordReport(r)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ResetTimer()
	for b.Loop() {
		s.RecordReport(r)
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "view-MB")
	runtime.KeepAlive(r)
}

// farmReport is a report of n endpoints, each with a certificate of its
// own and an expiring finding about it.
func farmReport(n int) *scan.Report {
	now := time.Now()
	r := &scan.Report{GeneratedAt: now, Targets: n}
	for i := range n {
		name := fmt.Sprintf("ep-%06d.farm.test", i)
		sha := fmt.Sprintf("%064x", i+1)
		ep := policy.Endpoint{Name: name, Port: 443, Address: fmt.Sprintf("127.1.%d.%d", i/250, i%250+1)}
		r.Endpoints = append(r.Endpoints, scan.Endpoint{Name: ep.Name, Port: ep.Port, Address: ep.Address, Certificate: sha})
		r.Certificates = append(r.Certificates, policy.Certificate{SHA256: sha, Subject: name, DNSNames: []string{name}, NotAfter: policy.At(now.Add(time.Duration(i%90+1) * 24 * time.Hour))})
		r.Findings = append(r.Findings, policy.Finding{Kind: policy.Expiring, Tier: policy.Notice, Certificate: sha, Subject: name,
			Deadline: policy.At(now.Add(time.Duration(i%90+1) * 24 * time.Hour)), Endpoints: []policy.Endpoint{ep}})
	}
	return r
}

// BenchmarkStatusPage10k renders the status page of a report of 10,000
// certificates as the server holds it between runs (RecordReport, then
// released): the rows are read back, filtered, counted and laid out on
// the timeline, and the first PageLimit are written out, to a client
// that takes each byte as it comes. page-peak-MB is the most the heap
// grew over what it held before, sampled as the page renders; B/op is
// the rendering's garbage.
//
//	go test -run '^$' -bench StatusPage10k -benchtime 5x ./serve/
func BenchmarkStatusPage10k(b *testing.B) {
	s := serve.New(serve.Options{TempDir: b.TempDir()})
	s.RecordReport(farmReport(10000))()
	h := s.Handler()
	get := func() {
		w := &discardWriter{header: http.Header{}}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.code != http.StatusOK || w.n == 0 {
			b.Fatalf("GET / = %d, %d bytes", w.code, w.n)
		}
	}
	get()
	var peak uint64
	b.ReportAllocs()
	for b.Loop() {
		// After a collection, as an idle server would have made between
		// two visits.
		peak = max(peak, serve.HeapGrowth(get))
	}
	b.ReportMetric(float64(peak)/1e6, "page-peak-MB")
}

// discardWriter is a client that takes the response as it comes and
// keeps none of it.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (d *discardWriter) Header() http.Header  { return d.header }
func (d *discardWriter) WriteHeader(code int) { d.code = code }
func (d *discardWriter) Write(p []byte) (int, error) {
	if d.code == 0 {
		d.code = http.StatusOK
	}
	d.n += len(p)
	return len(p), nil
}

// BenchmarkScrape100k serves /metrics for a recorded report of 100,000
// endpoints, each with a certificate of its own: every per-certificate
// and per-endpoint family at its cap (SeriesLimit, 10,000 series).
// scrape-peak-MB is the most heap the scrape held live beyond what the
// server held before it, sampled (after a collection) as the response is
// written: a scrape that lands on a probe run's peak adds that to it.
//
//	go test -run '^$' -bench Scrape100k -benchtime 3x ./serve/
func BenchmarkScrape100k(b *testing.B) {
	s := serve.New(serve.Options{})
	s.RecordReport(farmReport(100000))
	h := s.Handler()
	var peak uint64
	for b.Loop() {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := &heapSampler{ResponseRecorder: httptest.NewRecorder(), every: 256 << 10}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if w.Code != http.StatusOK || w.Body.Len() == 0 {
			b.Fatalf("GET /metrics = %d, %d bytes", w.Code, w.Body.Len())
		}
		peak = max(peak, w.peak-min(w.peak, before.HeapAlloc))
	}
	b.ReportMetric(float64(peak)/1e6, "scrape-peak-MB")
}

// heapSampler records the live heap (after a collection) every time
// another every bytes of the response have been written, less the body
// it keeps so far, which is not the scrape's own.
type heapSampler struct {
	*httptest.ResponseRecorder
	every, since int
	peak         uint64
}

func (h *heapSampler) Write(p []byte) (int, error) {
	h.since += len(p)
	if h.since >= h.every {
		h.since = 0
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		h.peak = max(h.peak, m.HeapAlloc-min(m.HeapAlloc, uint64(h.Body.Cap())))
	}
	return h.ResponseRecorder.Write(p)
}

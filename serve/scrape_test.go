package serve_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/certwatch/certwatch/serve"
)

// TestMetricsFormats: /metrics, whose report families are gathered and
// written one after the other, says the same in each format Prometheus
// negotiates: the text format as it is, protocol buffers, and OpenMetrics
// compressed, which ends with one "# EOF"; every family once.
func TestMetricsFormats(t *testing.T) {
	t.Parallel()
	s := serve.New(serve.Options{SeriesLimit: 40})
	s.RecordReport(farmReport(100))
	h := s.Handler()
	get := func(accept string, gzipped bool) (*httptest.ResponseRecorder, []byte) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if gzipped {
			r.Header.Set("Accept-Encoding", "gzip")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("GET /metrics (Accept %q) = %d: %s", accept, w.Code, w.Body)
		}
		body := w.Body.Bytes()
		if got := w.Header().Get("Content-Encoding"); (got == "gzip") != gzipped {
			t.Fatalf("GET /metrics (Accept-Encoding gzip: %v): Content-Encoding %q", gzipped, got)
		}
		if gzipped {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		return w, body
	}

	_, text := get("", false)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parse the text format: %v", err)
	}
	for name, want := range map[string]int{
		"certwatch_certificate_expiry_timestamp_seconds":          40,
		"certwatch_endpoint_certificate_expiry_timestamp_seconds": 40,
		"certwatch_probe_success":                                 40,
		"certwatch_findings":                                      1,
		"certwatch_build_info":                                    1,
	} {
		if got := len(fams[name].GetMetric()); got != want {
			t.Errorf("text format: %s has %d series, want %d", name, got, want)
		}
	}

	w, pb := get("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", false)
	dec := expfmt.NewDecoder(bytes.NewReader(pb), expfmt.Format(w.Header().Get("Content-Type")))
	seen := map[string]int{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode protocol buffers: %v", err)
		}
		if seen[mf.GetName()] > 0 {
			t.Errorf("protocol buffers: family %s sent twice", mf.GetName())
		}
		seen[mf.GetName()] = len(mf.GetMetric())
	}
	for name, mf := range fams {
		if seen[name] != len(mf.GetMetric()) && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			t.Errorf("family %s: %d series in protocol buffers, %d in the text format", name, seen[name], len(mf.GetMetric()))
		}
	}
	if len(seen) != len(fams) {
		t.Errorf("%d families in protocol buffers, %d in the text format", len(seen), len(fams))
	}

	_, om := get("application/openmetrics-text; version=1.0.0", true)
	if n := bytes.Count(om, []byte("# EOF\n")); n != 1 || !bytes.HasSuffix(om, []byte("# EOF\n")) {
		t.Errorf("OpenMetrics: %d \"# EOF\" lines, at the end: %v; want one, last", n, bytes.HasSuffix(om, []byte("# EOF\n")))
	}
	// certwatch's own families (client_golang's Go collector names two
	// families alike in OpenMetrics, go_memstats_alloc_bytes and its
	// _total).
	types, own := map[string]int{}, 0
	for sc := bufio.NewScanner(bytes.NewReader(om)); sc.Scan(); {
		if name, ok := strings.CutPrefix(sc.Text(), "# TYPE certwatch_"); ok {
			types[strings.Fields(name)[0]]++
		}
	}
	for name, n := range types {
		if n != 1 {
			t.Errorf("OpenMetrics: family certwatch_%s typed %d times", name, n)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "certwatch_") {
			own++
		}
	}
	if len(types) != own || own < 10 {
		t.Errorf("%d certwatch families in OpenMetrics, %d in the text format", len(types), own)
	}
}

// TestMetricsCutOffWhenAPartFails: a family that cannot be gathered (here
// two series alike, from an endpoint listed twice) fails the scrape even
// once other families are written: the response is cut off, never a
// complete-looking scrape without the family.
func TestMetricsCutOffWhenAPartFails(t *testing.T) {
	t.Parallel()
	r := farmReport(3)
	r.Endpoints = append(r.Endpoints, r.Endpoints[0])
	s := serve.New(serve.Options{})
	s.RecordReport(r)
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	// Uncompressed, so that the families before it are on the wire.
	req, err := http.NewRequest(http.MethodGet, hs.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET /metrics = %d, %d bytes; want the families before the failing one written", resp.StatusCode, len(body))
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("GET /metrics with a family that cannot be gathered: read %d bytes, then %v; want the response cut off (unexpected EOF)", len(body), err)
	}
}

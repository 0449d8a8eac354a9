package serve

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// serveMetrics serves /metrics: the registry's families, then those of
// the latest report's view (metrics.reportParts), each part gathered and
// written before the next is built. client_golang builds every series of
// what it gathers before it writes one, and the report's ten
// per-certificate and per-endpoint families, up to SeriesLimit series
// each, gathered at once held 34–46 MB at 100,000 endpoints at every
// scrape, on top of whatever a probe run held then; one at a time, the
// largest alone (BenchmarkScrape100k). The format is negotiated as
// promhttp does (OpenMetrics included), and gzip when the client takes
// it. A failure to gather before anything is written is a 500; after,
// the response is cut off, so the scrape fails rather than looks
// complete.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	s.storeView(r.Context()) // the registry's collection reads the snapshot
	s.mu.RLock()
	v := s.view
	s.mu.RUnlock()
	parts := []prometheus.Gatherer{s.registry}
	if v != nil {
		for _, p := range s.metrics.reportParts(v) {
			reg := prometheus.NewRegistry()
			if err := reg.Register(p); err != nil {
				s.metricsFailed(w, false, err)
				return
			}
			parts = append(parts, reg)
		}
	}

	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultOpenMetricsAcceptedFormats()...)
	w.Header().Add("Vary", "Accept")
	w.Header().Add("Vary", "Accept-Encoding")
	w.Header().Set("Content-Type", string(format))
	var zw *gzip.Writer
	var enc expfmt.Encoder // set once the first part is gathered
	for _, g := range parts {
		mfs, err := g.Gather()
		if err != nil {
			s.metricsFailed(w, enc != nil, err)
			return
		}
		if enc == nil {
			var out io.Writer = w
			if acceptsGzip(r.Header.Get("Accept-Encoding")) {
				w.Header().Set("Content-Encoding", "gzip")
				zw = gzip.NewWriter(w)
				out = zw
			}
			enc = expfmt.NewEncoder(out, format)
		}
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				s.metricsFailed(w, true, err)
				return
			}
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil { // OpenMetrics' "# EOF"
			s.metricsFailed(w, true, err)
			return
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			s.metricsFailed(w, true, err)
		}
	}
}

// metricsFailed ends a scrape that could not be gathered or written: with
// a 500 when nothing was written yet, else by cutting the response off
// (http.ErrAbortHandler), which the scraper sees as a failed scrape.
func (s *Server) metricsFailed(w http.ResponseWriter, started bool, err error) {
	s.logger.Warn("metrics scrape failed", "err", err)
	if !started {
		http.Error(w, fmt.Sprintf("An error has occurred while gathering metrics:\n\n%v", err), http.StatusInternalServerError)
		return
	}
	panic(http.ErrAbortHandler)
}

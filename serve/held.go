package serve

import (
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"weak"

	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/scan"
)

// heldReport is the latest report as the server keeps it between runs
// (from the daemon's release of it, Server.RecordReport; the report as it
// is before): its JSON as /api/v1/report sends it, gzip-compressed, and
// what each endpoint carries beyond the JSON (policy.Probed.Sources and
// Duration).
// At 100,000 endpoints the report itself is about 60 MB of memory and its
// JSON about 110 MB; compressed, about 20 MB, kept in a temporary file
// (Options.TempDir) rather than on the heap, where it was held through
// the next run's probing and judging. The status page reads the report
// back from it (open); a rendering that comes while the daemon still
// holds the report it recorded (the first ones after a run) uses that
// one, without decoding.
type heldReport struct {
	// gz is the compressed JSON: in an unlinked temporary file, or in
	// memory when none could be written (jsonstream.Kept); nil while
	// whole is set.
	gz *jsonstream.Kept
	// sources are the distinct lists of sources of the endpoints, and
	// sourceOf the index in it of each endpoint's (-1 for none).
	sources  [][]string
	sourceOf []int32
	duration []time.Duration
	// decoded is the report recorded, or one read back from gz, while
	// anything else holds it.
	decoded weak.Pointer[scan.Report]
	// whole is the report itself until the daemon lets it go
	// (Server.RecordReport), or when it could not be encoded; nil
	// otherwise. It is then held as it is, and hint is the compressed
	// size the report before it had.
	whole *scan.Report
	hint  int
}

// sizeHint is the compressed size of h's report, or of the one before it
// while h holds its report as it is: what compressing the next one
// expects. 0 for a nil h.
func (h *heldReport) sizeHint() int {
	switch {
	case h == nil:
		return 0
	case h.whole != nil:
		return h.hint
	}
	return h.gzSize()
}

// holdReport encodes r for keeping, in a temporary file in dir. hint is
// the compressed size expected (the report before's): should no file be
// written, the buffer in memory is not grown by doubling while the
// daemon's memory is at its peak.
func holdReport(r *scan.Report, hint int, dir string) (*heldReport, error) {
	gz, err := jsonstream.Keep(dir, hint, r)
	if err != nil {
		return nil, err
	}
	h := &heldReport{gz: gz}
	h.sourceOf = make([]int32, len(r.Endpoints))
	h.duration = make([]time.Duration, len(r.Endpoints))
	index := map[string]int32{}
	var last []string
	lastIndex := int32(-1)
	for i := range r.Endpoints {
		ep := &r.Endpoints[i]
		h.duration[i] = ep.Duration
		switch {
		case len(ep.Sources) == 0:
			h.sourceOf[i] = -1
		case len(ep.Sources) == len(last) && &ep.Sources[0] == &last[0]:
			// The same list as the endpoint before (a zone's endpoints
			// share one): no key to build.
			h.sourceOf[i] = lastIndex
		default:
			key := strings.Join(ep.Sources, "\x00")
			k, ok := index[key]
			if !ok {
				k = int32(len(h.sources))
				index[key] = k
				h.sources = append(h.sources, ep.Sources)
			}
			h.sourceOf[i], last, lastIndex = k, ep.Sources, k
		}
	}
	return h, nil
}

// open returns the report held: the one recorded or last read back while
// something still holds it, else read back from its JSON. Its callers
// hold Server.rowsMu, which guards decoded once the report is recorded.
func (h *heldReport) open() (*scan.Report, error) {
	if h.whole != nil {
		return h.whole, nil
	}
	if r := h.decoded.Value(); r != nil {
		return r, nil
	}
	zr, err := gzip.NewReader(h.gzReader())
	if err != nil {
		return nil, err
	}
	// Decoded as it is decompressed, an endpoint at a time: the text of a
	// report of 100,000 endpoints is about 60 MB.
	r := new(scan.Report)
	if err := jsonstream.Read(zr, r); err != nil {
		return nil, err
	}
	if len(r.Endpoints) != len(h.sourceOf) {
		return nil, fmt.Errorf("%d endpoints read back, %d held", len(r.Endpoints), len(h.sourceOf))
	}
	for i := range r.Endpoints {
		ep := &r.Endpoints[i]
		ep.Duration = h.duration[i]
		if k := h.sourceOf[i]; k >= 0 {
			ep.Sources = h.sources[k]
		}
	}
	h.decoded = weak.Make(r)
	return r, nil
}

// gzReader reads the compressed JSON from its start.
func (h *heldReport) gzReader() io.Reader {
	return h.gz.Reader()
}

// gzSize is the size of the compressed JSON.
func (h *heldReport) gzSize() int {
	if h.gz == nil {
		return 0
	}
	return h.gz.Size()
}

// writeJSON writes the report's JSON to w: compressed when gzipped (the
// caller says so in Content-Encoding; see acceptsGzip), else plain. A
// report held compressed is sent as held, or decompressed as it is sent;
// one held as it is, encoded, and compressed, as it is sent.
func (h *heldReport) writeJSON(w io.Writer, gzipped bool) error {
	switch {
	case h.whole != nil && gzipped:
		zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			return err
		}
		if err := jsonstream.Write(zw, h.whole); err != nil {
			return err
		}
		return zw.Close()
	case h.whole != nil:
		return jsonstream.Write(w, h.whole)
	case gzipped:
		_, err := io.Copy(w, h.gzReader())
		return err
	}
	zr, err := gzip.NewReader(h.gzReader())
	if err != nil {
		return err
	}
	_, err = io.Copy(w, zr)
	return err
}

// acceptsGzip says whether a client whose Accept-Encoding is header
// accepts gzip (RFC 9110, section 12.5.3): gzip or x-gzip with a q above
// 0, or else * with one.
func acceptsGzip(header string) bool {
	gzipQ, starQ := -1.0, -1.0 // -1: not named
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			if k, v, ok := strings.Cut(p, "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gzipQ = max(gzipQ, q)
		case "*":
			starQ = max(starQ, q)
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

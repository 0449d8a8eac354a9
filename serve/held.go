package serve

import (
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/scan"
)

// heldReport is the latest report as the server keeps it between runs
// (from the daemon's release of it, Server.RecordReport; the report as it
// is before): its JSON as /api/v1/report sends it, gzip-compressed, and
// the status page's rows of it (rowRecord, one JSON object a row), also
// compressed.
// At 100,000 endpoints the report itself is about 60 MB of memory and its
// JSON about 110 MB; compressed, about 20 MB, kept in a temporary file
// (Options.TempDir) rather than on the heap, where it was held through
// the next run's probing and judging. The status page reads its rows back
// one at a time (pick): reading the whole report back, and building a row
// for each of its certificates, took a rendering between runs from 49 to
// 209 MiB.
type heldReport struct {
	// gz is the compressed JSON, and rows the compressed rows (rowCount
	// of them): in unlinked temporary files, or in memory when none
	// could be written (jsonstream.Kept); nil while whole is set.
	gz       *jsonstream.Kept
	rows     *jsonstream.Kept
	rowCount int
	// whole is the report itself until the daemon lets it go
	// (Server.RecordReport), or when it could not be encoded; nil
	// otherwise. It is then held as it is, and hint and rowsHint are the
	// compressed sizes the report before had.
	whole          *scan.Report
	hint, rowsHint int
}

// sizeHint is the compressed size of h's report and of its rows, or of
// the one before it while h holds its report as it is: what compressing
// the next one expects. 0 for a nil h.
func (h *heldReport) sizeHint() (report, rows int) {
	switch {
	case h == nil:
		return 0, 0
	case h.whole != nil:
		return h.hint, h.rowsHint
	}
	return h.gzSize(), h.rows.Size()
}

// holdReport encodes r and its page's rows for keeping, in temporary
// files in dir. hint and rowsHint are the compressed sizes expected (the
// report before's): should no file be written, the buffers in memory are
// not grown by doubling while the daemon's memory is at its peak.
func holdReport(r *scan.Report, hint, rowsHint int, dir string) (*heldReport, error) {
	gz, err := jsonstream.Keep(dir, hint, r)
	if err != nil {
		return nil, err
	}
	h := &heldReport{gz: gz}
	h.rows, err = jsonstream.KeepWith(dir, rowsHint, func(w io.Writer) error {
		// Written again into memory should no file take it: counted anew.
		var err error
		h.rowCount, err = writeRows(w, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the status page's rows: %w", err)
	}
	return h, nil
}

// fileError says why the report or its rows are kept in memory rather
// than in a file; nil when both are in files.
func (h *heldReport) fileError() error {
	if err := h.gz.FileError(); err != nil {
		return err
	}
	return h.rows.FileError()
}

// keptSize is the size of what h keeps compressed.
func (h *heldReport) keptSize() int {
	return h.gzSize() + h.rows.Size()
}

// pick gives p each of the status page's rows of the report held: read
// back one at a time, or built from the report while h holds it as it
// is.
func (h *heldReport) pick(p *rowPick) error {
	if h.whole != nil {
		eachRow(h.whole, func(rw *row) { p.add(*rw) })
		return nil
	}
	zr, err := gzip.NewReader(h.rows.Reader())
	if err != nil {
		return err
	}
	return readRows(zr, h.rowCount, p.add)
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

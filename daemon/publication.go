package daemon

import (
	"compress/gzip"
	"encoding/base64"
	"strconv"

	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// publicationWriter writes a sitePublication (version 2) as the run reads
// it, gzip-compressed as encodeCompressed writes one: the parts as each
// shard's result is judged, so that the results need not be kept until
// the run is published (tens of megabytes at 100,000 endpoints), then the
// findings. decodeCompressed reads it back as a sitePublication (the
// parts finish returns, joined).
type publicationWriter struct {
	buf   partsBuffer
	zw    *gzip.Writer
	parts int
	err   error
}

// newPublicationWriter starts the publication of a run of targets targets
// whose discovery gave sources.
func newPublicationWriter(targets int, sources []scan.SourceResult) (*publicationWriter, error) {
	w := &publicationWriter{}
	zw, err := gzip.NewWriterLevel(&w.buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	w.zw = zw
	w.write(`{"version":` + strconv.Itoa(publicationVersion) + `,"targets":` + strconv.Itoa(targets) + `,"sources":`)
	w.value(sources)
	w.write(`,"parts":[`)
	return w, w.err
}

// part adds one encoded scan.Part; p may be let go once it returns.
func (w *publicationWriter) part(p []byte) error {
	if w.parts > 0 {
		w.write(",")
	}
	w.parts++
	w.write(`"`)
	if w.err == nil {
		enc := base64.NewEncoder(base64.StdEncoding, w.zw)
		_, w.err = enc.Write(p)
		if w.err == nil {
			w.err = enc.Close()
		}
	}
	w.write(`"`)
	return w.err
}

// finish adds the site's own findings and returns the publication, in
// parts of at most partSize bytes.
func (w *publicationWriter) finish(findings []policy.Finding) ([][]byte, error) {
	w.write(`],"findings":`)
	if findings == nil {
		findings = []policy.Finding{}
	}
	w.value(findings)
	w.write("}")
	if w.err == nil {
		w.err = w.zw.Close()
	}
	if w.err != nil {
		return nil, w.err
	}
	return w.buf.parts, nil
}

func (w *publicationWriter) write(s string) {
	if w.err == nil {
		_, w.err = w.zw.Write([]byte(s))
	}
}

func (w *publicationWriter) value(v any) {
	if w.err == nil {
		w.err = jsonstream.Write(w.zw, v)
	}
}

// partSize is the size of a publication's parts: as the state stores
// them (state.Sites.PublishSite), a few to a round trip.
const partSize = 1 << 20

// partsBuffer keeps what is written in parts of at most partSize bytes.
// A publication is tens of megabytes at 100,000 endpoints: as one buffer
// it was copied each time it doubled, and held up to twice its size.
type partsBuffer struct {
	parts [][]byte
}

// Write appends b, filling the last part before starting another.
func (p *partsBuffer) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if len(p.parts) == 0 || len(p.parts[len(p.parts)-1]) == partSize {
			p.parts = append(p.parts, nil)
		}
		last := &p.parts[len(p.parts)-1]
		k := min(len(b), partSize-len(*last))
		if cap(*last) == 0 && len(p.parts) > 1 {
			*last = make([]byte, 0, partSize) // the ones before are full: so is this one, likely
		}
		*last = append(*last, b[:k]...)
		b = b[k:]
	}
	return n, nil
}

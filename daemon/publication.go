package daemon

import (
	"cmp"
	"compress/gzip"
	"encoding/base64"
	"strconv"

	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// publicationWriter writes a sitePublication (version 2) as the run reads
// it, gzip-compressed as jsonstream.Gzip writes one: the parts as each
// shard's result is judged, so that the results need not be kept until
// the run is published (tens of megabytes at 100,000 endpoints), then the
// findings. decodeCompressed reads it back as a sitePublication (the
// parts staged, then those finish returns, joined).
type publicationWriter struct {
	buf   partsBuffer
	zw    *gzip.Writer
	parts int
	err   error
}

// newPublicationWriter starts the publication of a run of targets targets
// whose discovery gave sources, in parts of size bytes (partSize when 0).
// stage, when not nil, is given each part once it is full
// (state.Sites.StageSitePart), in order from 0, and may keep nothing of
// it: the writer then holds one part at a time, not the tens of megabytes
// of a run of 100,000 endpoints until it is judged.
func newPublicationWriter(targets int, sources []scan.SourceResult, size int, stage func(part int, data []byte) error) (*publicationWriter, error) {
	w := &publicationWriter{buf: partsBuffer{size: cmp.Or(size, partSize), stage: stage}}
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

// finish adds the site's own findings and returns how many parts were
// staged and the rest of the publication, in parts of at most the
// writer's size.
func (w *publicationWriter) finish(findings []policy.Finding) (int, [][]byte, error) {
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
		return 0, nil, w.err
	}
	tail := w.buf.parts
	if n := len(tail); n > 0 && len(tail[n-1]) == 0 {
		tail = tail[:n-1] // the room of a part just staged
	}
	w.buf.parts = nil
	return w.buf.staged, tail, nil
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

// partSize is the size of a publication's parts by default: as the state
// stores them (state.Sites.StageSitePart and PublishSite), a few to a
// round trip.
const partSize = 1 << 20

// partsBuffer keeps what is written in parts of at most size bytes (0
// means partSize). A publication is tens of megabytes at 100,000
// endpoints: as one buffer it was copied each time it doubled, and held up
// to twice its size. With stage set, each part is given to it once full
// and its room reused for the next: parts then holds the one being filled.
type partsBuffer struct {
	size   int
	stage  func(part int, data []byte) error
	staged int
	parts  [][]byte
}

// Write appends b, filling the last part before starting another.
func (p *partsBuffer) Write(b []byte) (int, error) {
	n, size := len(b), cmp.Or(p.size, partSize)
	for len(b) > 0 {
		if len(p.parts) == 0 || len(p.parts[len(p.parts)-1]) == size {
			p.parts = append(p.parts, nil)
		}
		last := &p.parts[len(p.parts)-1]
		k := min(len(b), size-len(*last))
		if cap(*last) == 0 && len(p.parts) > 1 {
			*last = make([]byte, 0, size) // the ones before are full: so is this one, likely
		}
		*last = append(*last, b[:k]...)
		b = b[k:]
		if p.stage != nil && len(*last) == size {
			if err := p.stage(p.staged, *last); err != nil {
				return n - len(b), err
			}
			p.staged++
			p.parts = append(p.parts[:0], (*last)[:0])
		}
	}
	return n, nil
}

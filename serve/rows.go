package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// rowRecord is a status page row as it is kept between renderings
// (heldReport.rows): what the page shows of it, its certificate's part
// copied, printable already (completeRow). One JSON object a row.
type rowRecord struct {
	Tier            policy.Tier       `json:"tier"`
	Deadline        time.Time         `json:"deadline"`
	Findings        []policy.Finding  `json:"findings,omitempty"`
	Kinds           []string          `json:"kinds,omitempty"`
	Endpoints       []policy.Endpoint `json:"endpoints,omitempty"`
	Names           []string          `json:"names,omitempty"`
	Sources         []string          `json:"sources,omitempty"`
	Renewal         string            `json:"renewal,omitempty"`
	Subject         string            `json:"subject,omitempty"`
	Issuer          string            `json:"issuer,omitempty"`
	SHA256          string            `json:"sha256,omitempty"`
	NotAfter        time.Time         `json:"not_after,omitzero"`
	ExpectedRenewal time.Time         `json:"expected_renewal,omitzero"`
	FirstSeen       time.Time         `json:"first_seen,omitzero"`
	LastChanged     time.Time         `json:"last_changed,omitzero"`
	Unverified      time.Time         `json:"unverified,omitzero"`
	ACM             []string          `json:"acm,omitempty"`
	Resources       []string          `json:"resources,omitempty"`
	Locations       []string          `json:"locations,omitempty"`
}

// record is what is kept of rw.
func (rw *row) record() rowRecord {
	rec := rowRecord{
		Tier: rw.Tier, Deadline: rw.Deadline, Kinds: rw.Kinds, Endpoints: rw.Endpoints, Names: rw.Names,
		Sources: rw.Sources, Renewal: rw.Renewal, ExpectedRenewal: rw.ExpectedRenewal(), FirstSeen: rw.FirstSeen(),
		LastChanged: rw.LastChanged(), Unverified: rw.Unverified(), ACM: rw.ACM(), Resources: rw.Resources(), Locations: rw.Locations(),
	}
	rec.Subject, rec.Issuer, rec.SHA256, rec.NotAfter = rw.identity()
	if len(rw.Findings) > 0 {
		rec.Findings = make([]policy.Finding, len(rw.Findings))
		for i, f := range rw.Findings {
			rec.Findings[i] = *f
		}
	}
	return rec
}

// rowOf is the row rec keeps, the seq-th written.
func rowOf(rec *rowRecord, seq int) row {
	rw := row{
		Tier: rec.Tier, Deadline: rec.Deadline, Kinds: rec.Kinds, Endpoints: rec.Endpoints, Names: rec.Names,
		Sources: rec.Sources, Renewal: rec.Renewal, seq: seq,
		more: &rowMore{own: true, subject: rec.Subject, issuer: rec.Issuer, sha256: rec.SHA256, notAfter: rec.NotAfter,
			acm: rec.ACM, resources: rec.Resources, locations: rec.Locations, unverified: rec.Unverified,
			expectedRenewal: rec.ExpectedRenewal, firstSeen: rec.FirstSeen, lastChanged: rec.LastChanged},
	}
	if len(rec.Findings) > 0 {
		rw.Findings = make([]*policy.Finding, len(rec.Findings))
		for i := range rec.Findings {
			rw.Findings[i] = &rec.Findings[i]
		}
	}
	return rw
}

// writeRows writes the status page's rows of r to w, one rowRecord at a
// time in the order eachRow builds them, and returns how many.
func writeRows(w io.Writer, r *scan.Report) (n int, err error) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	eachRow(r, func(rw *row) {
		if err == nil {
			err = enc.Encode(rw.record())
			n++
		}
	})
	return n, err
}

// readRows reads the n rows writeRows wrote to rd, calling yield with
// each; the row passed is yield's to keep.
func readRows(rd io.Reader, n int, yield func(row)) error {
	dec := json.NewDecoder(rd)
	for i := range n {
		var rec rowRecord
		if err := dec.Decode(&rec); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("row %d of %d: %w", i+1, n, err)
		}
		yield(rowOf(&rec, i))
	}
	return nil
}

// rowPick is what a rendering of the status page takes of a report's
// rows, given one at a time in any order (add): how many there are and
// how many filter f matches, the findings' deadlines for the timeline,
// and the rows the page lists (rows). Of a report of PageLimit rows or
// fewer it lists every row, those f does not match hidden (the page's
// script filters them without a reload); of a larger one, the PageLimit
// most urgent rows f matches (compareRows). It holds at most one and a
// half times that many rows, never one for each of a fleet's 100,000
// certificates.
type rowPick struct {
	f        filter
	now      time.Time
	total    int
	matching int
	// rows are every row while total is at most PageLimit, then the
	// matching ones, cut to the PageLimit most urgent whenever they
	// reach half as many again.
	rows     []row
	matched  []bool // of rows, while total is at most PageLimit
	timeline timelineCounts
	// list is what listed returns, once it has been called.
	list *pickedRows
}

// pickedRows are the rows a rowPick lists (listed).
type pickedRows struct {
	rows      []row
	hidden    []bool
	truncated bool
}

func newRowPick(f filter, now time.Time) *rowPick {
	return &rowPick{f: f, now: now, timeline: newTimelineCounts(now)}
}

// add takes rw, which is the pick's to keep.
func (p *rowPick) add(rw row) {
	p.total++
	p.timeline.add(rw.Findings)
	ok := p.f.match(&rw)
	if ok {
		p.matching++
	}
	if p.total <= PageLimit {
		p.rows = append(p.rows, rw)
		p.matched = append(p.matched, ok)
		return
	}
	if p.matched != nil {
		// Past PageLimit rows the page lists only matching ones.
		kept := p.rows[:0]
		for i, m := range p.matched {
			if m {
				kept = append(kept, p.rows[i])
			}
		}
		clear(p.rows[len(kept):])
		p.rows, p.matched = kept, nil
	}
	if !ok {
		return
	}
	p.rows = append(p.rows, rw)
	if len(p.rows) >= PageLimit+PageLimit/2 {
		p.cut()
	}
}

// cut keeps the PageLimit most urgent rows.
func (p *rowPick) cut() {
	slices.SortFunc(p.rows, func(a, b row) int { return compareRows(&a, &b) })
	if len(p.rows) > PageLimit {
		clear(p.rows[PageLimit:])
		p.rows = p.rows[:PageLimit]
	}
}

// listed returns the rows the page lists, most urgent first, whether
// each is hidden (f does not match it), and whether rows were left out.
// The first call sorts them; once it has returned, the pick may be read
// from several goroutines at once.
func (p *rowPick) listed() (rows []row, hidden []bool, truncated bool) {
	if p.list == nil {
		p.list = p.sorted()
	}
	return p.list.rows, p.list.hidden, p.list.truncated
}

func (p *rowPick) sorted() *pickedRows {
	if p.total <= PageLimit {
		order := make([]int, len(p.rows))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return compareRows(&p.rows[a], &p.rows[b]) })
		l := &pickedRows{rows: make([]row, len(order)), hidden: make([]bool, len(order))}
		for i, j := range order {
			l.rows[i], l.hidden[i] = p.rows[j], !p.matched[j]
		}
		return l
	}
	p.cut()
	return &pickedRows{rows: p.rows, hidden: make([]bool, len(p.rows)), truncated: true}
}

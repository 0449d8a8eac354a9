package daemon

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// Memo keys in Memory.
const (
	// memoLastSuccess holds map[job]time of each job's last success.
	memoLastSuccess = "daemon/last_success"
	// memoInventory holds map[source]savedRun: each source's last good
	// run.
	memoInventory = "daemon/inventory"
	// memoReport holds the savedReport of the latest published report, so
	// that a restart during an outage still shows what was known.
	memoReport = "daemon/report"
)

// memoTimeout bounds one read or write of a memo.
const memoTimeout = 15 * time.Second

// savedRun is a goodRun as kept in Memory.
type savedRun struct {
	Targets      []discovery.Target `json:"targets"`
	TargetCount  int                `json:"target_count"`
	Certificates int                `json:"certificates,omitempty"`
	At           time.Time          `json:"at"`
}

// savedReport is what carryForward needs of a published report: its time,
// and its findings about endpoints with their certificates.
type savedReport struct {
	GeneratedAt  time.Time            `json:"generated_at"`
	Findings     []policy.Finding     `json:"findings"`
	Certificates []policy.Certificate `json:"certificates,omitempty"`
}

// restore reads back what Memory kept: each job's last success (handed to
// the Recorder, so that certwatch_last_success_timestamp_seconds is there
// from start-up) and each source's last good inventory (so that a source
// failing since start-up keeps its targets). A failure to read is logged;
// the daemon then starts without them.
func (d *Daemon) restore(ctx context.Context) {
	if d.Memory == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, memoTimeout)
	defer cancel()
	var successes map[string]time.Time
	if err := d.load(ctx, memoLastSuccess, &successes); err != nil {
		d.logger.Error("cannot read the jobs' last successes from the state: they are exported again after the next successful runs", "err", err)
	}
	var saved map[string]savedRun
	if err := d.load(ctx, memoInventory, &saved); err != nil {
		d.logger.Error("cannot read the last good inventory from the state: sources failing at start-up contribute nothing until they recover", "err", err)
	}
	var previous *jsonstream.Kept
	report, err := d.Memory.Memo(ctx, memoReport)
	if err == nil {
		var r *scan.Report
		if r, err = openSaved(report); err == nil && r != nil {
			// Kept as the daemon keeps its own (off the heap), and
			// written by this version whatever wrote the memo.
			previous, err = savedOf(r, len(report), d.TempDir)
		}
	}
	if err != nil {
		previous = nil
		d.logger.Error("cannot read the latest report from the state: findings whose endpoints do not answer after the restart are not shown until they answer", "err", err)
	}
	d.mu.Lock()
	if previous != nil && d.previous == nil {
		d.previous = previous
	}
	maps.Copy(d.successes, successes)
	for name, r := range saved {
		d.sources[name] = goodRun{held: holdTargets(r.Targets), targets: r.TargetCount, certs: r.Certificates, at: r.At}
	}
	if len(saved) > 0 {
		d.rebuildInventory()
	}
	n := d.inventory.n
	d.mu.Unlock()
	if d.Recorder != nil {
		for job, at := range successes {
			d.Recorder.RecordLastSuccess(job, at)
		}
	}
	if len(saved) > 0 {
		d.logger.Info("last good inventory restored from the state", "sources", len(saved), "inventory", n)
	}
}

// load decodes the memo under key into v; a memo never written leaves v
// as it is.
func (d *Daemon) load(ctx context.Context, key string, v any) error {
	b, err := d.Memory.Memo(ctx, key)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	if err := decodeCompressed(b, v); err != nil {
		return fmt.Errorf("decode memo %s: %w", key, err)
	}
	return nil
}

// maxMemo bounds a memo's or a site publication's JSON once
// decompressed.
const maxMemo = 1 << 30

// decodeCompressed decodes what jsonstream.Gzip wrote into v, or plain
// JSON, as certwatch wrote memos and publications before (JSON never
// starts with gzip's magic bytes). The text is decoded as it is
// decompressed (jsonstream.Read), a list element at a time: the report
// memo of 100,000 endpoints, 40 MB of JSON, was read whole at the peak of
// a probe run, when the previous report is read back to carry it forward.
func decodeCompressed(b []byte, v any) error {
	return decodeFrom(bytes.NewReader(b), v)
}

// decodeFrom is decodeCompressed for a document read from r.
func decodeFrom(r io.Reader, v any) error {
	br := bufio.NewReader(r)
	var text io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		text = zr
	}
	return jsonstream.Read(&capped{r: text, left: maxMemo + 1}, v)
}

// errMemoTooLarge is what capped returns past its bound.
var errMemoTooLarge = fmt.Errorf("more than %d bytes once decompressed", maxMemo)

// capped reads r until left bytes have been read, then fails with
// errMemoTooLarge (left maxMemo+1 takes a text of maxMemo bytes, not one
// more): a damaged or hostile memo cannot decompress without bound.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errMemoTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// rememberSuccess keeps job's last success in Memory.
func (d *Daemon) rememberSuccess(ctx context.Context, job string, at time.Time) {
	if d.Memory == nil {
		return
	}
	d.memoMu.Lock()
	defer d.memoMu.Unlock()
	d.mu.Lock()
	d.successes[job] = at
	m := maps.Clone(d.successes)
	d.mu.Unlock()
	d.save(ctx, memoLastSuccess, m)
}

// rememberInventory keeps each source's last good run in Memory.
func (d *Daemon) rememberInventory(ctx context.Context) {
	if d.Memory == nil {
		return
	}
	d.memoMu.Lock()
	defer d.memoMu.Unlock()
	d.mu.Lock()
	sources := maps.Clone(d.sources)
	d.mu.Unlock()
	m := make(map[string]savedRun, len(sources))
	for name, g := range sources {
		ts, err := g.held.targets(new(scan.Decoder))
		if err != nil {
			d.logger.Error("cannot read back a source's last good targets: the inventory kept in the state stays as it was", "source", name, "err", err)
			return
		}
		m[name] = savedRun{Targets: ts, TargetCount: g.targets, Certificates: g.certs, At: g.at.UTC()}
	}
	d.save(ctx, memoInventory, m)
}

// savedOf returns what carryForward needs of r (savedReport), compressed
// (jsonstream.Keep in dir, hint the size expected): what the daemon holds
// of its latest report until the next run, off the heap, and keeps in
// Memory. It is written as r's lists are read, never copied out of them:
// at 100,000 endpoints the copies were about 12 MB, as the run published,
// and the 5 MB compressed were held through the next run's peak.
func savedOf(r *scan.Report, hint int, dir string) (*jsonstream.Kept, error) {
	certs := map[string]bool{}
	for i := range r.Findings {
		if f := &r.Findings[i]; len(f.Endpoints) > 0 {
			certs[f.Certificate] = true
		}
	}
	kept := func(c *policy.Certificate) bool { return certs[c.SHA256] }
	return jsonstream.KeepObject(dir, hint, func(o *jsonstream.Object) {
		// The fields of savedReport, in its order, as jsonstream.Write
		// writes them.
		o.Field("generated_at", r.GeneratedAt)
		jsonstream.Array(o, "findings", func(yield func(policy.Finding) bool) {
			for i := range r.Findings {
				if len(r.Findings[i].Endpoints) > 0 && !yield(r.Findings[i]) {
					return
				}
			}
		})
		if !slices.ContainsFunc(r.Certificates, func(c policy.Certificate) bool { return kept(&c) }) {
			return // omitempty
		}
		jsonstream.Array(o, "certificates", func(yield func(policy.Certificate) bool) {
			for i := range r.Certificates {
				if kept(&r.Certificates[i]) && !yield(r.Certificates[i]) {
					return
				}
			}
		})
	})
}

// openSaved reads back what savedOf wrote (or a memo of an earlier
// version, plain JSON) as a report for carryForward; nil for nothing.
func openSaved(b []byte) (*scan.Report, error) {
	if len(b) == 0 {
		return nil, nil
	}
	return openFrom(bytes.NewReader(b))
}

// openKept reads back what savedOf kept, as openSaved does; nil for
// nothing.
func openKept(k *jsonstream.Kept) (*scan.Report, error) {
	if k == nil {
		return nil, nil
	}
	return openFrom(k.Reader())
}

// openFrom reads what savedOf wrote from r as a report for carryForward.
func openFrom(r io.Reader) (*scan.Report, error) {
	var s savedReport
	if err := decodeFrom(r, &s); err != nil {
		return nil, err
	}
	return &scan.Report{GeneratedAt: s.GeneratedAt, Findings: s.Findings, Certificates: s.Certificates}, nil
}

// rememberReport keeps saved, what savedOf returned of the latest report,
// in Memory.
func (d *Daemon) rememberReport(ctx context.Context, saved *jsonstream.Kept) {
	if d.Memory == nil {
		return
	}
	b, err := saved.Bytes()
	if err != nil {
		d.logger.Error("cannot read back what the next run carries forward to keep it in the state: after a restart, findings whose endpoints do not answer are not shown until they answer", "err", err)
		return
	}
	d.memoMu.Lock()
	defer d.memoMu.Unlock()
	d.saveBytes(ctx, memoReport, b)
}

// save writes v under key unless it is what was last written. Callers
// hold d.memoMu. A failure is logged: the state store's health (readiness,
// certwatch_state_up) shows it too.
func (d *Daemon) save(ctx context.Context, key string, v any) {
	// A memo of 100,000 endpoints is tens of megabytes of JSON, which
	// json.Marshal would build whole and the store's driver copy twice again.
	b, err := jsonstream.Gzip(v, 0)
	if err != nil {
		d.logger.Error("cannot encode a memo for the state", "memo", key, "err", err)
		return
	}
	d.saveBytes(ctx, key, b)
}

// saveBytes is save of what jsonstream.Gzip returned.
func (d *Daemon) saveBytes(ctx context.Context, key string, b []byte) {
	sum := sha256.Sum256(b)
	if d.memoSums[key] == sum {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), memoTimeout)
	defer cancel()
	if err := d.Memory.SetMemo(ctx, key, b); err != nil {
		d.logger.Warn("cannot keep a memo in the state: it is lost at the next restart", "memo", key, "err", err)
		delete(d.memoSums, key)
		return
	}
	d.memoSums[key] = sum
}

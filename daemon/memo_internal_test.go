package daemon

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestMemoEncoding: a memo is written gzip-compressed, the same bytes
// for the same value (the daemon skips rewriting an unchanged memo by
// their hash), and reads back as written; a memo an earlier certwatch
// wrote as plain JSON still reads; a damaged one is an error.
func TestMemoEncoding(t *testing.T) {
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	want := savedReport{GeneratedAt: at, Findings: []policy.Finding{{
		Kind: policy.Expiring, Tier: policy.Page, Certificate: "ab12", Subject: "www.example", Deadline: policy.At(at.Add(48 * time.Hour)),
		Endpoints: []policy.Endpoint{{Name: "www.example", Port: 443, Address: "192.0.2.7"}}, Message: "expires in 2 days",
	}}, Certificates: []policy.Certificate{{SHA256: "ab12", Subject: "www.example", DNSNames: []string{"www.example"}, NotAfter: policy.At(at.Add(48 * time.Hour))}}}

	b, err := jsonstream.Gzip(want, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("memo starts %x, want gzip's magic", b[:2])
	}
	// The same bytes whatever the size expected (that of the memo
	// before, which may be smaller, the same or larger).
	for _, hint := range []int{0, len(b) / 2, len(b), 10 * len(b)} {
		again, _ := jsonstream.Gzip(want, hint)
		if !bytes.Equal(again, b) {
			t.Errorf("the same value encodes to different memos (size expected %d)", hint)
		}
		if cap(again) > len(again)+len(again)/8 {
			t.Errorf("size expected %d: a memo of %d bytes holds %d", hint, len(again), cap(again))
		}
	}
	var got savedReport
	if err := decodeCompressed(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("memo read back differs (-written +read):\n%s", diff)
	}

	plain, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var old savedReport
	if err := decodeCompressed(plain, &old); err != nil {
		t.Fatalf("a plain JSON memo: %v", err)
	}
	if diff := cmp.Diff(want, old); diff != "" {
		t.Errorf("plain JSON memo read back differs (-written +read):\n%s", diff)
	}

	for name, bad := range map[string][]byte{
		"cut short":       b[:len(b)/2],
		"not gzip inside": append([]byte{0x1f, 0x8b}, "not gzip"...),
		"not JSON":        []byte("{not json"),
	} {
		var v savedReport
		if err := decodeCompressed(bad, &v); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// TestSavedCarriesAsTheReport: between runs the daemon holds only what
// carryForward needs of its latest report, compressed (savedOf); carried
// forward from that, a run whose endpoints stopped answering publishes
// what it would have published carried forward from the whole report.
func TestSavedCarriesAsTheReport(t *testing.T) {
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	www := policy.Endpoint{Name: "www.example", Port: 443, Address: "192.0.2.7"}
	api := policy.Endpoint{Name: "api.example", Port: 443, Address: "192.0.2.8"}
	prev := &scan.Report{GeneratedAt: at,
		Endpoints: []scan.Endpoint{{Name: www.Name, Port: www.Port, Address: www.Address, Certificate: "ab12"},
			{Name: api.Name, Port: api.Port, Address: api.Address, Certificate: "cd34"}},
		Certificates: []policy.Certificate{
			{SHA256: "ab12", Subject: "www.example", DNSNames: []string{"www.example"}, NotAfter: policy.At(at.Add(48 * time.Hour))},
			{SHA256: "cd34", Subject: "api.example", DNSNames: []string{"api.example"}, NotAfter: policy.At(at.Add(400 * 24 * time.Hour))},
		},
		Findings: []policy.Finding{
			{Kind: policy.Expiring, Tier: policy.Page, Certificate: "ab12", Subject: "www.example", Deadline: policy.At(at.Add(48 * time.Hour)),
				Endpoints: []policy.Endpoint{www}, Message: "expires in 2 days"},
			{Kind: policy.DiscoveryDegraded, Tier: policy.Warning, Name: "route53", Deadline: policy.At(at), Message: "route53 failed"},
		},
	}
	saved, err := savedOf(prev, 0, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := saved.FileError(); err != nil {
		t.Errorf("what is held is not in a file: %v", err)
	}
	memo, err := saved.Bytes()
	if err != nil || !bytes.HasPrefix(memo, []byte{0x1f, 0x8b}) {
		t.Errorf("what is kept in the state starts %x (%v), want gzip's magic", memo[:min(2, len(memo))], err)
	}
	if fromMemo, err := openSaved(memo); err != nil || len(fromMemo.Findings) != 1 {
		t.Errorf("the memo reads back as %v (%v), want the finding about an endpoint", fromMemo, err)
	}
	back, err := openKept(saved)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Findings) != 1 || len(back.Certificates) != 1 || back.Certificates[0].SHA256 != "ab12" || len(back.Endpoints) != 0 {
		t.Errorf("held: %d findings, %d certificates, %d endpoints; want the finding about an endpoint, its certificate, no endpoint",
			len(back.Findings), len(back.Certificates), len(back.Endpoints))
	}
	cur := &scan.Report{GeneratedAt: at.Add(10 * time.Minute),
		Endpoints: []scan.Endpoint{{Name: www.Name, Port: www.Port, Address: www.Address, Failed: &policy.Failed{Error: "connection refused", Failure: "refused"}},
			{Name: api.Name, Port: api.Port, Address: api.Address, Certificate: "cd34"}},
		Certificates: []policy.Certificate{prev.Certificates[1]},
	}
	want, got := carryForward(prev, cur), carryForward(back, cur)
	if len(want.Findings) != 1 || want.Findings[0].UnverifiedSince.IsZero() {
		t.Fatalf("carried from the whole report: %d findings, want the expiring one, unverified", len(want.Findings))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("carried from what is held differs (-whole report +held):\n%s", diff)
	}
	if r, err := openSaved(nil); r != nil || err != nil {
		t.Errorf("openSaved(nil) = %v, %v; want nothing", r, err)
	}
	if r, err := openKept(nil); r != nil || err != nil {
		t.Errorf("openKept(nil) = %v, %v; want nothing", r, err)
	}
}

// TestMemoBound: a memo is read up to its bound and no further, whatever
// its compressed size says.
func TestMemoBound(t *testing.T) {
	for _, c := range []struct {
		text string
		left int64
		ok   bool
	}{{"abcdef", 7, true}, {"abcdef", 6, false}, {"abcdef", 2, false}, {"", 1, true}} {
		got, err := io.ReadAll(&capped{r: strings.NewReader(c.text), left: c.left})
		switch {
		case c.ok && (err != nil || string(got) != c.text):
			t.Errorf("%q bounded at %d: read %q, %v; want all of it", c.text, c.left, got, err)
		case !c.ok && !errors.Is(err, errMemoTooLarge):
			t.Errorf("%q bounded at %d: read %q, %v; want errMemoTooLarge", c.text, c.left, got, err)
		}
	}
}

// TestPreviousReadOnlyWhenDown: the previous report is read back only
// when an endpoint of the run failed, the one case it carries anything
// forward in (a damaged one is then logged).
func TestPreviousReadOnlyWhenDown(t *testing.T) {
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		endpoint scan.Endpoint
		read     bool
	}{
		{"every endpoint answered", scan.Endpoint{Name: "www.example", Port: 443, Address: "192.0.2.7", Certificate: "ab12"}, false},
		{"an endpoint refused", scan.Endpoint{Name: "www.example", Port: 443, Address: "192.0.2.7", Failed: &policy.Failed{Error: "connection refused", Failure: "refused"}}, true},
	} {
		var logs bytes.Buffer
		d := &Daemon{logger: slog.New(slog.NewTextHandler(&logs, nil))}
		r := &scan.Report{GeneratedAt: at, Endpoints: []scan.Endpoint{c.endpoint}}
		damaged, err := jsonstream.KeepWith(t.TempDir(), 0, func(w io.Writer) error {
			_, err := io.WriteString(w, "damaged")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		d.publish(context.Background(), r, probeSnapshot{previous: damaged})
		if read := strings.Contains(logs.String(), "cannot read back the previous report"); read != c.read {
			t.Errorf("%s: previous report read back: %v, want %v; log:\n%s", c.name, read, c.read, logs.String())
		}
	}
}

// TestSavedWrittenAsTheStruct: savedOf writes, as it reads the report's
// lists, the document jsonstream.Write writes of a savedReport of copies
// of them: the findings about endpoints and their certificates (none, and
// no "certificates", when no finding is about an endpoint).
func TestSavedWrittenAsTheStruct(t *testing.T) {
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	ep := policy.Endpoint{Name: "www.example", Port: 443, Address: "192.0.2.7"}
	certs := []policy.Certificate{{SHA256: "ab12", Subject: "www.example", DNSNames: []string{"www.example"}},
		{SHA256: "cd34", Subject: "api.example"}, {SHA256: "ef56", Subject: "old.example"}}
	about := policy.Finding{Kind: policy.Expiring, Tier: policy.Page, Certificate: "ab12", Endpoints: []policy.Endpoint{ep}, Message: "expires"}
	own := policy.Finding{Kind: policy.DiscoveryDegraded, Tier: policy.Warning, Name: "route53", Message: "route53 failed"}
	atRest := policy.Finding{Kind: policy.Expiring, Tier: policy.Warning, Certificate: "ef56", Message: "expires at rest"}
	for name, r := range map[string]*scan.Report{
		"findings about endpoints": {GeneratedAt: at, Certificates: certs, Findings: []policy.Finding{about, own, atRest}},
		"none about endpoints":     {GeneratedAt: at, Certificates: certs, Findings: []policy.Finding{own, atRest}},
		"empty":                    {GeneratedAt: at},
	} {
		want := savedReport{GeneratedAt: r.GeneratedAt, Findings: []policy.Finding{}}
		kept := map[string]bool{}
		for _, f := range r.Findings {
			if len(f.Endpoints) > 0 {
				want.Findings = append(want.Findings, f)
				kept[f.Certificate] = true
			}
		}
		for _, c := range r.Certificates {
			if kept[c.SHA256] {
				want.Certificates = append(want.Certificates, c)
			}
		}
		var wantText bytes.Buffer
		if err := jsonstream.Write(&wantText, want); err != nil {
			t.Fatal(err)
		}
		saved, err := savedOf(r, 0, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(saved.Reader())
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wantText.Bytes()) {
			t.Errorf("%s: savedOf wrote\n%s\nwant\n%s", name, got, wantText.Bytes())
		}
	}
}

// TestSavedCopiesNoList: what savedOf allocates for a report of 20,000
// findings about endpoints is under what copies of its findings and
// certificates take (the copies it made, grown as they were filled,
// allocated 30 MB).
func TestSavedCopiesNoList(t *testing.T) { // not parallel: it measures allocations
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	r := &scan.Report{GeneratedAt: at}
	for i := range 20000 {
		fp := fmt.Sprintf("%064x", i)
		name := fmt.Sprintf("h%05d.example", i)
		r.Certificates = append(r.Certificates, policy.Certificate{SHA256: fp, Subject: name, DNSNames: []string{name}})
		r.Findings = append(r.Findings, policy.Finding{Kind: policy.Expiring, Tier: policy.Warning, Certificate: fp, Subject: name,
			Endpoints: []policy.Endpoint{{Name: name, Port: 443, Address: "192.0.2.7"}}, Message: "expires in 20 days"})
	}
	dir := t.TempDir()
	hint := 0
	if saved, err := savedOf(r, 0, dir); err == nil {
		hint = saved.Size()
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	saved, err := savedOf(r, hint, dir)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	copies := uint64(len(r.Findings))*uint64(unsafe.Sizeof(policy.Finding{})) + uint64(len(r.Certificates))*uint64(unsafe.Sizeof(policy.Certificate{}))
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("savedOf allocated %d bytes (%d compressed); copies of the findings and certificates take %d", allocated, saved.Size(), copies)
	if allocated > copies {
		t.Errorf("savedOf allocated %d bytes, more than copies of the findings and certificates (%d)", allocated, copies)
	}
}

// TestSavedKeptInMemoryWarnsOnce: where no file can be written in
// TempDir, what the next run carries forward is kept in memory, still
// carried forward, and the log says so once, not at every run.
func TestSavedKeptInMemoryWarnsOnce(t *testing.T) {
	at := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	www := policy.Endpoint{Name: "www.example", Port: 443, Address: "192.0.2.7"}
	var logs bytes.Buffer
	d := &Daemon{logger: slog.New(slog.NewTextHandler(&logs, nil)), TempDir: filepath.Join(t.TempDir(), "missing")}
	first := &scan.Report{GeneratedAt: at,
		Endpoints:    []scan.Endpoint{{Name: www.Name, Port: www.Port, Address: www.Address, Certificate: "ab12"}},
		Certificates: []policy.Certificate{{SHA256: "ab12", Subject: "www.example", NotAfter: policy.At(at.Add(48 * time.Hour))}},
		Findings: []policy.Finding{{Kind: policy.Expiring, Tier: policy.Page, Certificate: "ab12", Subject: "www.example",
			Deadline: policy.At(at.Add(48 * time.Hour)), Endpoints: []policy.Endpoint{www}, Message: "expires in 2 days"}},
	}
	d.publish(context.Background(), first, probeSnapshot{})
	down := &scan.Report{GeneratedAt: at.Add(time.Hour),
		Endpoints: []scan.Endpoint{{Name: www.Name, Port: www.Port, Address: www.Address, Failed: &policy.Failed{Error: "connection refused", Failure: "refused"}}}}
	published, _ := d.publish(context.Background(), down, probeSnapshot{previous: d.previous})
	if d.previous == nil || d.previous.FileError() == nil {
		t.Fatalf("what is carried forward is not kept in memory (%v)", d.previous)
	}
	if len(published.Findings) != 1 || published.Findings[0].UnverifiedSince.IsZero() {
		t.Errorf("the second run published %d findings, want the first run's, unverified", len(published.Findings))
	}
	if n := strings.Count(logs.String(), "cannot keep what the next run carries forward in a temporary file"); n != 1 {
		t.Errorf("the log says %d times that it is kept in memory, want once:\n%s", n, logs.String())
	}
}

package serve

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestUnionSorted: the union of a certificate's sources so far and an
// endpoint's is sorted and without duplicates; a list that already
// holds the endpoint's is kept as it is (no copy for each of a fleet's
// endpoints), and neither list given is ever changed.
func TestUnionSorted(t *testing.T) {
	for _, tc := range []struct {
		a, b, want []string
		same       string // "a" or "b": the result is that list itself
	}{
		{nil, nil, nil, "b"},
		{nil, []string{"static"}, []string{"static"}, "b"},
		{nil, []string{"zone:b", "zone:a", "zone:a"}, []string{"zone:a", "zone:b"}, ""},
		{[]string{"static"}, []string{"static"}, []string{"static"}, "a"},
		{[]string{"a", "c"}, []string{"c"}, []string{"a", "c"}, "a"},
		{[]string{"a", "c"}, []string{"d", "b", "a"}, []string{"a", "b", "c", "d"}, ""},
		{[]string{"a"}, nil, []string{"a"}, "a"},
	} {
		a, b := slices.Clone(tc.a), slices.Clone(tc.b)
		got := unionSorted(a, b)
		if !slices.Equal(got, tc.want) {
			t.Errorf("unionSorted(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
		if !slices.Equal(a, tc.a) || !slices.Equal(b, tc.b) {
			t.Errorf("unionSorted(%q, %q) changed its arguments to %q, %q", tc.a, tc.b, a, b)
		}
		switch same := len(got) > 0 && (len(a) > 0 && &got[0] == &a[0] || len(b) > 0 && &got[0] == &b[0]); {
		case tc.same != "" && len(tc.want) > 0 && !same:
			t.Errorf("unionSorted(%q, %q) made a new list, want %s itself", tc.a, tc.b, tc.same)
		case tc.same == "" && same:
			t.Errorf("unionSorted(%q, %q) returned an argument, want a new list", tc.a, tc.b)
		}
	}
}

// farmReport is a report of n endpoints, each with a certificate of its
// own found through one zone, and an expiring finding about each.
func farmReport(n int) *scan.Report {
	now := time.Now()
	zone := []string{"dnszone:farm.test"}
	r := &scan.Report{GeneratedAt: now, Targets: n, Sources: []scan.SourceResult{{Name: zone[0], Targets: n}}}
	for i := range n {
		name := fmt.Sprintf("ep-%06d.farm.test", i)
		sha := fmt.Sprintf("%064x", i+1)
		ep := policy.Endpoint{Name: name, Port: 443, Address: fmt.Sprintf("127.1.%d.%d", i/250, i%250+1)}
		r.Endpoints = append(r.Endpoints, scan.Endpoint{Name: ep.Name, Port: ep.Port, Address: ep.Address, Certificate: sha,
			Sources: zone, Duration: time.Millisecond})
		notAfter := policy.At(now.Add(time.Duration(i%90+1) * 24 * time.Hour))
		r.Certificates = append(r.Certificates, policy.Certificate{SHA256: sha, Subject: name, DNSNames: []string{name}, NotAfter: notAfter})
		r.Findings = append(r.Findings, policy.Finding{Kind: policy.Expiring, Tier: policy.Notice, Certificate: sha, Subject: name,
			Deadline: notAfter, Endpoints: []policy.Endpoint{ep}})
	}
	return r
}

// TestReportHeldCompressed: between runs the server holds the latest
// report compressed, and its view no page rows. A rendering reads the
// report back (each endpoint's sources too, which its JSON does not
// carry) and builds the rows; renderings at the same time share one
// reading and building, and once none holds them a collection lets them
// go: between runs a daemon holds neither a fleet's report nor a row for
// each of its certificates for a page seldom looked at.
func TestReportHeldCompressed(t *testing.T) { // not parallel: it measures the heap
	var base, withReport, held runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	// A fleet ten times the series limit, as 100,000 endpoints are with
	// the default limit.
	s := New(Options{SeriesLimit: 1000})
	recordAndLetGo(s, 10000, func() {
		runtime.GC()
		runtime.ReadMemStats(&withReport)
	})
	runtime.GC()
	runtime.ReadMemStats(&held)
	if s.view.rows != nil {
		t.Fatalf("the recorded view holds %d rows, want none", len(s.view.rows))
	}
	if s.report.whole != nil {
		t.Fatal("the server still holds the recorded report once the daemon let it go")
	}
	report, kept := int64(withReport.HeapAlloc)-int64(base.HeapAlloc), int64(held.HeapAlloc)-int64(base.HeapAlloc)
	t.Logf("the report takes %d bytes, the server holds %d (compressed %d)", report, kept, s.report.gzSize())
	if kept > report/3 {
		t.Errorf("the server holds %d bytes for a report of 10,000 endpoints that takes %d itself, want at most a third", kept, report)
	}
	if !slices.Equal(s.view.sources, []string{"dnszone:farm.test"}) || !slices.Equal(s.view.kinds, []string{"expiring"}) {
		t.Errorf("filter choices = %q, %q; want the zone and expiring", s.view.sources, s.view.kinds)
	}
	renderTogether(t, s, 8, 10000)
	recordAndLetGo(s, 10, func() {})
	if got := pickAll(t, s); got.total != 10 {
		t.Errorf("after a new report the page has %d rows, want its 10", got.total)
	}
}

// pickAll picks the page's rows of the server's report, unfiltered.
func pickAll(t *testing.T, s *Server) *rowPick {
	t.Helper()
	p, err := s.pickRows(s.report, filter{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recordAndLetGo records a report of n endpoints (farmReport) as the
// daemon does, releases it once done with it, calls measure while it
// still holds it, and lets it go.
//
//go:noinline
func recordAndLetGo(s *Server, n int, measure func()) {
	r := farmReport(n)
	s.RecordReport(r)()
	measure()
	runtime.KeepAlive(r)
}

// TestReportCompressedOnceReleased: while the daemon holds the report it
// recorded (as it notifies, its run's largest step), the server holds no
// compressed JSON, neither of that report nor of the one before, which
// it lets go as the new one is recorded; the API serves the report as it
// is, compressed as it is sent. Once released, the report is held
// compressed, and a release after a newer report changes nothing.
//
// Here the report is kept in memory (no file can be written in TempDir),
// where the previous report's compressed JSON is on the heap until the
// new one is recorded.
func TestReportCompressedOnceReleased(t *testing.T) { // not parallel: it measures the heap
	s := New(Options{SeriesLimit: 1000, TempDir: filepath.Join(t.TempDir(), "missing")})
	recordAndLetGo(s, 10000, func() {})
	before := s.report.gzSize()
	if before == 0 {
		t.Fatal("the first report is not held compressed once released")
	}
	var withReport, recorded runtime.MemStats
	r := farmReport(10000)
	runtime.GC()
	runtime.ReadMemStats(&withReport)
	release := s.RecordReport(r)
	runtime.GC()
	runtime.ReadMemStats(&recorded)
	if s.report.gz != nil {
		t.Fatalf("the server holds %d bytes of compressed JSON before the report is released", s.report.gzSize())
	}
	// The view of the new report replaces the old one's, of the same
	// size: the heap is smaller by the previous report's compressed JSON.
	if grew := int64(recorded.HeapAlloc) - int64(withReport.HeapAlloc); grew > -int64(before)/2 {
		t.Errorf("recording the report changed the heap by %d bytes, want it smaller by about the previous report's %d compressed", grew, before)
	}
	var gzipped, plain bytes.Buffer
	if err := s.report.writeJSON(&gzipped, true); err != nil {
		t.Fatal(err)
	}
	if err := s.report.writeJSON(&plain, false); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&gzipped)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unzipped, plain.Bytes()) {
		t.Fatalf("the report served compressed (%v) differs from the plain one", err)
	}

	release()
	if s.report.whole != nil || s.report.gzSize() == 0 {
		t.Fatal("the released report is not held compressed")
	}
	if s.report.gz.FileError() == nil {
		t.Fatal("the report is kept in a file in a directory that does not exist")
	}
	var held bytes.Buffer
	if err := s.report.writeJSON(&held, false); err != nil || !bytes.Equal(held.Bytes(), plain.Bytes()) {
		t.Fatalf("the report held compressed (%v) reads back differently", err)
	}
	runtime.KeepAlive(r)

	// A report released after a newer one was recorded is let go.
	late := s.RecordReport(farmReport(20))
	newer := s.RecordReport(farmReport(10))
	late()
	if s.report.whole == nil || len(s.report.whole.Endpoints) != 10 {
		t.Fatal("a late release replaced the newer report")
	}
	// The page lists the same rows of the report held as it is and of
	// its rows kept compressed once it is released.
	rows, _, _ := pickAll(t, s).listed()
	if len(rows) != 10 {
		t.Fatalf("the newer report's page has %d rows, want its 10", len(rows))
	}
	newer()
	newer()
	if s.report.whole != nil {
		t.Fatal("the newer report is not held compressed once released")
	}
	kept, _, _ := pickAll(t, s).listed()
	if diff := cmp.Diff(records(rows), records(kept)); diff != "" {
		t.Fatalf("the rows read back differ from those built of the report (-built +read back):\n%s", diff)
	}
}

// records are what is kept of rows.
func records(rows []row) []rowRecord {
	out := make([]rowRecord, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	return out
}

// TestReportKeptInAFile: once released, the report's compressed JSON and
// its page's rows are in files in TempDir, unlinked as they are created,
// so that between runs and through the next run's probing and judging
// the heap holds none of them (about 20 MB at 100,000 endpoints); the
// page and the API read them back from there. The files are closed once
// a newer report replaces them and nothing reads them.
func TestReportKeptInAFile(t *testing.T) { // not parallel: it measures the heap and counts open files
	dir := t.TempDir()
	inMemory := New(Options{SeriesLimit: 1000, TempDir: filepath.Join(dir, "missing")})
	s := New(Options{SeriesLimit: 1000, TempDir: dir})
	var base, kept, keptInMemory runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	recordAndLetGo(s, 10000, func() {})
	runtime.GC()
	runtime.ReadMemStats(&kept)
	recordAndLetGo(inMemory, 10000, func() {})
	runtime.GC()
	runtime.ReadMemStats(&keptInMemory)
	if err := s.report.gz.FileError(); err != nil {
		t.Fatalf("the report is not kept in a file: %v", err)
	}
	held := int64(kept.HeapAlloc) - int64(base.HeapAlloc)
	heldInMemory := int64(keptInMemory.HeapAlloc) - int64(kept.HeapAlloc)
	t.Logf("the server holds %d bytes with the report in a file, %d with it in memory (compressed %d)", held, heldInMemory, s.report.gzSize())
	if held > heldInMemory-int64(s.report.gzSize())/2 {
		t.Errorf("with its report in a file the server holds %d bytes, against %d with it in memory: want less by about the %d compressed", held, heldInMemory, s.report.gzSize())
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("TempDir holds %d entries (%v), want the file unlinked", len(entries), err)
	}
	if n := openIn(t, dir); n != 2 {
		t.Errorf("%d files open in TempDir, want the report's and its rows'", n)
	}
	renderTogether(t, s, 4, 10000)

	// A newer report, the same in both: the API serves it alike.
	r := farmReport(100)
	s.RecordReport(r)()
	inMemory.RecordReport(r)()
	var fromFile, fromMemory bytes.Buffer
	if err := s.report.writeJSON(&fromFile, false); err != nil {
		t.Fatal(err)
	}
	if err := inMemory.report.writeJSON(&fromMemory, false); err != nil {
		t.Fatal(err)
	}
	if fromFile.Len() == 0 || !bytes.Equal(fromFile.Bytes(), fromMemory.Bytes()) {
		t.Fatal("the API serves the report kept in a file differently from the one kept in memory")
	}
	deadline := time.Now().Add(5 * time.Second)
	for openIn(t, dir) != 2 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := openIn(t, dir); n != 2 {
		t.Errorf("%d files open in TempDir once a newer report replaced the first, want only the newer one's two", n)
	}
	if got := pickAll(t, s); got.total != 100 {
		t.Errorf("the newer report's page has %d rows, want its 100", got.total)
	}
}

// TestStatusPageReadsItsRowsBack: a rendering of the status page between
// runs reads the rows kept with the report back one at a time and holds
// only those it lists, not the report read back whole nor a row for each
// of its certificates. At 100,000 endpoints those were about 80 and 27 MB,
// and one visit to the page between runs took the daemon from 50 MiB to
// about 170. The page still counts every row and lists the most urgent
// ones, the same as it lists of the report held as it is.
func TestStatusPageReadsItsRowsBack(t *testing.T) { // not parallel: it measures the heap
	const n = 30000
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	s := New(Options{SeriesLimit: 1000, TempDir: t.TempDir()})
	want, report := recordWithRows(s, n)
	w := httptest.NewRecorder()
	grew := int64(heapGrowth(func() { s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil)) }))
	t.Logf("a report of %d endpoints takes %d bytes; rendering the page grew the heap by %d at most", n, report, grew)
	if w.Code != http.StatusOK {
		t.Fatalf("GET / = %d: %s", w.Code, w.Body)
	}
	if want := fmt.Sprintf("Showing the %d most urgent of %d matching rows", PageLimit, n); !strings.Contains(w.Body.String(), want) {
		t.Errorf("the page does not say %q", want)
	}
	// What the page lists (PageLimit rows) and its HTML take about
	// half of what the report does here, whatever the report's size;
	// reading the report back whole took two and a half times as much.
	if grew > report {
		t.Errorf("rendering the page grew the heap by %d bytes, for a report that takes %d: want less than the report", grew, report)
	}
	listed, _, _ := pickAll(t, s).listed()
	if diff := cmp.Diff(want, records(listed)); diff != "" {
		t.Errorf("the page lists other rows read back than of the report (-report +read back):\n%s", diff)
	}
}

// recordWithRows records a report of n endpoints (farmReport) as the
// daemon does and lets it go, and returns what the page lists of it while
// it is held as it is, and the bytes the report took.
//
//go:noinline
func recordWithRows(s *Server, n int) (listed []rowRecord, report int64) {
	var base, withReport runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	r := farmReport(n)
	runtime.GC()
	runtime.ReadMemStats(&withReport)
	release := s.RecordReport(r)
	p := newRowPick(filter{}, time.Now())
	if err := s.report.pick(p); err != nil {
		panic(err)
	}
	rows, _, _ := p.listed()
	listed = records(rows)
	release()
	return listed, int64(withReport.HeapAlloc) - int64(base.HeapAlloc)
}

// heapGrowth is the most the heap grew over what it held after a
// collection as f ran, sampled every 100 µs.
func heapGrowth(f func()) uint64 {
	runtime.GC()
	held := heapObjects()
	peak, done := make(chan uint64), make(chan struct{})
	go func() {
		top := held
		for {
			select {
			case <-done:
				peak <- top
				return
			default:
				top = max(top, heapObjects())
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	f()
	close(done)
	return <-peak - held
}

// heapObjects is the heap's bytes in objects, live or not yet swept.
func heapObjects() uint64 {
	sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(sample)
	return sample[0].Value.Uint64()
}

// openIn counts this process's open files in dir (deleted ones too).
func openIn(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// renderTogether picks the page rows of the server's report from n
// renderings at once: they share one reading of the rows, one for each
// of its certificates, with its source. A reading under way (pickMu held
// here) keeps them waiting until all have asked.
func renderTogether(t *testing.T, s *Server, n, certs int) {
	got := make([]*rowPick, n)
	var wg sync.WaitGroup
	s.pickMu.Lock()
	for i := range got {
		wg.Go(func() {
			var err error
			if got[i], err = s.pickRows(s.report, filter{}, time.Now()); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // every rendering has asked
	s.pickMu.Unlock()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, p := range got[1:] {
		if p != got[0] {
			t.Fatal("renderings at the same time read the page's rows more than once")
		}
	}
	rows, _, truncated := got[0].listed()
	if p := got[0]; p.total != certs || p.matching != certs || len(rows) != min(certs, PageLimit) || truncated != (certs > PageLimit) {
		t.Fatalf("the renderings picked %d of %d rows (%d matching, truncated %v), want %d of %d", len(rows), p.total, p.matching, truncated, min(certs, PageLimit), certs)
	}
	if !slices.Equal(rows[0].Sources, []string{"dnszone:farm.test"}) {
		t.Fatalf("the first row is from %q, want the zone", rows[0].Sources)
	}
}

// filterChoices is what the page's filter choices are, read off its rows:
// every finding kind of a row, and every source of a row or of the report.
// The view sets them without building a row for every certificate
// (addSeriesAndChoices); this is the reference it must agree with.
func filterChoices(rows []row, reportSources []scan.SourceResult) (kinds, sources []string) {
	allKinds, allSources := map[string]bool{}, map[string]bool{}
	for _, rw := range rows {
		for _, k := range rw.Kinds {
			allKinds[k] = true
		}
		for _, s := range rw.Sources {
			allSources[s] = true
		}
	}
	for _, s := range reportSources {
		allSources[policy.Printable(s.Name)] = true
	}
	return sortedKeys(allKinds), sortedKeys(allSources)
}

// TestViewChoicesAreTheRows: the filter choices the server records with a
// report (without the rows of its served certificates) are those its
// page's rows give, for a report with each kind of row: certificates
// served through several sources, one kept from an earlier run and served
// nowhere, ACM and at-rest certificates no endpoint serves with findings
// about them, findings about no certificate (an unreachable target, a
// degraded source), and a source whose name needs escaping.
func TestViewChoicesAreTheRows(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ep := func(name string) policy.Endpoint { return policy.Endpoint{Name: name, Port: 443, Address: "10.0.0.1"} }
	probed := func(name, cert string, sources ...string) scan.Endpoint {
		return scan.Endpoint{Name: name, Port: 443, Address: "10.0.0.1", Certificate: cert, Sources: sources}
	}
	certA, certB, certK, restOnly := "a1", "b2", "c3", "d4"
	arn := "arn:aws:acm:eu-west-1:123456789012:certificate/unserved"
	r := &scan.Report{
		GeneratedAt: now,
		Sources: []scan.SourceResult{{Name: "dnszone:farm.test"}, {Name: "static"}, {Name: "acm:123456789012"},
			{Name: "files:/etc/ssl"}, {Name: "zone:\u202eevil"}},
		Endpoints: []scan.Endpoint{
			probed("a.example", certA, "dnszone:farm.test"),
			probed("a2.example", certA, "static", "zone:\u202eevil"),
			probed("b.example", certB, "dnszone:farm.test"),
			probed("down.example", "", "dnszone:other.test"),
			probed("gone.example", "", "kubernetes:ingress"),
		},
		Certificates: []policy.Certificate{
			{SHA256: certA, Subject: "a.example", NotAfter: policy.At(now.Add(20 * 24 * time.Hour))},
			{SHA256: certB, Subject: "b.example", NotAfter: policy.At(now.Add(90 * 24 * time.Hour))},
			{SHA256: certK, Subject: "gone.example", NotAfter: policy.At(now.Add(5 * 24 * time.Hour))},
		},
		Findings: []policy.Finding{
			{Kind: policy.Expiring, Tier: policy.Warning, Certificate: certA, Endpoints: []policy.Endpoint{ep("a.example"), ep("a2.example")}},
			{Kind: policy.ChainUntrusted, Tier: policy.Page, Certificate: certB, Endpoints: []policy.Endpoint{ep("b.example")}},
			{Kind: policy.Expiring, Tier: policy.Page, Certificate: certK, Endpoints: []policy.Endpoint{ep("gone.example")}, UnverifiedSince: policy.At(now.Add(-time.Hour))},
			{Kind: policy.Unreachable, Tier: policy.Warning, Name: "down.example:443", Endpoints: []policy.Endpoint{ep("down.example")}},
			{Kind: policy.Unreachable, Tier: policy.Warning, Name: "nowhere.example:443"},
			{Kind: policy.DiscoveryDegraded, Tier: policy.Warning, Name: "files:/etc/ssl"},
			{Kind: policy.RenewalFailed, Tier: policy.Page, Name: arn},
			{Kind: policy.Expired, Tier: policy.Critical, Certificate: restOnly},
		},
	}
	r.ACM = []policy.ACMCertificate{
		{Certificate: acmcert.Certificate{ARN: arn, Account: "210987654321", DomainName: "unserved.example", NotAfter: now.Add(time.Hour)}},
		{Certificate: acmcert.Certificate{ARN: arn + "-served", Account: "123456789012", DomainName: "a.example"}, SHA256: certA},
	}
	r.AtRest = []policy.AtRestCertificate{
		{Certificate: atrest.Certificate{SHA256: restOnly, Subject: "rest.example", NotAfter: now, Locations: []atrest.Location{{Kind: atrest.File, Where: "/etc/ssl/rest.pem"}}}},
		{Certificate: atrest.Certificate{SHA256: certB, Subject: "b.example", NotAfter: now, Locations: []atrest.Location{{Kind: atrest.File, Where: "/etc/ssl/b.pem"}}}},
	}
	for name, r := range map[string]*scan.Report{"every kind of row": r, "a farm": farmReport(300), "empty": {GeneratedAt: now}} {
		v := buildView(r, 1000)
		kinds, sources := filterChoices(buildRows(r), r.Sources)
		if !slices.Equal(v.kinds, kinds) || !slices.Equal(v.sources, sources) {
			t.Errorf("%s: the view's choices are kinds %q and sources %q; the page's rows give %q and %q", name, v.kinds, v.sources, kinds, sources)
		}
		// The rows as they are kept and read back are those built (an
		// empty list reads back as none).
		var kept bytes.Buffer
		n, err := writeRows(&kept, r)
		if err != nil {
			t.Fatalf("%s: write rows: %v", name, err)
		}
		var back []row
		if err := readRows(&kept, n, func(rw row) { back = append(back, rw) }); err != nil {
			t.Fatalf("%s: read rows back: %v", name, err)
		}
		slices.SortFunc(back, func(a, b row) int { return compareRows(&a, &b) })
		if diff := cmp.Diff(records(buildRows(r)), records(back), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: the rows read back differ from those built (-built +read back):\n%s", name, diff)
		}
		if want := []string{"acm", "dnszone:other.test", "kubernetes:ingress", policy.Printable("zone:\u202eevil")}; name == "every kind of row" &&
			slices.ContainsFunc(want, func(s string) bool { return !slices.Contains(sources, s) }) {
			t.Errorf("%s: the rows' sources %q lack one of %q (the unserved ACM certificate's, the unreachable target's, the kept certificate's, the escaped one)", name, sources, want)
		}
	}
}

// TestReportKeptInMemoryWarnsOnce: where no file can be written in
// TempDir the report is kept in memory, and the log says so once, not at
// every run.
func TestReportKeptInMemoryWarnsOnce(t *testing.T) {
	var logs bytes.Buffer
	s := New(Options{SeriesLimit: 1000, TempDir: filepath.Join(t.TempDir(), "missing"), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		recordAndLetGo(s, 10, func() {})
	}
	if s.report.gz == nil || s.report.gz.FileError() == nil {
		t.Fatal("the report is not kept in memory")
	}
	if n := strings.Count(logs.String(), "cannot keep the report's compressed JSON and page rows in temporary files"); n != 1 {
		t.Errorf("the log says %d times that the report is kept in memory, want once:\n%s", n, logs.String())
	}
}

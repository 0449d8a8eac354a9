package jsonstream_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// fleetProber answers every target with the observation a fleet in which
// every endpoint serves its own leaf would give, built when the target is
// probed, as a real probe's is: the scan, not the fleet, holds what it
// keeps.
type fleetProber struct {
	now         time.Time
	root, inter *x509.Certificate
}

func (f fleetProber) Probe(_ context.Context, t discovery.Target) []probes.Observation {
	i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(t.Name, "ep-"), ".farm.test"))
	if err != nil {
		panic("not a target of the synthetic fleet: " + t.Name)
	}
	return []probes.Observation{f.observe(i, t.Name, t.Addresses[0])}
}

// syntheticFleet returns n targets and a prober answering each, with the
// mix of the benchmark farm (../shared/bench/tlsfarm): 4% expired, 10%
// expiring in 3 days, 15% in 30 days, 62% in 90 days, 3% missing
// intermediate, 3% wrong host name, 3% self-signed. Certificates are built
// as parsed structures (unique DER-sized Raw bytes, no signatures): policy
// and report never check signatures, so this keeps the setup fast.
func syntheticFleet(n int, now time.Time) ([]discovery.Target, fleetProber) {
	root := &x509.Certificate{
		Raw: []byte("bench root"), Subject: pkix.Name{CommonName: "bench root"}, Issuer: pkix.Name{CommonName: "bench root"},
		SerialNumber: big.NewInt(1), NotBefore: now.AddDate(-5, 0, 0), NotAfter: now.AddDate(5, 0, 0), IsCA: true, BasicConstraintsValid: true,
	}
	inter := &x509.Certificate{
		Raw: []byte("bench intermediate"), Subject: pkix.Name{CommonName: "bench intermediate"}, Issuer: root.Subject,
		SerialNumber: big.NewInt(2), NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(4, 0, 0), IsCA: true, BasicConstraintsValid: true,
	}
	targets := make([]discovery.Target, n)
	for i := range n {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		addr := netip.AddrFrom4([4]byte{127, 1 + b[1], b[2], b[3]})
		targets[i] = discovery.Target{Name: fmt.Sprintf("ep-%06d.farm.test", i), Port: 443, Addresses: []netip.Addr{addr}, Sources: []string{"static"}, Explicit: true}
	}
	return targets, fleetProber{now: now, root: root, inter: inter}
}

// observe returns the observation of the fleet's i-th endpoint, name at addr.
func (f fleetProber) observe(i int, name string, addr netip.Addr) probes.Observation {
	const day = 24 * time.Hour
	now, inter := f.now, f.inter
	raw := make([]byte, 900) // a typical leaf's DER size, unique per leaf
	binary.BigEndian.PutUint64(raw, uint64(i))
	leaf := &x509.Certificate{
		Raw: raw, Subject: pkix.Name{CommonName: name}, Issuer: inter.Subject, DNSNames: []string{name},
		SerialNumber: new(big.Int).SetUint64(uint64(i)<<40 | 0x5eed), NotBefore: now.Add(-60 * day),
	}
	o := probes.Observation{
		Name: name, Port: 443, Address: addr, Sources: []string{"static"}, Explicit: true,
		At: now, Duration: time.Millisecond, Attempts: 1, NameMatch: true, Trust: probes.Trusted,
	}
	switch r := i % 100; {
	case r < 4:
		leaf.NotAfter = now.Add(-time.Duration(1+i%30) * day)
		o.Trust, o.TrustError = probes.TrustExpired, fmt.Sprintf("out of date: %q expired at %s", name, leaf.NotAfter.Format(time.RFC3339))
	case r < 14:
		leaf.NotAfter = now.Add(3 * day)
	case r < 29:
		leaf.NotAfter = now.Add(30 * day)
	case r < 91:
		leaf.NotAfter = now.Add(90 * day)
	case r < 94:
		leaf.NotAfter = now.Add(90 * day)
		o.Trust, o.TrustError = probes.TrustUnknownAuthority, "incomplete chain: server did not send the intermediate"
	case r < 97:
		leaf.NotAfter = now.Add(90 * day)
		leaf.Subject.CommonName, leaf.DNSNames = "wrong-"+name, []string{"wrong-" + name}
		o.NameMatch = false
	default:
		leaf.NotAfter = now.Add(90 * day)
		leaf.Issuer = leaf.Subject
		o.Trust, o.TrustError = probes.TrustSelfSigned, "self-signed certificate is not a trusted root"
	}
	o.Chain = []*x509.Certificate{leaf, inter}
	if o.Trust == probes.Trusted || o.Trust == probes.TrustExpired {
		o.Paths = [][]*x509.Certificate{{leaf, inter, f.root}}
	} else if o.Trust == probes.TrustSelfSigned {
		o.Chain = o.Chain[:1]
	}
	return o
}

// ptrText marshals itself only through a pointer, which encoding/json uses
// for addressable values alone.
type ptrText struct{ v string }

func (p *ptrText) MarshalText() ([]byte, error) { return []byte("text:" + p.v), nil }

// inventoryReport has the shape of `certwatch inventory --output json`.
type inventoryReport struct {
	Targets []discovery.Target      `json:"targets"`
	Sources []scan.SourceResult     `json:"sources"`
	ACM     []policy.ACMCertificate `json:"acm,omitempty"`
	IAM     []policy.IAMCertificate `json:"iam,omitempty"`
}

// TestWrite checks that the streamed JSON is byte for byte what
// encoding/json writes, so `--output json` keeps its shape.
func TestWrite(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	targets, prober := syntheticFleet(300, now)
	report := (&scan.Pass{Prober: prober, Rules: policy.DefaultRules()}).Probe(context.Background(), targets, now)
	report.Sources = []scan.SourceResult{{Name: "static", Targets: 300}, {Name: "dnszone:a<b>&c.example", Error: "axfr refused \u2028 \"quoted\""}}
	report.Skipped = []discovery.Target{{Name: "*.farm.test", Port: 443, Sources: []string{"static"}, Skip: "wildcard owner name"}}
	type embedded struct{ A int }
	type Inner struct {
		A int
		B string `json:"b,omitempty"`
	}
	type Middle struct {
		Inner
		C []int
	}
	type odd struct {
		M     map[string]int
		F     float64
		B     []byte
		I     any
		P     *int
		NilP  *int
		T     time.Time
		TP    *time.Time
		Addr  netip.Addr
		APtr  *netip.Addr
		Tier  policy.Tier
		Empty struct{}
		Arr   [2]int
		Str   string `json:"s,omitempty"`
		//lint:ignore SA5008 a tag name encoding/json rejects: the field name is used
		Quote string `json:"q\""`
		Ctl   string
		Skip  string `json:"-"`
		//lint:ignore SA5008 the field named "-", as encoding/json reads it
		Dash string `json:"-,"`
	}
	one := 1
	oddValue := odd{
		M: map[string]int{"b": 2, "a": 1}, F: 1.5, B: []byte("hi"), I: []any{1, "x"}, P: &one,
		T: now, TP: &now, Addr: netip.MustParseAddr("::1"), Tier: policy.Page,
		Ctl: "tab\t nl\n bell\a ctl\x01 del\x7f bad\xff <html> & \u2028\u2029 é", Dash: "dash",
	}
	tests := []struct {
		name string
		v    any
	}{
		{"report", report},
		{"report with empty lists", &scan.Report{GeneratedAt: now, Endpoints: []scan.Endpoint{}, Certificates: []policy.Certificate{}}},
		{"zero report", &scan.Report{}},
		{"inventory", inventoryReport{Targets: targets, Sources: report.Sources}},
		{"inventory without targets", inventoryReport{Targets: []discovery.Target{}}},
		{"embedded field", struct {
			embedded
			B []int
		}{embedded{1}, []int{2, 3}}},
		{"exported embedded structs", []struct {
			Middle
			D int
		}{{Middle{Inner{1, "b"}, []int{2}}, 3}, {}}},
		{"embedded field with a tag name", struct {
			Inner `json:"inner"`
			D     int
		}{Inner{1, ""}, 2}},
		{"embedded field shadowed", struct {
			Inner
			A string
		}{Inner{1, "b"}, "outer"}},
		{"embedded pointer", struct {
			*Inner
			D int
		}{&Inner{1, "b"}, 2}},
		{"embedded nil pointer", struct {
			*Inner
			D int
		}{nil, 2}},
		{"type embedded in itself", SelfEmbedding{&SelfEmbedding{X: 1}, 2}},
		{"certificate with history", policy.Certificate{SHA256: "ab", NotAfter: policy.At(now), Lineage: &policy.Lineage{FirstSeen: now.AddDate(0, -1, 0), Previous: "cd"}}},
		{"certificate at rest", atRestHeldIn(3)},
		{"other kinds", oddValue},
		{"pointer-receiver marshaller", []struct{ T ptrText }{{ptrText{"a"}}, {ptrText{"b"}}}},
		{"pointer-receiver marshaller, not addressable", struct{ T ptrText }{ptrText{"a"}}},
		{"string option", struct {
			N int `json:"n,string"`
		}{7}},
		{"other kinds in a list", []odd{oddValue, {}}},
		{"not a struct", []string{"a", "b"}},
		{"times", []time.Time{{}, now.Add(123456789), now.In(time.FixedZone("x", -(5*3600 + 30*60)))}},
		{"deeper than the indent table", nest(20)},
		{"maps", struct {
			Plain   map[string]int
			Nil     map[string]int
			Empty   map[string]string
			Escaped map[string]string
			Keyed   map[textKey]int
			Runs    map[string]inventoryReport
			Any     map[string]any
			Nested  map[string]map[string][]int
			Numbers map[int]string
		}{
			Plain:   map[string]int{"b": 2, "a": 1, "": 0, "B": 3, "é": 4},
			Empty:   map[string]string{},
			Escaped: map[string]string{"<a&b>": "x", "q\"uote\u2028": "y", "tab\t": "z"},
			Keyed:   map[textKey]int{"z": 1, "y": 2},
			Runs:    map[string]inventoryReport{"static": {Targets: targets[:3]}, "dnszone:farm.test": {Targets: targets[3:5], Sources: report.Sources}},
			Any:     map[string]any{"n": 1, "l": []any{"x", 2.5}, "m": map[string]any{"k": nil}},
			Nested:  map[string]map[string][]int{"b": {"y": {1}, "x": nil}, "a": {}},
			Numbers: map[int]string{10: "ten", 2: "two"},
		}},
		{"map at the top", map[string][]discovery.Target{"static": targets[:2], "other": {}}},
		{"nil", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			if err := enc.Encode(tt.v); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := jsonstream.Write(&got, tt.v); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				g, w := got.Bytes(), want.Bytes()
				i := 0
				for i < len(g) && i < len(w) && g[i] == w[i] {
					i++
				}
				t.Errorf("streamed JSON differs from encoding/json at byte %d:\ngot  ...%s\nwant ...%s", i, excerpt(g, i), excerpt(w, i))
			}
		})
	}
}

// textKey is a map key of a string kind with a MarshalText method, which
// encoding/json does not call for such a key.
type textKey string

func (k textKey) MarshalText() ([]byte, error) { return []byte("text:" + k), nil }

// TestWriteMapStreamed: a map of long lists (the inventory a daemon keeps
// in its state, each source's targets) is written as it is encoded, never
// held whole as encoding/json holds a map, and then again indented.
func TestWriteMapStreamed(t *testing.T) {
	t.Parallel()
	targets, _ := syntheticFleet(20000, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var w maxWriter
	if err := jsonstream.Write(&w, map[string]inventoryReport{"dnszone:farm.test": {Targets: targets}}); err != nil {
		t.Fatal(err)
	}
	if w.n < 2<<20 || w.max > 64<<10 {
		t.Errorf("%d bytes written, the largest write %d bytes; want over 2 MiB, none above the 64 KiB buffer", w.n, w.max)
	}
}

// atRestHeldIn is a report whose one certificate at rest is held in n
// places (as a CA in the ca.crt of n Secrets) and served by an endpoint.
func atRestHeldIn(n int) *scan.Report {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := policy.AtRestCertificate{Certificate: atrest.Certificate{
		SHA256: strings.Repeat("ab", 32), Subject: "CN=Kube Root", Issuer: "CN=Kube Root", Serial: "01",
		NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(5, 0, 0), CA: true, SelfSigned: true,
		KeyAlgorithm: "ECDSA", KeyBits: 256, SignatureAlgorithm: "ECDSA-SHA256", Verified: true,
	}, Endpoints: []policy.Endpoint{{Name: "api.example.test", Port: 443, Address: "127.0.0.1"}}}
	for i := range n {
		c.Locations = append(c.Locations, atrest.Location{Kind: atrest.Secret, Where: fmt.Sprintf("ns-%03d/svc-%d-tls", i%500, i), Key: "ca.crt", Cluster: "prod"})
	}
	return &scan.Report{GeneratedAt: now, AtRest: []policy.AtRestCertificate{c}}
}

// maxWriter records the largest write it received.
type maxWriter struct{ n, max int }

func (w *maxWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	w.max = max(w.max, len(p))
	return len(p), nil
}

// SelfEmbedding embeds a pointer to its own type, which encoding/json
// stops following where it has been.
type SelfEmbedding struct {
	*SelfEmbedding
	X int
}

// TestWriteAtRest: a certificate held at rest in 20,000 places (a CA
// in every Secret of a cluster) is streamed as it is encoded, as an
// endpoint is, never held whole: policy.AtRestCertificate embeds
// atrest.Certificate, and a struct with an embedded field was handed to
// encoding/json whole (2.9 MB here, and as much again indented and copied,
// at the end of a scan, when its heap is largest).
func TestWriteAtRest(t *testing.T) {
	t.Parallel()
	var w maxWriter
	if err := jsonstream.Write(&w, atRestHeldIn(20000)); err != nil {
		t.Fatal(err)
	}
	if w.n < 2<<20 || w.max > 64<<10 {
		t.Errorf("%d bytes written, the largest write %d bytes; want over 2 MiB, none above the 64 KiB buffer", w.n, w.max)
	}
}

// TestWriteReportAllocations: writing a scan's report allocates next to
// nothing per certificate and per finding. The report is written at the
// end of a scan, when its heap is largest: a finding handed to
// encoding/json (its MarshalJSON) and each omitzero time boxed to ask
// IsZero cost 1.7 KB of garbage a finding and 0.3 KB a certificate, 40 MB
// at 100,000 endpoints, which the collector could not reclaim as fast as
// the report made it.
func TestWriteReportAllocations(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	targets, prober := syntheticFleet(1000, now)
	r := (&scan.Pass{Prober: prober, Rules: policy.DefaultRules()}).Probe(context.Background(), targets, now)
	if len(r.Findings) < 300 || len(r.Certificates) != 1000 {
		t.Fatalf("%d findings and %d certificates; want over 300 and 1000", len(r.Findings), len(r.Certificates))
	}
	var bytes float64
	allocs := testing.AllocsPerRun(3, func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := jsonstream.Write(io.Discard, r); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		bytes = float64(after.TotalAlloc - before.TotalAlloc)
	})
	items := float64(len(r.Findings) + len(r.Certificates) + len(r.Endpoints))
	if perItem := bytes / items; allocs > items || perItem > 200 {
		t.Errorf("writing a report of %d endpoints, %d certificates and %d findings made %.0f allocations and %.0f bytes (%.0f bytes an item); want at most one allocation and 200 bytes an item",
			len(r.Endpoints), len(r.Certificates), len(r.Findings), allocs, bytes, perItem)
	}
}

// nested is a recursive type, for nesting deeper than the encoder's
// table of indents.
type nested struct {
	N    int
	Next *nested `json:",omitempty"`
}

func nest(depth int) *nested {
	var n *nested
	for i := range depth {
		n = &nested{N: i, Next: n}
	}
	return n
}

func excerpt(b []byte, i int) string {
	return string(b[max(0, i-80):min(len(b), i+80)])
}

// BenchmarkEvaluateReport is the policy and report stage of a scan of
// 100,000 endpoints, each serving its own leaf: observations reduced as
// they complete (scan.Pass.Probe with a prober that answers at once), the
// findings and certificates, and the JSON report streamed out as
// `certwatch scan --output json` writes it. Probing itself is measured by
// probes.BenchmarkProbe and bench/run.sh.
func BenchmarkEvaluateReport(b *testing.B) {
	const n = 100_000
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	targets, prober := syntheticFleet(n, now)
	// Between the probing and the report, and between building and
	// writing it, memory is given back as `certwatch scan` gives it back.
	pass := &scan.Pass{Prober: prober, Rules: policy.DefaultRules(), OnProbed: debug.FreeOSMemory}

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := pass.Probe(context.Background(), targets, now)
		debug.FreeOSMemory()
		if err := jsonstream.Write(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/endpoint")
	b.ReportMetric(reportBytes(b, pass, targets, now)/n, "report-B/endpoint")
	heap, rss := peakHeap(b, pass, targets, now)
	b.ReportMetric(heap/(1<<20), "peak-heap-MiB")
	if rss > 0 {
		b.ReportMetric(rss/(1<<20), "peak-rss-MiB")
	}
}

// peakHeap returns the most heap one pass over targets and its report
// written out held in spans at once, above what was held before it, at
// the GOGC the benchmark runs with (`certwatch scan` runs at 25): what the
// pass adds to a scan's peak RSS, sampled every half millisecond. On Linux
// it also returns the process's peak RSS during the pass above its RSS
// before it, the freed heap given back first (VmHWM, reset through
// /proc/self/clear_refs); 0 elsewhere.
func peakHeap(b *testing.B, pass *scan.Pass, targets []discovery.Target, now time.Time) (heap, rss float64) {
	b.Helper()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	inUse := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64() + sample[1].Value.Uint64())
	}
	runtime.GC()
	debug.FreeOSMemory()
	rssBase := procStatusKB("VmRSS")
	if os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) != nil {
		rssBase = 0
	}
	base := inUse()
	stop, done := make(chan struct{}), make(chan int64)
	go func() {
		peak := base
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- max(peak, inUse())
				return
			case <-t.C:
				peak = max(peak, inUse())
			}
		}
	}()
	r := pass.Probe(context.Background(), targets, now)
	debug.FreeOSMemory()
	if err := jsonstream.Write(io.Discard, r); err != nil {
		b.Fatal(err)
	}
	close(stop)
	peak := <-done
	if rssBase > 0 {
		rss = float64(procStatusKB("VmHWM")-rssBase) * 1024
	}
	runtime.KeepAlive(r)
	return float64(peak - base), rss
}

// procStatusKB returns the field name of /proc/self/status, in kB; 0 when
// it cannot be read.
func procStatusKB(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// reportBytes returns the heap a report of targets holds until it is
// written: the live heap with the report, less the live heap without it.
func reportBytes(b *testing.B, pass *scan.Pass, targets []discovery.Target, now time.Time) float64 {
	b.Helper()
	var with, without runtime.MemStats
	r := pass.Probe(context.Background(), targets, now)
	runtime.GC()
	runtime.ReadMemStats(&with)
	if len(r.Endpoints) != len(targets) {
		b.Fatalf("report has %d endpoints, want %d", len(r.Endpoints), len(targets))
	}
	r = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	// The fleet stays live through both readings: were its targets freed
	// in between, the difference would count them as the report's.
	runtime.KeepAlive(targets)
	runtime.KeepAlive(pass)
	return float64(int64(with.HeapAlloc) - int64(without.HeapAlloc))
}

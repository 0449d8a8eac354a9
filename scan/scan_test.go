package scan_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// listSource is a discovery source backed by a fixed list (discovery's own
// contract, no wire protocol involved).
type listSource struct {
	name    string
	targets []discovery.Target
	err     error
}

func (s listSource) Name() string { return s.name }
func (s listSource) Targets(context.Context) ([]discovery.Target, error) {
	return s.targets, s.err
}
func (s listSource) Discover(ctx context.Context) (found.Yield, error) {
	ts, err := s.Targets(ctx)
	return found.Yield{Targets: ts}, err
}

func TestEverySourceFailed(t *testing.T) {
	p := &scan.Pass{
		Sources: []scan.Source{
			listSource{name: "dnszone:a.example", err: errors.New("zone a.example: AXFR refused by 127.0.0.1:53 (REFUSED)")},
			listSource{name: "dnszone:b.example", err: errors.New("zone b.example: timeout")},
		},
		Prober: probes.New(probes.Config{AllowLoopback: true}),
	}
	_, err := p.Run(context.Background())
	if !errors.Is(err, scan.ErrNoSource) {
		t.Fatalf("Run error = %v, want ErrNoSource", err)
	}
	if !strings.Contains(err.Error(), "REFUSED") {
		t.Errorf("error %q does not carry the source's reason", err)
	}
}

// TestPartialSourceFailureIsAFinding probes a real TLS listener from one
// source while another source fails: the report has the certificate and a
// discovery_failed finding, never a silent "all green".
func TestPartialSourceFailureIsAFinding(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Scan Test Root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"ok.example"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)})
	srv, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	target := discovery.Target{Name: "ok.example", Port: int(srv.Addr().Port()), Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{"static"}}
	p := &scan.Pass{
		Sources: []scan.Source{
			listSource{name: "static", targets: []discovery.Target{target}},
			listSource{name: "dnszone:broken.example", err: errors.New("zone broken.example: AXFR refused")},
		},
		Prober: probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool()}),
		Rules:  policy.DefaultRules(),
	}
	r, err := p.Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(r.Certificates) != 1 || r.Certificates[0].DNSNames[0] != "ok.example" {
		t.Errorf("certificates = %+v, want the listener's", r.Certificates)
	}
	if len(r.Findings) != 1 || r.Findings[0].Kind != policy.DiscoveryFailed || r.Findings[0].Tier != policy.Page || !strings.Contains(r.Findings[0].Message, "broken.example") {
		t.Errorf("findings = %+v, want one discovery_failed at page for broken.example", r.Findings)
	}
	if len(r.Endpoints) != 1 || r.Endpoints[0].Certificate != r.Certificates[0].SHA256 {
		t.Errorf("endpoints = %+v, want one serving the certificate", r.Endpoints)
	}
}

// gateSource blocks in Discover until release is closed, counting callers
// in flight.
type gateSource struct {
	name     string
	inFlight *atomic.Int32
	release  chan struct{}
}

func (s gateSource) Name() string { return s.name }
func (s gateSource) Discover(ctx context.Context) (found.Yield, error) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	<-s.release
	return found.Yield{}, nil
}

// TestDiscoveryIsBounded: 20 zones on one primary are not transferred all at
// once.
func TestDiscoveryIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inFlight atomic.Int32
		release := make(chan struct{})
		p := &scan.Pass{Prober: probes.New(probes.Config{AllowLoopback: true})}
		for i := range 20 {
			p.Sources = append(p.Sources, gateSource{name: fmt.Sprintf("dnszone:z%d.example", i), inFlight: &inFlight, release: release})
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.Discover(context.Background())
		}()
		synctest.Wait()
		if n := inFlight.Load(); n != 4 {
			t.Errorf("%d sources queried at once, want 4", n)
		}
		close(release)
		<-done
	})
}

// streamSource streams a fixed list as a zone does: in order, and reusing
// one Addresses array for every target it yields.
type streamSource struct {
	listSource
	streamed *atomic.Int32
}

func (s streamSource) Stream(context.Context) (iter.Seq[discovery.Target], int, found.Inventory, error) {
	if s.err != nil {
		return nil, 0, found.Inventory{}, s.err
	}
	s.streamed.Add(1)
	return func(yield func(discovery.Target) bool) {
		buf := make([]netip.Addr, 0, 4)
		for _, t := range s.targets {
			if len(t.Addresses) > 0 {
				buf = append(buf[:0], t.Addresses...)
				t.Addresses = buf
			}
			if !yield(t) {
				return
			}
		}
	}, len(s.targets), found.Inventory{}, nil
}

// TestStreamingSource: a pass whose only source streams probes the stream
// and reports exactly what the list of the same targets gives; a failed
// stream is every source failing.
func TestStreamingSource(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Scan Test Root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	var targets []discovery.Target
	for i := range 12 {
		name := fmt.Sprintf("h%02d.example", i)
		leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Duration(10+i) * 24 * time.Hour)})
		srv, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		targets = append(targets, discovery.Target{Name: name, Port: int(srv.Addr().Port()), Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{"dnszone:example"}})
		if i == 5 {
			targets = append(targets, discovery.Target{Name: "*.w.example", Port: 443, Sources: []string{"dnszone:example"}, Skip: "wildcard owner: no single name to probe"})
		}
	}
	pass := func(src scan.Source) *scan.Pass {
		return &scan.Pass{Sources: []scan.Source{src}, Prober: probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool()}), Rules: policy.DefaultRules(), Parallelism: 3, Now: func() time.Time { return now }}
	}
	var streamed atomic.Int32
	got, err := pass(streamSource{listSource{name: "dnszone:example", targets: targets}, &streamed}).Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if streamed.Load() != 1 {
		t.Fatalf("the source was streamed %d times, want once", streamed.Load())
	}
	want, err := pass(listSource{name: "dnszone:example", targets: targets}).Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Each endpoint served its own certificate, at its own address: a
	// reused Addresses array would send probes to the wrong listener.
	// (How long each probe took is the run's own.)
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(policy.Probed{}, "Duration")); diff != "" {
		t.Errorf("streamed report differs from the listed one (-list +stream):\n%s", diff)
	}
	if len(got.Endpoints) != 12 || len(got.Skipped) != 1 || len(got.Certificates) != 12 || got.Targets != 13 {
		t.Errorf("report has %d endpoints, %d skipped, %d certificates, %d targets; want 12, 1, 12, 13", len(got.Endpoints), len(got.Skipped), len(got.Certificates), got.Targets)
	}
	for _, ep := range got.Endpoints {
		if ep.Certificate == "" {
			t.Errorf("%s:%d: no certificate (%s)", ep.Name, ep.Port, ep.Fault().Error)
		}
	}

	_, err = pass(streamSource{listSource{name: "dnszone:broken.example", err: errors.New("zone broken.example: AXFR refused by 127.0.0.1:53 (REFUSED)")}, &streamed}).Run(context.Background())
	if !errors.Is(err, scan.ErrNoSource) || !strings.Contains(err.Error(), "REFUSED") {
		t.Errorf("failed stream: Run error = %v, want ErrNoSource with the reason", err)
	}
}

// refusingProber answers every target as refused, at once.
type refusingProber struct{}

func (refusingProber) Probe(_ context.Context, t discovery.Target) []probes.Observation {
	return []probes.Observation{{Name: t.Name, Port: t.Port, Sources: t.Sources, Failure: probes.FailRefused, Error: "connection refused"}}
}

// TestOnProbed checks that OnProbed is called once, after the last
// observation and before the report is built.
func TestOnProbed(t *testing.T) {
	targets := []discovery.Target{{Name: "a.example", Port: 443, Sources: []string{"list"}}, {Name: "b.example", Port: 443, Sources: []string{"list"}}}
	seen, atProbed, calls := 0, -1, 0
	p := &scan.Pass{Prober: refusingProber{}, Rules: policy.DefaultRules(), Parallelism: 2}
	p.OnObservation = func(*probes.Observation) { seen++ }
	p.OnProbed = func() { calls, atProbed = calls+1, seen }
	r := p.Probe(context.Background(), targets, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if calls != 1 || atProbed != len(targets) {
		t.Errorf("OnProbed called %d times, after %d observations; want once, after %d", calls, atProbed, len(targets))
	}
	if len(r.Endpoints) != len(targets) {
		t.Errorf("report has %d endpoints, want %d", len(r.Endpoints), len(targets))
	}
}

// TestHistoryNotKeptBetweenRuns: the name history given to a pass before
// a run (SetHistory, as the daemon does before each probe run) is let go
// once the run is judged: between runs the pass holds none of it, tens of
// megabytes at 100,000 names.
func TestHistoryNotKeptBetweenRuns(t *testing.T) {
	targets := []discovery.Target{{Name: "a.example", Port: 443, Sources: []string{"list"}}}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &scan.Pass{Prober: refusingProber{}, Rules: policy.DefaultRules(), Parallelism: 2}
	h := []policy.NameHistory{{Name: "a.example", SHA256: strings.Repeat("ab", 32), NotBefore: policy.At(now.AddDate(0, -1, 0)), NotAfter: policy.At(now.AddDate(0, 2, 0)), Since: policy.At(now.AddDate(0, -1, 0)), LastSeen: policy.At(now)}}
	kept := weak.Make(&h[0])
	p.SetHistory(h)
	h = nil
	if r := p.Probe(context.Background(), targets, now); len(r.Endpoints) != 1 {
		t.Fatalf("report has %d endpoints, want 1", len(r.Endpoints))
	}
	runtime.GC()
	if kept.Value() != nil {
		t.Error("the name history given before the run is still held after it")
	}
	runtime.KeepAlive(p) // the pass lives on between runs, as a daemon's does
}

// TestListReleasedBeforeReport: once every target of a list given to
// Probe is taken, the list is not kept while the report is built, as far
// as the caller keeps it: a daemon's inventory of 100,000 is 18 MB.
func TestListReleasedBeforeReport(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	targets := make([]discovery.Target, 64)
	for i := range targets {
		targets[i] = discovery.Target{Name: fmt.Sprintf("h%d.example", i), Port: 443, Sources: []string{"list"}}
	}
	targets[3].Skip = "wildcard owner"
	kept := weak.Make(&targets[0])
	p := &scan.Pass{Prober: refusingProber{}, Rules: policy.DefaultRules(), Parallelism: 4}
	var held bool
	p.OnProbed = func() {
		runtime.GC()
		held = kept.Value() != nil
	}
	r := p.Probe(context.Background(), targets, now) // the caller's last use of the list
	if len(r.Endpoints) != 63 || len(r.Skipped) != 1 || r.Skipped[0].Name != "h3.example" {
		t.Fatalf("report has %d endpoints and skipped %v; want 63 and h3.example", len(r.Endpoints), r.Skipped)
	}
	if held {
		t.Error("the list of targets probed is still held when the report is built")
	}
}

// heldStream is a streaming source whose sequence holds an index of held
// bytes that Stream builds, as a zone's holds its index of names and
// addresses.
type heldStream struct {
	listSource
	held int
}

func (s heldStream) Stream(context.Context) (iter.Seq[discovery.Target], int, found.Inventory, error) {
	index := make([]byte, s.held)
	index[0] = 1
	return func(yield func(discovery.Target) bool) {
		for _, t := range s.targets {
			if index[0] != 1 || !yield(t) {
				return
			}
		}
	}, len(s.targets), found.Inventory{}, nil
}

// TestStreamReleasedBeforeReport: once a streamed source's sequence is
// done, what it holds (a zone's index) is not kept while the report is
// built.
func TestStreamReleasedBeforeReport(t *testing.T) {
	const held = 64 << 20
	src := heldStream{listSource: listSource{name: "dnszone:example", targets: []discovery.Target{{Name: "a.example", Port: 443, Sources: []string{"dnszone:example"}}}}, held: held}
	var live uint64
	p := &scan.Pass{Sources: []scan.Source{src}, Prober: refusingProber{}, Rules: policy.DefaultRules()}
	p.OnProbed = func() {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		live = m.HeapAlloc
	}
	r, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Endpoints) != 1 {
		t.Fatalf("report has %d endpoints, want 1", len(r.Endpoints))
	}
	if live >= held {
		t.Errorf("%d MB live when the report is built: the source's sequence, holding %d MB, is still held", live>>20, held>>20)
	}
}

package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// tarpitSource lists 40 names on 127.0.0.2, which accepts TCP and never
// speaks (a hung load balancer), and after them zz-expired.example on
// 127.0.0.1, serving an expired certificate. It is the source of a real
// scan.Pass, probing the real listeners.
type tarpitSource struct{ targets []discovery.Target }

func (s tarpitSource) Name() string { return "dnszone:example" }
func (s tarpitSource) Discover(context.Context) (found.Yield, error) {
	return found.Yield{Targets: s.targets}, nil
}

// tarpitPass returns a real pass over the tarpit zone, with a 500ms dial
// and handshake timeout and otherwise the default limits.
func tarpitPass(t *testing.T) *scan.Pass {
	t.Helper()
	now := time.Now()
	pit, err := certtest.ServeSilent("127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pit.Close() })
	ca := certtest.MustCA("Daemon Tarpit Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"zz-expired.example"}, NotBefore: now.Add(-90 * 24 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	srv, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var src tarpitSource
	for i := range 40 {
		src.targets = append(src.targets, discovery.Target{Name: fmt.Sprintf("hung%02d.example", i), Port: int(pit.Addr().Port()),
			Addresses: []netip.Addr{pit.Addr().Addr()}, Sources: []string{src.Name()}})
	}
	src.targets = append(src.targets, discovery.Target{Name: "zz-expired.example", Port: int(srv.Addr().Port()),
		Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{src.Name()}})
	const timeout = 500 * time.Millisecond
	return &scan.Pass{
		Sources: []scan.Source{src},
		Prober:  probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), DialTimeout: timeout, HandshakeTimeout: timeout}),
		Rules:   policy.DefaultRules(),
	}
}

// probeRecorder hands over the report and the error of the first probe
// run.
type probeRecorder struct {
	mu     sync.Mutex
	report *scan.Report
	done   chan error // the first probe run's error
	once   sync.Once
}

func (r *probeRecorder) RecordDiscovery([]scan.SourceResult, int) {}
func (r *probeRecorder) RecordLastSuccess(string, time.Time)      {}
func (r *probeRecorder) RecordReport(rep *scan.Report) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.report == nil {
		r.report = rep
	}
	return func() {}
}
func (r *probeRecorder) RecordRun(job string, _ time.Time, _ time.Duration, err error) {
	if job == daemon.JobProbe {
		r.once.Do(func() { r.done <- err })
	}
}

// firstProbeRun runs a daemon over pass with sweepTimeout and returns the
// report and the error of its first probe run.
func firstProbeRun(t *testing.T, pass *scan.Pass, sweepTimeout time.Duration) (*scan.Report, error) {
	t.Helper()
	c := config(0)
	c.SweepTimeout = sweepTimeout
	d, err := daemon.New(c, pass, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return runFirst(t, d)
}

// runFirst runs d until its first probe run is over and returns the
// report it published and the run's error.
func runFirst(t *testing.T, d *daemon.Daemon) (*scan.Report, error) {
	t.Helper()
	rec := &probeRecorder{done: make(chan error, 1)}
	d.Recorder = rec
	stop := start(t, d)
	defer stop()
	var err error
	select {
	case err = <-rec.done:
	case <-time.After(time.Minute):
		t.Fatal("no probe run within a minute")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.report, err
}

// TestTarpitProbeRunFinishes: 40 names on a hung address no longer make
// every probe run hit its sweep timeout (40 / 2 endpoints of 3 × 500ms
// took 30s, and the report was discarded): the run finishes well within
// 15s and publishes the expired certificate behind them.
func TestTarpitProbeRunFinishes(t *testing.T) {
	t.Parallel()
	r, err := firstProbeRun(t, tarpitPass(t), 15*time.Second)

	if errors.Is(err, daemon.ErrTimeout) {
		t.Fatalf("the probe run hit its sweep timeout: %v", err)
	}
	if r == nil || r.CutShort {
		t.Fatalf("report %+v; want a complete report published", r)
	}
	if !slices.ContainsFunc(r.Findings, func(f policy.Finding) bool {
		return f.Kind == policy.Expired && f.Endpoints[0].Name == "zz-expired.example"
	}) {
		t.Errorf("the expired certificate is not in the published findings: %+v", r.Findings)
	}
}

// TestTarpitProbeRunCutShort: a probe run cut short by its sweep timeout
// while the hung address hangs publishes the expired certificate it did
// reach, with not_probed endpoints and a probe_cut_short finding.
func TestTarpitProbeRunCutShort(t *testing.T) {
	t.Parallel()
	r, err := firstProbeRun(t, tarpitPass(t), 300*time.Millisecond)

	if !errors.Is(err, daemon.ErrTimeout) {
		t.Errorf("probe run error = %v, want a sweep timeout", err)
	}
	if r == nil || !r.CutShort || r.NotProbed == 0 || len(r.Endpoints) != 41 {
		t.Fatalf("report %+v; want one cut short, with all 41 endpoints, some not_probed", r)
	}
	for _, kind := range []policy.Kind{policy.Expired, policy.ProbeCutShort} {
		if !slices.ContainsFunc(r.Findings, func(f policy.Finding) bool { return f.Kind == kind }) {
			t.Errorf("no %s finding in the published report: %+v", kind, r.Findings)
		}
	}
}

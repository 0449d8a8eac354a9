package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// fakeScanner serves discovery results from a script and reports one
// endpoint per target. Probe runs take probeTime of (bubble) time.
type fakeScanner struct {
	mu sync.Mutex
	// sources: per source name, what the next Discover returns: a number
	// of targets, or -1 for a failure.
	sources   map[string]int
	probeTime time.Duration
	// certs: every endpoint serves its own expired certificate (one
	// finding each); down: every endpoint refuses the connection.
	certs, down bool

	discoveries []time.Time
	probes      []probeRun
	inFlight    int
	maxInFlight int
}

type probeRun struct {
	start, end time.Time
	targets    []string
	cancelled  bool
}

func (f *fakeScanner) set(source string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sources[source] = n
}

func (f *fakeScanner) Discover(ctx context.Context) ([]discovery.Target, []scan.SourceResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.discoveries = append(f.discoveries, time.Now())
	var lists [][]discovery.Target
	var results []scan.SourceResult
	failed := 0
	for _, name := range slices.Sorted(mapsKeys(f.sources)) {
		n := f.sources[name]
		if n < 0 {
			failed++
			results = append(results, scan.SourceResult{Name: name, Error: "axfr " + name + ": connection refused"})
			continue
		}
		var ts []discovery.Target
		for i := range n {
			ts = append(ts, discovery.Target{Name: fmt.Sprintf("h%d.%s.example", i, name), Port: 443, Sources: []string{name}})
		}
		lists = append(lists, ts)
		results = append(results, scan.SourceResult{Name: name, Targets: n, Found: ts})
	}
	var err error
	if failed == len(results) {
		err = scan.ErrNoSource
	}
	return discovery.Merge(lists...), results, err
}

func (f *fakeScanner) Probe(ctx context.Context, targets []discovery.Target, now time.Time) *scan.Report {
	f.mu.Lock()
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	run := probeRun{start: time.Now()}
	t := time.NewTimer(f.probeTime)
	select {
	case <-t.C:
	case <-ctx.Done():
		run.cancelled = true
	}
	t.Stop()
	r := &scan.Report{GeneratedAt: now, Targets: len(targets)}
	f.mu.Lock()
	certs, down := f.certs, f.down
	f.mu.Unlock()
	for _, tg := range targets {
		run.targets = append(run.targets, tg.Key())
		ep := scan.Endpoint{Name: tg.Name, Port: tg.Port, Address: "127.0.0.1"}
		switch {
		case run.cancelled: // as scan.Pass reports a sweep cut short
			ep.Failed = &policy.Failed{Error: "not probed: " + context.Cause(ctx).Error(), Failure: "not_probed"}
			r.CutShort, r.NotProbed = true, r.NotProbed+1
		case down:
			ep.Failed = &policy.Failed{Error: "dial: connection refused", Failure: "refused"}
		case certs:
			ep.Certificate = "c-" + tg.Name
			r.Certificates = append(r.Certificates, policy.Certificate{SHA256: ep.Certificate, Subject: tg.Name, NotAfter: policy.At(now.Add(-time.Hour))})
			r.Findings = append(r.Findings, policy.Finding{Kind: policy.Expired, Tier: policy.Critical, Certificate: ep.Certificate, Subject: tg.Name,
				Deadline: policy.At(now.Add(-time.Hour)), Endpoints: []policy.Endpoint{{Name: ep.Name, Port: ep.Port, Address: ep.Address}}})
		}
		r.Endpoints = append(r.Endpoints, ep)
	}
	run.end = time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	f.probes = append(f.probes, run)
	return r
}

// The rest of the daemon.Scanner contract, which these tests do not
// exercise: no inventory besides targets, no history kept, no progress
// counted. A shared run (Daemon.Sharing) needs a real scan.Pass.
func (f *fakeScanner) Inventory() scan.Inventory       { return scan.Inventory{} }
func (f *fakeScanner) SetHistory([]policy.NameHistory) {}
func (f *fakeScanner) Progress() scan.Progress         { return scan.Progress{} }
func (f *fakeScanner) Evaluate(time.Time, int, []discovery.Target, iter.Seq[*scan.Part]) *scan.Report {
	panic("fakeScanner evaluates no shared run: give the daemon a scan.Pass")
}

func (f *fakeScanner) probeRuns() []probeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.probes)
}

func mapsKeys(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// fakeNotifier records the reports it is handed, and the dispatcher
// calls. Dispatchers of every fakeNotifier sharing a *dispatchLog log there.
type fakeNotifier struct {
	mu      sync.Mutex
	reports []*scan.Report
	flushed int
	fail    error
	log     *dispatchLog
}

// dispatchLog checks that at most one dispatcher (Run or Flush) works on
// the outbox at a time.
type dispatchLog struct {
	mu      sync.Mutex
	active  int
	overlap bool
	events  []string
}

func (l *dispatchLog) enter(ev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active++
	l.overlap = l.overlap || l.active > 1
	l.events = append(l.events, ev)
}

func (l *dispatchLog) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active--
}

func (n *fakeNotifier) Run(ctx context.Context) error {
	if n.log != nil {
		n.log.enter(fmt.Sprintf("run %p", n))
		defer n.log.leave()
	}
	<-ctx.Done()
	return nil
}

func (n *fakeNotifier) Notify(_ context.Context, r *scan.Report) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reports = append(n.reports, r)
	return n.fail
}

func (n *fakeNotifier) Flush(context.Context) error {
	if n.log != nil {
		n.log.enter(fmt.Sprintf("flush %p", n))
		defer n.log.leave()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.flushed++
	return nil
}

// MarkSilenced marks nothing: no silence is kept.
func (n *fakeNotifier) MarkSilenced(context.Context, *scan.Report) error { return nil }

func (n *fakeNotifier) last() *scan.Report {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.reports) == 0 {
		return nil
	}
	return n.reports[len(n.reports)-1]
}

// fakeRecorder records runs.
type fakeRecorder struct {
	mu   sync.Mutex
	runs []string
}

func (r *fakeRecorder) RecordDiscovery([]scan.SourceResult, int) {}
func (r *fakeRecorder) RecordReport(*scan.Report) func()         { return func() {} }
func (r *fakeRecorder) RecordLastSuccess(string, time.Time)      {}
func (r *fakeRecorder) RecordRun(job string, _ time.Time, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := "ok"
	switch {
	case errors.Is(err, daemon.ErrSkipped):
		res = "skipped"
	case errors.Is(err, daemon.ErrTimeout):
		res = "timeout"
	case err != nil:
		res = "error"
	}
	r.runs = append(r.runs, job+":"+res)
}

func (r *fakeRecorder) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.runs {
		if x == s {
			n++
		}
	}
	return n
}

func config(jitter time.Duration) daemon.Config {
	return daemon.Config{
		Discovery:     "@every 1h",
		Probe:         "@every 10m",
		Jitter:        jitter,
		GracePeriod:   30 * time.Second,
		DropThreshold: 0.5,
	}
}

// start runs d in the bubble and returns a stop function that cancels it
// and waits for Run to return.
func start(t *testing.T, d *daemon.Daemon) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	}
}

func TestJitteredScheduleWithinBounds(t *testing.T) {
	const jitter = 2 * time.Minute
	offsets := map[time.Duration]bool{}
	for instance := range 4 {
		synctest.Test(t, func(t *testing.T) {
			s := &fakeScanner{sources: map[string]int{"dnszone:a.example": 3}}
			d, err := daemon.New(config(jitter), s, &fakeNotifier{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			stop := start(t, d)
			time.Sleep(65 * time.Minute) // the bubble's clock: six scheduled probe runs
			synctest.Wait()
			stop()

			runs := s.probeRuns()
			if len(runs) != 7 { // the first run at start, then one per 10 minutes
				t.Fatalf("instance %d: %d probe runs in 65m, want 7 (first + 6 scheduled)", instance, len(runs))
			}
			if first := runs[0].start.Sub(t0); first >= 2*jitter {
				t.Errorf("first probe run %v after start, want below discovery + probe jitter %v", first, 2*jitter)
			}
			var offset time.Duration
			for k, r := range runs[1:] {
				due := t0.Add(time.Duration(k+1) * 10 * time.Minute)
				o := r.start.Sub(due)
				if o < 0 || o >= jitter {
					t.Errorf("scheduled run %d started %v after it was due, want within [0, %v)", k+1, o, jitter)
				}
				if k > 0 && o != offset {
					t.Errorf("scheduled run %d offset %v, want the instance's fixed offset %v", k+1, o, offset)
				}
				offset = o
			}
			offsets[offset] = true
		})
	}
	if len(offsets) < 2 {
		t.Errorf("4 instances all used offset %v: jitter does not spread instances", offsets)
	}
}

func TestSlowProbeNeverOverlaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeScanner{sources: map[string]int{"static": 2}, probeTime: 25 * time.Minute}
		c := config(0)
		c.SweepTimeout = time.Hour
		rec := &fakeRecorder{}
		d, err := daemon.New(c, s, &fakeNotifier{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Recorder = rec
		stop := start(t, d)
		time.Sleep(59 * time.Minute)
		synctest.Wait()
		stop()

		if s.maxInFlight != 1 {
			t.Errorf("at most %d probe runs in flight at once, want 1", s.maxInFlight)
		}
		if got := rec.count("probe:skipped"); got < 3 {
			t.Errorf("%d skipped probe runs recorded, want at least 3 (every 10m, each run takes 25m)", got)
		}
		if got := len(s.probeRuns()); got < 2 || got > 3 {
			t.Errorf("%d probe runs in 59m at 25m each, want 2 or 3", got)
		}
	})
}

// TestTimedOutRunPublishesWhatItProbed: a probe run cut short by its
// sweep timeout publishes and notifies its partial report with a
// probe_cut_short finding, and is recorded as a timeout, not as any error,
// with what to change.
func TestTimedOutRunPublishesWhatItProbed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeScanner{sources: map[string]int{"static": 2}, probeTime: 5 * time.Minute}
		c := config(0)
		c.SweepTimeout = time.Minute
		rec := &errRecorder{}
		n := &fakeNotifier{}
		d, err := daemon.New(c, s, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Recorder = rec
		stop := start(t, d)
		time.Sleep(25 * time.Minute)
		synctest.Wait()
		stop()

		for what, r := range map[string]*scan.Report{"notified": n.last(), "recorded": rec.lastReport()} {
			if r == nil {
				t.Errorf("no report of a run cut short was %s", what)
				continue
			}
			i := slices.IndexFunc(r.Findings, func(f policy.Finding) bool { return f.Kind == policy.ProbeCutShort })
			if i < 0 || len(r.Endpoints) != 2 {
				t.Errorf("%s report: findings %+v, %d endpoints; want a probe_cut_short finding and what was probed", what, r.Findings, len(r.Endpoints))
				continue
			}
			if f := r.Findings[i]; f.Tier != policy.Warning || !strings.Contains(f.Message, "sweep_timeout") || !strings.Contains(f.Message, "1m0s") ||
				!strings.Contains(f.Message, "2 of 2 endpoints not probed") {
				t.Errorf("%s probe_cut_short finding = %+v, want a warning naming the timeout and what to change", what, f)
			}
		}
		runs := rec.runs(daemon.JobProbe)
		if len(runs) < 2 {
			t.Fatalf("%d probe runs recorded in 25m, want one every 10m", len(runs))
		}
		for _, err := range runs {
			if !errors.Is(err, daemon.ErrTimeout) || !strings.Contains(err.Error(), "sweep_timeout") || strings.Contains(err.Error(), "discarded") {
				t.Errorf("probe run recorded with %v, want a timeout that says what to change", err)
			}
		}
	})
}

// errRecorder keeps the error of every run, by job.
type errRecorder struct {
	mu     sync.Mutex
	errs   map[string][]error
	report *scan.Report
}

func (r *errRecorder) RecordDiscovery([]scan.SourceResult, int) {}
func (r *errRecorder) RecordReport(rep *scan.Report) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report = rep
	return func() {}
}

func (r *errRecorder) lastReport() *scan.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.report
}
func (r *errRecorder) RecordLastSuccess(string, time.Time) {}
func (r *errRecorder) RecordRun(job string, _ time.Time, _ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errs == nil {
		r.errs = map[string][]error{}
	}
	r.errs[job] = append(r.errs[job], err)
}

func (r *errRecorder) runs(job string) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs[job])
}

func findingsOf(r *scan.Report, kind policy.Kind) []policy.Finding {
	var out []policy.Finding
	for _, f := range r.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

func TestFailingDiscoveryKeepsInventoryAndRaisesDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeScanner{sources: map[string]int{"dnszone:a.example": 3, "static": 1}}
		n := &fakeNotifier{}
		d, err := daemon.New(config(0), s, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		defer stop()
		synctest.Wait()
		if err := d.Ready(); err != nil {
			t.Fatalf("Ready after first discovery = %v, want nil", err)
		}
		if r := n.last(); r == nil || r.Targets != 4 || len(findingsOf(r, policy.DiscoveryDegraded)) != 0 {
			t.Fatalf("first report = %+v, want 4 targets and no discovery_degraded", r)
		}

		s.set("dnszone:a.example", -1)
		// Past the next discovery (1h) and the probe run after it (the one
		// due at the same time may start first).
		time.Sleep(71 * time.Minute)
		synctest.Wait()
		r := n.last()
		if r.Targets != 4 {
			t.Errorf("report after the zone failed probed %d targets, want the last good 4", r.Targets)
		}
		deg := findingsOf(r, policy.DiscoveryDegraded)
		if len(deg) != 1 || deg[0].Name != "dnszone:a.example" || deg[0].Tier != policy.Warning {
			t.Fatalf("discovery_degraded findings = %+v, want one warning for dnszone:a.example", deg)
		}
		if !strings.Contains(deg[0].Message, "connection refused") || !strings.Contains(deg[0].Message, "last good inventory (3 targets") {
			t.Errorf("message = %q, want the source's error and the kept inventory", deg[0].Message)
		}
		raised := deg[0].Deadline

		s.set("static", -1)
		time.Sleep(time.Hour)
		synctest.Wait()
		r = n.last()
		deg = findingsOf(r, policy.DiscoveryDegraded)
		if len(deg) != 2 || deg[0].Tier != policy.Page {
			t.Errorf("with every source failing: %+v, want two discovery_degraded findings at page", deg)
		}
		if r.Targets != 4 {
			t.Errorf("with every source failing, %d targets probed, want the last good 4", r.Targets)
		}
		for _, f := range deg {
			if f.Name == "dnszone:a.example" && !f.Deadline.Equal(raised.Time()) {
				t.Errorf("finding's deadline moved from %v to %v; want it kept from first raise", raised, f.Deadline)
			}
		}

		s.set("dnszone:a.example", 3)
		s.set("static", 1)
		time.Sleep(time.Hour)
		synctest.Wait()
		if deg := findingsOf(n.last(), policy.DiscoveryDegraded); len(deg) != 0 {
			t.Errorf("after recovery: %+v, want no discovery_degraded finding", deg)
		}
	})
}

func TestDropBelowThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeScanner{sources: map[string]int{"route53": 10}}
		n := &fakeNotifier{}
		c := config(0)
		d, err := daemon.New(c, s, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		defer stop()
		synctest.Wait()

		s.set("route53", 6) // 60%: above the 50% threshold
		time.Sleep(71 * time.Minute)
		synctest.Wait()
		if r := n.last(); r.Targets != 6 || len(findingsOf(r, policy.DiscoveryDegraded)) != 0 {
			t.Fatalf("drop to 60%%: %d targets, findings %+v; want 6 targets and no finding", r.Targets, r.Findings)
		}

		s.set("route53", 2) // a third of the last good 6
		time.Sleep(time.Hour)
		synctest.Wait()
		r := n.last()
		deg := findingsOf(r, policy.DiscoveryDegraded)
		if len(deg) != 1 || !strings.Contains(deg[0].Message, "returned 2 targets, fewer than 50% of the 6") {
			t.Fatalf("drop to a third: %+v, want a discovery_degraded finding naming 2 of 6", deg)
		}
		if r.Targets != 6 {
			t.Errorf("after the drop %d targets probed, want the last good 6", r.Targets)
		}

		// Reloading accepts the drop: the next discovery is the new baseline.
		if err := d.Reload(c, s, n); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		r = n.last()
		if r.Targets != 2 || len(findingsOf(r, policy.DiscoveryDegraded)) != 0 {
			t.Errorf("after reload: %d targets, findings %+v; want 2 targets and no finding", r.Targets, r.Findings)
		}
	})
}

func TestNoInventoryYetIsNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeScanner{sources: map[string]int{"static": 1}}
		c := config(10 * time.Minute)
		c.Discovery, c.Probe = "@every 1h", "@every 30m"
		d, err := daemon.New(c, s, &fakeNotifier{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Ready(); err == nil {
			t.Fatal("Ready before Run = nil, want an error")
		}
		stop := start(t, d)
		defer stop()
		time.Sleep(20 * time.Minute) // past both jitter offsets
		synctest.Wait()
		if err := d.Ready(); err != nil {
			t.Errorf("Ready after discovery = %v, want nil", err)
		}
	})
}

func TestShutdownGivesRunningProbeAGracePeriod(t *testing.T) {
	tests := []struct {
		name          string
		probeTime     time.Duration
		wantCancelled bool
	}{
		{"finishes within grace", 20 * time.Second, false},
		{"cancelled after grace", 5 * time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &fakeScanner{sources: map[string]int{"static": 1}}
				n := &fakeNotifier{}
				d, err := daemon.New(config(0), s, n, nil)
				if err != nil {
					t.Fatal(err)
				}
				stop := start(t, d)
				synctest.Wait() // first discovery and probe done
				s.mu.Lock()
				s.probeTime = tt.probeTime
				s.mu.Unlock()
				time.Sleep(10*time.Minute + time.Second) // a scheduled probe is running
				t0 := time.Now()
				stop()
				if took := time.Since(t0); took > 30*time.Second+time.Second {
					t.Errorf("shutdown took %v, want at most the 30s grace period", took)
				}
				runs := s.probeRuns()
				if len(runs) != 2 {
					t.Fatalf("%d probe runs, want 2", len(runs))
				}
				if runs[1].cancelled != tt.wantCancelled {
					t.Errorf("running probe cancelled = %v, want %v", runs[1].cancelled, tt.wantCancelled)
				}
				wantReports := 2
				if tt.wantCancelled {
					wantReports = 1 // a cut-short run is not notified
				}
				if len(n.reports) != wantReports {
					t.Errorf("%d reports notified, want %d", len(n.reports), wantReports)
				}
				if n.flushed != 1 {
					t.Errorf("notifier flushed %d times at shutdown, want 1", n.flushed)
				}
				time.Sleep(time.Hour)
				if got := len(s.probeRuns()); got != 2 {
					t.Errorf("%d probe runs after stop, want none started", got-2)
				}
			})
		})
	}
}

func TestReloadChangesSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeScanner{sources: map[string]int{"static": 1}}
		d, err := daemon.New(config(0), s, &fakeNotifier{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		defer stop()
		synctest.Wait()
		bad := config(0)
		bad.Probe = "every so often"
		if err := d.Reload(bad, s, &fakeNotifier{}); err == nil {
			t.Fatal("Reload with a bad schedule = nil, want an error")
		}
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
		if got := len(s.probeRuns()); got != 2 {
			t.Fatalf("%d probe runs after 10m with the old schedule kept, want 2", got)
		}
		fast := config(0)
		fast.Probe = "@every 1m"
		if err := d.Reload(fast, s, &fakeNotifier{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := len(s.probeRuns()); got != 7 {
			t.Errorf("%d probe runs 5m after reloading to every 1m, want 7", got)
		}
	})
}

// pipeListener is an in-memory net.Listener, so a real HTTP server and
// client can talk inside a synctest bubble.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// heartbeatCounter counts the heartbeats its client delivers, over an
// in-memory listener (so it works inside a synctest bubble).
type heartbeatCounter struct {
	client *http.Client
	mu     sync.Mutex
	n      int
}

func (h *heartbeatCounter) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// countHeartbeats serves heartbeats to count; call closeHB before the
// test (or its bubble) ends.
func countHeartbeats() (h *heartbeatCounter, closeHB func()) {
	h = &heartbeatCounter{}
	ln := newPipeListener()
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
	})}
	go srv.Serve(ln)
	h.client = &http.Client{Transport: &http.Transport{DialContext: ln.DialContext}}
	return h, func() { srv.Close() }
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:80"))
}

func (l *pipeListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func TestHeartbeatAfterSuccessfulRunsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var pings []string
		ln := newPipeListener()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			pings = append(pings, r.Method+" "+r.URL.Path)
			mu.Unlock()
		})}
		go srv.Serve(ln)
		defer srv.Close()

		s := &fakeScanner{sources: map[string]int{"static": 1}}
		n := &fakeNotifier{}
		c := config(0)
		c.HeartbeatURL = "http://hc.example/ping/0123-token"
		d, err := daemon.New(c, s, n, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		d.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: ln.DialContext}}
		stop := start(t, d)
		synctest.Wait()
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
		n.mu.Lock()
		n.fail = errors.New("state is locked by another process")
		n.mu.Unlock()
		time.Sleep(20 * time.Minute)
		synctest.Wait()
		stop()

		mu.Lock()
		defer mu.Unlock()
		want := []string{"GET /ping/0123-token", "GET /ping/0123-token"}
		if !slices.Equal(pings, want) {
			t.Errorf("heartbeat requests = %q, want %q (two good runs, then two failing notifications)", pings, want)
		}
	})
}

// TestAfterProbeOnceARun: AfterProbe is called once a probe run is over,
// after its report was notified, for a run whose notification fails too;
// Judging once a run too, before its notification.
func TestAfterProbeOnceARun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeScanner{sources: map[string]int{"static": 1}}
		n := &fakeNotifier{}
		d, err := daemon.New(config(0), s, n, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var after, judging []int // the reports notified when AfterProbe, Judging were called
		at := func(calls *[]int) func() {
			return func() {
				n.mu.Lock()
				notified := len(n.reports)
				n.mu.Unlock()
				mu.Lock()
				*calls = append(*calls, notified)
				mu.Unlock()
			}
		}
		d.AfterProbe, d.Judging = at(&after), at(&judging)
		stop := start(t, d)
		synctest.Wait()
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
		n.mu.Lock()
		n.fail = errors.New("state is locked by another process")
		n.mu.Unlock()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		stop()

		n.mu.Lock()
		notified := len(n.reports)
		n.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		if len(after) < 3 || len(after) != notified || after[0] != 1 {
			t.Errorf("AfterProbe called %d times, after %v reports notified, for %d runs notified; want once a run, after its notification", len(after), after, notified)
		}
		for i, j := range judging {
			if j != i {
				t.Errorf("Judging called after %v reports notified; want once a run, before its notification", judging)
				break
			}
		}
		if len(judging) != notified {
			t.Errorf("Judging called %d times for %d runs notified", len(judging), notified)
		}
	})
}

func TestHeartbeatErrorHidesURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs strings.Builder
		var logMu sync.Mutex
		logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
		ln := newPipeListener()
		ln.Close() // every dial fails

		s := &fakeScanner{sources: map[string]int{"static": 1}}
		c := config(0)
		c.HeartbeatURL = "http://hc.example/ping/s3cr3t-token"
		d, err := daemon.New(c, s, &fakeNotifier{}, logger)
		if err != nil {
			t.Fatal(err)
		}
		d.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: ln.DialContext}}
		stop := start(t, d)
		synctest.Wait()
		stop()
		logMu.Lock()
		defer logMu.Unlock()
		if !strings.Contains(logs.String(), "heartbeat failed") {
			t.Errorf("logs = %s, want a heartbeat failure", logs.String())
		}
		if strings.Contains(logs.String(), "s3cr3t") {
			t.Errorf("logs contain the heartbeat URL's token: %s", logs.String())
		}
	})
}

type lockedWriter struct {
	w  *strings.Builder
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestReloadReplacesDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &dispatchLog{}
		first, second := &fakeNotifier{log: log}, &fakeNotifier{log: log}
		s := &fakeScanner{sources: map[string]int{"static": 1}}
		d, err := daemon.New(config(0), s, first, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		synctest.Wait()
		if err := d.Reload(config(0), s, second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
		stop()

		want := []string{fmt.Sprintf("run %p", first), fmt.Sprintf("run %p", second), fmt.Sprintf("flush %p", second)}
		if !slices.Equal(log.events, want) {
			t.Errorf("dispatcher calls = %q, want %q", log.events, want)
		}
		if log.overlap {
			t.Error("two dispatchers worked on the outbox at once")
		}
		if len(first.reports) != 1 || len(second.reports) != 1 {
			t.Errorf("reports: %d to the first notifier, %d to the reloaded one; want 1 and 1", len(first.reports), len(second.reports))
		}
	})
}

// reportRecorder keeps the reports and runs it is given.
type reportRecorder struct {
	fakeRecorder
	mu      sync.Mutex
	reports []*scan.Report
}

func (r *reportRecorder) RecordReport(rep *scan.Report) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, rep)
	return func() {}
}

func TestNothingDiscoveredSinceStartIsShownNotNotified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hb, closeHB := countHeartbeats()
		defer closeHB()

		s := &fakeScanner{sources: map[string]int{"dnszone:a.example": -1, "route53": -1}}
		n := &fakeNotifier{}
		rec := &reportRecorder{}
		c := config(0)
		c.HeartbeatURL = "http://hc.example/ping/x"
		d, err := daemon.New(c, s, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Recorder = rec
		d.HTTPClient = hb.client
		stop := start(t, d)
		time.Sleep(25 * time.Minute)
		synctest.Wait()
		stop()

		if err := d.Ready(); err == nil {
			t.Error("Ready = nil with every source failing since start, want an error")
		}
		if len(n.reports) != 0 {
			t.Errorf("%d reports notified without any inventory, want none (open alerts would resolve)", len(n.reports))
		}
		if hb.count() != 0 {
			t.Errorf("%d heartbeats without any inventory, want none", hb.count())
		}
		if len(rec.reports) == 0 {
			t.Fatal("no report recorded for the status page")
		}
		deg := findingsOf(rec.reports[len(rec.reports)-1], policy.DiscoveryDegraded)
		if len(deg) != 2 || deg[0].Tier != policy.Page || !strings.Contains(deg[0].Message, "has not produced an inventory since certwatch started") {
			t.Errorf("recorded findings = %+v, want both sources degraded at page", deg)
		}
		if got := rec.count("probe:error"); got < 3 {
			t.Errorf("%d failed probe runs recorded, want one per run (at least 3)", got)
		}
	})
}

func TestReloadedScannerDiscoversBeforeItProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s1 := &fakeScanner{sources: map[string]int{"static": 1}}
		s2 := &fakeScanner{sources: map[string]int{"static": 1, "acm:eu-west-1": 2}}
		n := &fakeNotifier{}
		d, err := daemon.New(config(0), s1, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		defer stop()
		synctest.Wait()
		time.Sleep(5 * time.Minute)
		reloaded := time.Now()
		if err := d.Reload(config(0), s2, n); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		s2.mu.Lock()
		discovered := slices.Clone(s2.discoveries)
		s2.mu.Unlock()
		if len(discovered) != 1 || !discovered[0].Equal(reloaded) {
			t.Fatalf("new scanner's discoveries at %v, want one at the reload (%v), not at the next scheduled hour", discovered, reloaded)
		}
		time.Sleep(5*time.Minute + time.Second) // the next probe run
		synctest.Wait()
		runs := s2.probeRuns()
		if len(runs) != 1 || runs[0].start.Before(discovered[0]) {
			t.Errorf("new scanner's probe runs %+v, want one, after its discovery", runs)
		}
		if got := n.last().Targets; got != 3 {
			t.Errorf("report after reload has %d targets, want the new scanner's 3", got)
		}
	})
}

func TestShutdownCancelsFirstRunAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first probe run starts outside the scheduler; it gets the
		// same grace period as a scheduled one.
		s := &fakeScanner{sources: map[string]int{"static": 1}, probeTime: time.Hour}
		d, err := daemon.New(config(0), s, &fakeNotifier{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		time.Sleep(time.Second)
		t0 := time.Now()
		stop()
		if took := time.Since(t0); took != 30*time.Second {
			t.Errorf("shutdown took %v, want the 30s grace period", took)
		}
		if runs := s.probeRuns(); len(runs) != 1 || !runs[0].cancelled {
			t.Errorf("probe runs %+v, want the first one cancelled", runs)
		}
	})
}

func TestPartlyFailedSourceKeepsWhatItFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &partialScanner{}
		n := &fakeNotifier{}
		d, err := daemon.New(config(0), s, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		defer stop()
		synctest.Wait()
		r := n.last()
		if r == nil || r.Targets != 2 {
			t.Fatalf("report = %+v, want the 2 targets the partly failed source found", r)
		}
		deg := findingsOf(r, policy.DiscoveryDegraded)
		if len(deg) != 1 || !strings.Contains(deg[0].Message, "partly failed (2 targets and 5 certificates found)") {
			t.Errorf("discovery_degraded = %+v, want one saying what the source found", deg)
		}
	})
}

// partialScanner's one source returns some targets and an error.
type partialScanner struct{ fakeScanner }

func (p *partialScanner) Discover(context.Context) ([]discovery.Target, []scan.SourceResult, error) {
	ts := []discovery.Target{
		{Name: "a.example", Port: 443, Sources: []string{"route53"}},
		{Name: "b.example", Port: 443, Sources: []string{"route53"}},
	}
	return ts, []scan.SourceResult{{Name: "route53", Targets: 2, Certificates: 5, Error: "zone Z2: throttled", Found: ts}}, nil
}

// releaseRecorder notes, for every report recorded, how many reports the
// notifier had been given when the daemon released it (-1: not released).
type releaseRecorder struct {
	fakeRecorder
	n        *fakeNotifier
	s        *fakeScanner
	mu       sync.Mutex
	released []int
	twice    bool
}

func (r *releaseRecorder) RecordReport(*scan.Report) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.released)
	r.released = append(r.released, -1)
	return func() {
		r.n.mu.Lock()
		notified := len(r.n.reports)
		r.n.mu.Unlock()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.twice = r.twice || r.released[i] != -1
		r.released[i] = notified
	}
}

// recordedRuns runs a daemon of a fake scanner and notifier (failing
// with fail) for 25 minutes, recording to a releaseRecorder, after setup
// has set its hooks; inside synctest.Test.
func recordedRuns(t *testing.T, fail error, setup func(*daemon.Daemon, *fakeNotifier, *releaseRecorder)) *releaseRecorder {
	t.Helper()
	s := &fakeScanner{sources: map[string]int{"static": 2}}
	n := &fakeNotifier{fail: fail}
	rec := &releaseRecorder{n: n, s: s}
	d, err := daemon.New(config(0), s, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Recorder = rec
	if setup != nil {
		setup(d, n, rec)
	}
	stop := start(t, d)
	time.Sleep(25 * time.Minute)
	synctest.Wait()
	stop()
	return rec
}

// TestRecordedReportReleasedOnceNotified: the daemon releases each report
// it recorded (the status server then compresses it) once its run has
// notified it, never before, and also when notifying failed: the recorder
// never holds a report its own way beside the notifier's work.
func TestRecordedReportReleasedOnceNotified(t *testing.T) {
	for _, fail := range []error{nil, errors.New("state store down")} {
		synctest.Test(t, func(t *testing.T) {
			rec := recordedRuns(t, fail, nil)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.released) < 2 || rec.twice {
				t.Fatalf("notify error %v: released %v (twice: %v), want at least two reports, each released once", fail, rec.released, rec.twice)
			}
			for i, notified := range rec.released {
				if notified != i+1 {
					t.Errorf("notify error %v: report %d released with %d reports notified, want it released once notified (%d)", fail, i, notified, i+1)
				}
			}
		})
	}
}

// TestNotifiedOnceNotifiedBeforeReleased: a probe run calls Notified once
// its report was notified and before the recorder keeps it its own way
// (where `certwatch run` gives back what the notifier freed, before the
// status server compresses the report), once a run, also when notifying
// fails.
func TestNotifiedOnceNotifiedBeforeReleased(t *testing.T) {
	for _, fail := range []error{nil, errors.New("state store down")} {
		synctest.Test(t, func(t *testing.T) {
			type seen struct{ recorded, released, notified int }
			var calls []seen
			recordedRuns(t, fail, func(d *daemon.Daemon, n *fakeNotifier, rec *releaseRecorder) {
				d.Notified = func() {
					rec.mu.Lock()
					c := seen{recorded: len(rec.released)}
					for _, r := range rec.released {
						if r != -1 {
							c.released++
						}
					}
					rec.mu.Unlock()
					n.mu.Lock()
					c.notified = len(n.reports)
					calls = append(calls, c)
					n.mu.Unlock()
				}
			})
			if len(calls) < 2 {
				t.Fatalf("notify error %v: Notified called %d times, want once each of at least two runs", fail, len(calls))
			}
			for i, c := range calls {
				if c != (seen{recorded: i + 1, released: i, notified: i + 1}) {
					t.Errorf("notify error %v: run %d called Notified with %d reports recorded, %d released and %d notified, want %d, %d and %d",
						fail, i, c.recorded, c.released, c.notified, i+1, i, i+1)
				}
			}
		})
	}
}

// TestProbingOnceARunBeforeItProbes: a probe run calls Probing as it
// starts, before it probes and records anything (where `certwatch run`
// gives back what the work between runs left mapped), once a run.
func TestProbingOnceARunBeforeItProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seen struct{ probed, recorded, notified int }
		var calls []seen
		rec := recordedRuns(t, nil, func(d *daemon.Daemon, n *fakeNotifier, rec *releaseRecorder) {
			d.Probing = func() {
				rec.s.mu.Lock()
				c := seen{probed: len(rec.s.probes)}
				rec.s.mu.Unlock()
				rec.mu.Lock()
				c.recorded = len(rec.released)
				rec.mu.Unlock()
				n.mu.Lock()
				c.notified = len(n.reports)
				calls = append(calls, c)
				n.mu.Unlock()
			}
		})
		rec.mu.Lock()
		runs := len(rec.released)
		rec.mu.Unlock()
		if len(calls) < 2 || len(calls) != runs {
			t.Fatalf("Probing called %d times for %d runs recorded, want once a run, at least two", len(calls), runs)
		}
		for i, c := range calls {
			if c != (seen{probed: i, recorded: i, notified: i}) {
				t.Errorf("run %d called Probing with %d runs probed, %d reports recorded and %d notified, want %d of each", i, c.probed, c.recorded, c.notified, i)
			}
		}
	})
}

// TestNotifyingOnceRecordedBeforeNotified: a probe run calls Notifying
// after it recorded its report and before the notifier weighs it (where
// `certwatch run` gives back what the judging freed, before the run's
// peak), once a run, also when notifying fails.
func TestNotifyingOnceRecordedBeforeNotified(t *testing.T) {
	for _, fail := range []error{nil, errors.New("state store down")} {
		synctest.Test(t, func(t *testing.T) {
			type seen struct{ recorded, notified int }
			var calls []seen
			recordedRuns(t, fail, func(d *daemon.Daemon, n *fakeNotifier, rec *releaseRecorder) {
				d.Notifying = func() {
					rec.mu.Lock()
					recorded := len(rec.released)
					rec.mu.Unlock()
					n.mu.Lock()
					calls = append(calls, seen{recorded, len(n.reports)})
					n.mu.Unlock()
				}
			})
			if len(calls) < 2 {
				t.Fatalf("notify error %v: Notifying called %d times, want once each of at least two runs", fail, len(calls))
			}
			for i, c := range calls {
				if c.recorded != i+1 || c.notified != i {
					t.Errorf("notify error %v: run %d called Notifying with %d reports recorded and %d notified, want %d and %d",
						fail, i, c.recorded, c.notified, i+1, i)
				}
			}
		})
	}
}

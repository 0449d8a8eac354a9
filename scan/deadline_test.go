package scan_test

import (
	"context"
	"errors"
	"iter"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// hungSource is a source stuck in a call no context reaches (as opening a
// FIFO with no writer is): its Discover, Stream or Follow blocks on a
// channel nobody closes, whatever ctx does.
type hungSource struct {
	name    string
	calls   *atomic.Int32
	entered chan struct{} // gets a value when a call starts
}

func newHungSource(name string) hungSource {
	return hungSource{name: name, calls: new(atomic.Int32), entered: make(chan struct{}, 10)}
}

func (s hungSource) Name() string { return s.name }
func (s hungSource) hang() {
	s.calls.Add(1)
	s.entered <- struct{}{}
	select {} // ignores ctx: never returns
}
func (s hungSource) Discover(context.Context) (found.Yield, error) {
	s.hang()
	return found.Yield{}, nil
}

// hungStream is a StreamingSource whose Stream hangs.
type hungStream struct{ hungSource }

func (s hungStream) Stream(context.Context) (iter.Seq[discovery.Target], int, found.Inventory, error) {
	s.hang()
	return nil, 0, found.Inventory{}, nil
}

// hungFollower's Discover yields its targets and a zone to follow, and
// its Follow hangs.
type hungFollower struct {
	hungSource
	targets []discovery.Target
}

func (s hungFollower) Discover(context.Context) (found.Yield, error) {
	return found.Yield{Targets: s.targets, Delegating: []found.Delegating{{Zone: "child.example", Source: s.name}}}, nil
}
func (s hungFollower) Follow(context.Context, []found.Delegating, found.Read) found.Yield {
	s.hang()
	return found.Yield{}
}

// expiringTarget serves a certificate for soon.example expiring in 3 days
// on loopback and returns the static target for it, with its roots.
func expiringTarget(t *testing.T, now time.Time) (discovery.Target, *certtest.CA) {
	t.Helper()
	ca := certtest.MustCA("Deadline Test Root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"soon.example"}, NotBefore: now.Add(-30 * 24 * time.Hour), NotAfter: now.Add(3 * 24 * time.Hour)})
	srv, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return discovery.Target{Name: "soon.example", Port: int(srv.Addr().Port()), Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{"static"}}, ca
}

// runWithin runs p and fails the test when it has not returned within
// limit: a pass stalled by a source never returns at all.
func runWithin(t *testing.T, ctx context.Context, p *scan.Pass, limit time.Duration) (r *scan.Report, took time.Duration, err error) {
	t.Helper()
	type out struct {
		r   *scan.Report
		err error
	}
	done := make(chan out, 1)
	start := time.Now()
	go func() {
		r, err := p.Run(ctx)
		done <- out{r, err}
	}()
	select {
	case o := <-done:
		return o.r, time.Since(start), o.err
	case <-time.After(limit):
		t.Fatalf("Run has not returned after %v: a hung source stalls the pass", limit)
		return nil, 0, nil
	}
}

// TestHungSourceFailsAlone: a files source that never returns, beside a
// static target whose certificate expires in 3 days. Once the source's
// deadline passes, the static target is probed and its expiry found, and
// the hung source is a discovery_failed finding saying it did not finish
// in time. The next pass does not call it again while it is still stuck:
// it fails at once, saying so.
func TestHungSourceFailsAlone(t *testing.T) {
	t.Parallel()
	now := time.Now()
	target, ca := expiringTarget(t, now)
	hung := newHungSource("files")
	p := &scan.Pass{
		Sources:       []scan.Source{hung, listSource{name: "static", targets: []discovery.Target{target}}},
		Prober:        probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool()}),
		Rules:         policy.DefaultRules(),
		SourceTimeout: 300 * time.Millisecond,
	}

	r, took, err := runWithin(t, t.Context(), p, 30*time.Second)

	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took < 300*time.Millisecond {
		t.Errorf("Run took %v, less than the source's deadline", took)
	}
	checkHungReport(t, r, "did not finish within its deadline of 300ms (discovery_timeout) and was abandoned")

	r, took, err = runWithin(t, t.Context(), p, 30*time.Second)

	if err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if took >= 300*time.Millisecond {
		t.Errorf("second Run took %v, want no wait for a source known to be stuck", took)
	}
	if n := hung.calls.Load(); n != 1 {
		t.Errorf("the stuck source was called %d times, want once: not again while its first call hangs", n)
	}
	checkHungReport(t, r, "not started: its discovery started at")
}

// checkHungReport checks r has soon.example's expiry and a discovery_failed
// finding for the files source whose message says want.
func checkHungReport(t *testing.T, r *scan.Report, want string) {
	t.Helper()
	var expiring, failed bool
	for _, f := range r.Findings {
		switch {
		case f.Kind == policy.Expiring && f.Subject == "soon.example" && f.Tier == policy.Page:
			expiring = true
		case f.Kind == policy.DiscoveryFailed && f.Name == "files" && f.Tier == policy.Page && strings.Contains(f.Message, want):
			failed = true
		}
	}
	if !expiring || !failed {
		t.Errorf("findings = %+v; want soon.example expiring at page, and files discovery_failed at page saying %q", r.Findings, want)
	}
	for _, s := range r.Sources {
		if s.Name == "files" && !strings.Contains(s.Error, want) {
			t.Errorf("source files error = %q, want it to say %q", s.Error, want)
		}
	}
}

// TestHungFollowKeepsDiscovery: a zone whose Discover returned but whose
// following of delegations hangs keeps what its Discover found, and fails
// partly, saying so.
func TestHungFollowKeepsDiscovery(t *testing.T) {
	t.Parallel()
	now := time.Now()
	target, ca := expiringTarget(t, now)
	target.Sources = []string{"dnszone:example"}
	p := &scan.Pass{
		Sources:       []scan.Source{hungFollower{hungSource: newHungSource("dnszone:example"), targets: []discovery.Target{target}}},
		Prober:        probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool()}),
		Rules:         policy.DefaultRules(),
		SourceTimeout: 300 * time.Millisecond,
	}

	r, _, err := runWithin(t, t.Context(), p, 30*time.Second)

	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(r.Sources) != 1 || r.Sources[0].Targets != 1 || !strings.HasPrefix(r.Sources[0].Error, "following delegations: did not finish within") {
		t.Errorf("sources = %+v; want dnszone:example with its target, failed following delegations", r.Sources)
	}
	if len(r.Certificates) != 1 {
		t.Errorf("%d certificates, want the zone's one", len(r.Certificates))
	}
}

// TestEveryHungSourceFailed: when the only sources hang, listed or
// streamed, the pass fails as when every source failed, naming each.
func TestEveryHungSourceFailed(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]scan.Source{
		"listed":   newHungSource("files"),
		"streamed": hungStream{newHungSource("files")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := &scan.Pass{Sources: []scan.Source{src}, Prober: probes.New(probes.Config{}), SourceTimeout: 200 * time.Millisecond}

			_, _, err := runWithin(t, t.Context(), p, 30*time.Second)

			if !errors.Is(err, scan.ErrNoSource) || !strings.Contains(err.Error(), "files did not finish within its deadline of 200ms") {
				t.Errorf("Run error = %v; want ErrNoSource saying files did not finish in time", err)
			}
			if te := (*scan.SourceTimeoutError)(nil); !errors.As(err, &te) && name == "streamed" {
				t.Errorf("Run error = %v; want it to match *scan.SourceTimeoutError", err)
			}
		})
	}
}

// TestHungSourceInterrupted: interrupting a pass while a source hangs,
// long before its deadline, ends the pass at once, saying it was
// interrupted, with no report (nothing was probed).
func TestHungSourceInterrupted(t *testing.T) {
	t.Parallel()
	hung := newHungSource("files")
	p := &scan.Pass{
		Sources:       []scan.Source{hung, listSource{name: "static", targets: []discovery.Target{{Name: "a.example", Port: 443, Sources: []string{"static"}}}}},
		Prober:        probes.New(probes.Config{}),
		SourceTimeout: time.Hour,
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-hung.entered
		cancel()
	}()

	r, took, err := runWithin(t, ctx, p, 30*time.Second)

	if r != nil || err == nil || !strings.Contains(err.Error(), "scan interrupted during discovery") || errors.Is(err, scan.ErrNoSource) {
		t.Errorf("Run = %v, %v; want no report and the interruption, not every source failing", r, err)
	}
	if took > 5*time.Second {
		t.Errorf("interrupted Run took %v, want it to end at once", took)
	}
}

// TestEverySourceFailedPrintable: the error of a pass whose every source
// failed reaches a terminal (certwatch scan's stderr); a file name in a
// source's error cannot clear the screen or reorder the line.
func TestEverySourceFailedPrintable(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]scan.Source{
		"listed":   listSource{name: "files", err: errors.New("files: open /certs/\x1b[2Jevil\u202egnp.pem: permission denied")},
		"streamed": streamSource{listSource{name: "files", err: errors.New("files: open /certs/\x1b[2Jevil\u202egnp.pem: permission denied")}, new(atomic.Int32)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := &scan.Pass{Sources: []scan.Source{src}, Prober: probes.New(probes.Config{})}

			_, err := p.Run(t.Context())

			if !errors.Is(err, scan.ErrNoSource) {
				t.Fatalf("Run error = %v, want ErrNoSource", err)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\x1b\u202e") || !strings.Contains(msg, `/certs/\x1b[2Jevil\u202egnp.pem`) {
				t.Errorf("Run error = %q; want the control characters escaped", msg)
			}
		})
	}
}

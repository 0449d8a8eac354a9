package daemon_test

import (
	"context"
	"net/netip"
	"strings"
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

// hungSource is a files source stuck in a call no context reaches (as
// opening a FIFO with no writer is): its Discover blocks on a channel
// nobody closes.
type hungSource struct{ entered chan struct{} }

func (hungSource) Name() string { return "files" }
func (s hungSource) Discover(context.Context) (found.Yield, error) {
	s.entered <- struct{}{}
	select {} // ignores ctx: never returns
}

// staticSource lists fixed targets.
type staticSource struct{ targets []discovery.Target }

func (staticSource) Name() string { return "static" }
func (s staticSource) Discover(context.Context) (found.Yield, error) {
	return found.Yield{Targets: s.targets}, nil
}

// hungPass is a real pass over a hung files source and a static target,
// soon.example, served on loopback with a certificate expiring in 3 days;
// each source's deadline is sourceTimeout.
func hungPass(t *testing.T, sourceTimeout time.Duration) (*scan.Pass, hungSource) {
	t.Helper()
	now := time.Now()
	ca := certtest.MustCA("Daemon Hung Source Root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"soon.example"}, NotBefore: now.Add(-30 * 24 * time.Hour), NotAfter: now.Add(3 * 24 * time.Hour)})
	srv, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hung := hungSource{entered: make(chan struct{}, 10)}
	static := staticSource{targets: []discovery.Target{{Name: "soon.example", Port: int(srv.Addr().Port()),
		Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{"static"}}}}
	return &scan.Pass{
		Sources:       []scan.Source{hung, static},
		Prober:        probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool()}),
		Rules:         policy.DefaultRules(),
		SourceTimeout: sourceTimeout,
	}, hung
}

// hungDaemon is a daemon of hungPass with a source deadline of an hour
// and the grace period given.
func hungDaemon(t *testing.T, grace time.Duration) (*daemon.Daemon, hungSource) {
	t.Helper()
	pass, hung := hungPass(t, time.Hour)
	c := config(0)
	c.GracePeriod = grace
	d, err := daemon.New(c, pass, &fakeNotifier{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d, hung
}

// TestHungSourceDoesNotStallProbing: a files source that never returns
// does not hold up the static target beside it. Once the source's
// deadline has passed, the first probe run probes the static target and
// notifies its expiry (3 days: page), the files source is a
// discovery_degraded finding saying it did not finish in time, the
// daemon is ready (it has an inventory), and a shutdown ends Run within
// the grace period although the source is still stuck.
func TestHungSourceDoesNotStallProbing(t *testing.T) {
	t.Parallel()
	pass, _ := hungPass(t, 300*time.Millisecond)
	c := config(0)
	c.GracePeriod = time.Second
	n := &fakeNotifier{}
	d, err := daemon.New(c, pass, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	var r *scan.Report
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for r = n.last(); r == nil; r = n.last() {
		select {
		case <-tick.C:
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no probe run notified within 30s: the hung source stalls probing")
		}
	}

	var expiring, degraded bool
	for _, f := range r.Findings {
		switch {
		case f.Kind == policy.Expiring && f.Subject == "soon.example" && f.Tier == policy.Page:
			expiring = true
		case f.Kind == policy.DiscoveryDegraded && f.Name == "files" && strings.Contains(f.Message, "did not finish within its deadline of 300ms"):
			degraded = true
		}
	}
	if !expiring || !degraded {
		t.Errorf("findings notified = %+v; want soon.example expiring at page and files discovery_degraded saying it did not finish in time", r.Findings)
	}
	if err := d.Ready(); err != nil {
		t.Errorf("Ready = %v, want ready: the static source's inventory is probed", err)
	}

	stopped := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run has not returned 10s after shutdown (grace period 1s)")
	}
	if took := time.Since(stopped); took > 3*time.Second {
		t.Errorf("shutdown took %v, want within the 1s grace period and a little", took)
	}
}

// TestShutdownDuringHungDiscovery: a shutdown while the first discovery
// waits on a source stuck in a call no context reaches, long before its
// deadline, ends Run within the grace period: the stuck call is
// abandoned, not waited for.
func TestShutdownDuringHungDiscovery(t *testing.T) {
	t.Parallel()
	d, hung := hungDaemon(t, 500*time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-hung.entered

	stopped := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run has not returned 10s after shutdown (grace period 500ms): it waits for the stuck source")
	}
	if took := time.Since(stopped); took > 2500*time.Millisecond {
		t.Errorf("shutdown took %v, want within the 500ms grace period and a little", took)
	}
	if err := d.Ready(); err == nil {
		t.Error("Ready = nil, want not ready: no discovery finished")
	}
}

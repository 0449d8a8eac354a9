package scan_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// tarpitTimeout is the dial and handshake budget of the tarpit tests: one
// endpoint on a hung address costs at most tarpitTimeout ×
// probes.DefaultAttempts plus the backoff between its attempts. It leaves
// a healthy handshake room on a loaded machine; the benchmark uses
// benchTimeout.
const tarpitTimeout = 500 * time.Millisecond

// benchTimeout is the dial and handshake budget of BenchmarkTarpitZone.
const benchTimeout = 200 * time.Millisecond

// tarpitZone is a zone as a hung load balancer makes it: hung names on
// one address (127.0.0.2) that accepts TCP and never speaks, and after
// them in zone order one name (zz-expired.example, on 127.0.0.1) serving
// an expired certificate. It returns the targets, sorted as a zone's are,
// and the CA that issued the expired certificate.
func tarpitZone(tb testing.TB, hung int, now time.Time) ([]discovery.Target, *certtest.CA, *certtest.Server) {
	tb.Helper()
	pit, err := certtest.ServeSilent("127.0.0.2:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pit.Close() })
	ca := certtest.MustCA("Tarpit Test Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"zz-expired.example"}, NotBefore: now.Add(-90 * 24 * time.Hour), NotAfter: now.Add(-24 * time.Hour)})
	srv, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	src := []string{"dnszone:example"}
	var targets []discovery.Target
	for i := range hung {
		targets = append(targets, discovery.Target{Name: fmt.Sprintf("hung%03d.example", i), Port: int(pit.Addr().Port()), Addresses: []netip.Addr{pit.Addr().Addr()}, Sources: src})
	}
	targets = append(targets, discovery.Target{Name: "zz-expired.example", Port: int(srv.Addr().Port()), Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: src})
	return targets, ca, pit
}

// tarpitPass is the pass of the tarpit tests: the default limits (100
// workers, 2 connections per address, 3 attempts, the default backoff)
// with timeout for every dial and handshake.
func tarpitPass(ca *certtest.CA, now time.Time, timeout time.Duration) *scan.Pass {
	return &scan.Pass{
		Prober: probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), DialTimeout: timeout, HandshakeTimeout: timeout, Now: func() time.Time { return now }}),
		Rules:  policy.DefaultRules(),
		Now:    func() time.Time { return now },
	}
}

// BenchmarkTarpitZone is the wall time of a pass over 200 names on one
// address that accepts TCP and never speaks, plus one name elsewhere
// serving an expired certificate, with a 200ms dial and handshake
// timeout, with the per-address breaker (breaker) and without it
// (no_breaker, probe.break_after: 0: every hung endpoint waits out its
// own timeouts, about a minute). One op is one pass; run it with
// -benchtime=1x. conns/op is the connections the hung address accepted.
func BenchmarkTarpitZone(b *testing.B) {
	for _, bb := range []struct {
		name       string
		breakAfter int
	}{{"breaker", 0}, {"no_breaker", -1}} {
		b.Run(bb.name, func(b *testing.B) {
			now := time.Now()
			targets, ca, pit := tarpitZone(b, 200, now)
			for b.Loop() {
				pass := &scan.Pass{
					Prober: probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), DialTimeout: benchTimeout, HandshakeTimeout: benchTimeout,
						BreakAfter: bb.breakAfter, Now: func() time.Time { return now }}),
					Rules: policy.DefaultRules(),
					Now:   func() time.Time { return now },
				}
				r := pass.Probe(b.Context(), targets, now)
				if !hasExpired(r, "zz-expired.example") {
					b.Fatalf("the expired certificate of zz-expired.example is not in the findings: %+v", r.Findings)
				}
			}
			b.ReportMetric(float64(pit.Accepted())/float64(b.N), "conns/op")
		})
	}
}

// hasExpired reports whether r has an expired finding with an endpoint
// named name.
func hasExpired(r *scan.Report, name string) bool {
	for _, f := range r.Findings {
		if f.Kind != policy.Expired {
			continue
		}
		for _, ep := range f.Endpoints {
			if ep.Name == name {
				return true
			}
		}
	}
	return false
}

// worstCase is the most one endpoint on a hung address costs the tarpit
// pass: every attempt's timeout and the longest backoff before each
// retry.
func worstCase() time.Duration {
	d := probes.DefaultAttempts * tarpitTimeout
	for retry := 1; retry < probes.DefaultAttempts; retry++ {
		d += min(probes.DefaultBackoffInitial<<(retry-1), probes.DefaultBackoffMax)
	}
	return d
}

// TestTarpitZone: 200 names on one address that accepts TCP and never
// speaks, then a name elsewhere serving an expired certificate. The
// expired certificate is reported, the pass takes a few endpoints' worst
// case, not 200 / 2 of them (150s before the breaker), and the hung
// address gets a few endpoints' connections, not 600.
func TestTarpitZone(t *testing.T) {
	t.Parallel()
	now := time.Now()
	targets, ca, pit := tarpitZone(t, 200, now)
	start := time.Now()

	r := tarpitPass(ca, now, tarpitTimeout).Probe(t.Context(), targets, now)

	took := time.Since(start)
	if !hasExpired(r, "zz-expired.example") {
		t.Errorf("the expired certificate of zz-expired.example is not in the findings: %+v", r.Findings)
	}
	// Three endpoints in a row give the address up; two are in flight at
	// once, so about two endpoints' worst case. Five leave room for a
	// loaded machine; 200 / 2 endpoints would be 100.
	if limit := 5 * worstCase(); took > limit {
		t.Errorf("the pass took %v, want at most %v (5 endpoints' worst case of %v)", took, limit, worstCase())
	}
	// Given up after 3, plus the one in flight beside the third.
	if got, limit := pit.Accepted(), (probes.DefaultBreakAfter+probes.DefaultPerAddress-1)*probes.DefaultAttempts; got > limit {
		t.Errorf("the hung address accepted %d connections, want at most %d", got, limit)
	}
	if r.CutShort || r.NotProbed != 0 {
		t.Errorf("CutShort, NotProbed = %v, %d; want a complete pass", r.CutShort, r.NotProbed)
	}
	givenUp := 0
	for _, ep := range r.Endpoints {
		if ep.Name == "zz-expired.example" {
			continue
		}
		if ep.Fault().Failure != string(probes.FailTimeout) {
			t.Errorf("%s: failure %q (%s), want timeout", ep.Name, ep.Fault().Failure, ep.Fault().Error)
		}
		if givenUpOn.MatchString(ep.Fault().Error) {
			givenUp++
		}
	}
	if len(r.Endpoints) != 201 || givenUp < 200-probes.DefaultBreakAfter-probes.DefaultPerAddress {
		t.Errorf("%d endpoints, %d of them given up on; want 201, and all but a few hung ones given up on", len(r.Endpoints), givenUp)
	}
}

// TestHungAddressHoldsItsShare: with the breaker off, 10 workers, and 50
// names on a hung address before 20 healthy names (one serving an expired
// certificate) in zone order, the hung address holds 2 workers and the
// other 8 probe every healthy name while it hangs. Once they are done the
// pass is cancelled: the cut-short report has every healthy endpoint and
// its findings, and each hung endpoint as timed out or not_probed.
func TestHungAddressHoldsItsShare(t *testing.T) {
	t.Parallel()
	now := time.Now()
	targets, ca, _ := tarpitZone(t, 50, now)
	for i := range 19 {
		name := fmt.Sprintf("zz-ok%02d.example", i)
		leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)})
		srv, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		targets = append(targets, discovery.Target{Name: name, Port: int(srv.Addr().Port()), Addresses: []netip.Addr{srv.Addr().Addr()}, Sources: []string{"dnszone:example"}})
	}
	pass := tarpitPass(ca, now, tarpitTimeout)
	pass.Prober = probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), DialTimeout: tarpitTimeout, HandshakeTimeout: tarpitTimeout,
		BreakAfter: -1, Now: func() time.Time { return now }})
	pass.Parallelism = 10
	healthyDone := errors.New("every healthy name probed")
	// Without the schedule the 10 workers wait on the hung address, 2 at
	// a time, for about 50 / 2 endpoints' worst case (over 35s) before
	// any healthy name: the deadline then cuts the pass first.
	deadline := errors.New("deadline: the healthy names were not reached while the hung address hung")
	ctx, cancelDeadline := context.WithTimeoutCause(t.Context(), 4*worstCase(), deadline)
	defer cancelDeadline()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	healthy := 0
	pass.OnObservation = func(o *probes.Observation) {
		if strings.HasPrefix(o.Name, "zz-") && o.Failure != probes.FailNotProbed {
			if healthy++; healthy == 20 {
				cancel(healthyDone)
			}
		}
	}

	r := pass.Probe(ctx, targets, now)

	if !r.CutShort || r.CutShortCause != healthyDone.Error() {
		t.Fatalf("CutShort, CutShortCause = %v, %q; want the pass cut short after every healthy name (%d of 20 probed)", r.CutShort, r.CutShortCause, healthy)
	}
	if !hasExpired(r, "zz-expired.example") {
		t.Errorf("the cut-short report lost the expired certificate: %+v", r.Findings)
	}
	if len(r.Endpoints) != 70 {
		t.Fatalf("%d endpoints, want 70: every target, probed or not", len(r.Endpoints))
	}
	notProbed := 0
	for _, ep := range r.Endpoints {
		switch {
		case strings.HasPrefix(ep.Name, "zz-"):
			if ep.Certificate == "" {
				t.Errorf("%s: no certificate (%s: %s)", ep.Name, ep.Fault().Failure, ep.Fault().Error)
			}
		case ep.Fault().Failure == string(probes.FailNotProbed):
			notProbed++
			if !strings.Contains(ep.Fault().Error, healthyDone.Error()) {
				t.Errorf("%s: not_probed error %q does not name the cause", ep.Name, ep.Fault().Error)
			}
		case ep.Fault().Failure != string(probes.FailTimeout):
			t.Errorf("%s: failure %q (%s), want timeout or not_probed", ep.Name, ep.Fault().Failure, ep.Fault().Error)
		}
	}
	if notProbed == 0 || notProbed != r.NotProbed {
		t.Errorf("%d not_probed endpoints, NotProbed = %d; want them counted, and some", notProbed, r.NotProbed)
	}
	noFindingOnNotProbed(t, r)
}

// noFindingOnNotProbed fails t when a finding of r lists an endpoint that
// was not probed: not reaching it says nothing about it.
func noFindingOnNotProbed(t *testing.T, r *scan.Report) {
	t.Helper()
	notProbed := map[policy.Endpoint]bool{}
	for _, ep := range r.Endpoints {
		if ep.Fault().Failure == string(probes.FailNotProbed) {
			notProbed[policy.Endpoint{Name: ep.Name, Port: ep.Port, Address: ep.Address}] = true
		}
	}
	for _, f := range r.Findings {
		for _, ep := range f.Endpoints {
			if notProbed[ep] {
				t.Errorf("finding %s (%s) lists %s:%d at %s, which was not probed", f.Kind, f.Message, ep.Name, ep.Port, ep.Address)
			}
		}
	}
}

// TestCutShortStream: a streamed zone cut short by its deadline while
// every worker is on a hung address records the names never pulled from
// the stream as not_probed, in its JSON.
func TestCutShortStream(t *testing.T) {
	t.Parallel()
	now := time.Now()
	targets, ca, _ := tarpitZone(t, 30, now)
	pass := tarpitPass(ca, now, tarpitTimeout)
	var streamed atomic.Int32
	pass.Sources = []scan.Source{streamSource{listSource{name: "dnszone:example", targets: targets}, &streamed}}
	pass.Parallelism = 2
	cause := errors.New("probe run exceeded its sweep timeout of 300ms") // before the first attempt's timeout
	ctx, cancel := context.WithTimeoutCause(t.Context(), 300*time.Millisecond, cause)
	defer cancel()

	r, err := pass.Run(ctx)

	if err == nil || r == nil {
		t.Fatalf("Run = %v, %v; want the report and an error", r, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		CutShort      bool   `json:"cut_short"`
		CutShortCause string `json:"cut_short_cause"`
		NotProbed     int    `json:"not_probed"`
		Endpoints     []struct {
			Name    string `json:"name"`
			Failure string `json:"failure"`
			Error   string `json:"error"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.CutShort || got.CutShortCause != cause.Error() || len(got.Endpoints) != 31 {
		t.Fatalf("cut_short, cut_short_cause, endpoints = %v, %q, %d; want true, %q, 31", got.CutShort, got.CutShortCause, len(got.Endpoints), cause)
	}
	n := 0
	for _, ep := range got.Endpoints {
		if ep.Failure == "not_probed" {
			n++
		}
	}
	// 300ms is before the 2 hung names' first timeouts: they were cut
	// short, and the rest, the expired name among them, never probed.
	if n != got.NotProbed || n < 31-4 {
		t.Errorf("%d not_probed endpoints, not_probed = %d; want them counted, all but a few", n, got.NotProbed)
	}
	noFindingOnNotProbed(t, r)
}

// givenUpOn matches the error of an endpoint the sweep did not attempt
// because its address was given up on. The count it gives is the streak
// when the endpoint came up: 3, or one more when the probe in flight
// beside the third also timed out first.
var givenUpOn = regexp.MustCompile(`given up on after [0-9]+ consecutive timeouts`)

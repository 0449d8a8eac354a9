package serve_test

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/serve"
)

// TestProbeLatencySkipsProbesWithoutConnection: a sweep over 8 names on a
// hung address times out on the first 2 and gives up on the other 6
// without connecting. Only the 2 real probes have a latency; the 6
// fail-fasts would otherwise land as 0 s in the lowest bucket of the
// timeout series, making a hung address look fast.
func TestProbeLatencySkipsProbesWithoutConnection(t *testing.T) {
	pit, err := certtest.ServeSilent("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pit.Close() })
	const timeout = 200 * time.Millisecond
	p := probes.New(probes.Config{AllowLoopback: true, HandshakeTimeout: timeout, Attempts: 1, PerAddress: 1, BreakAfter: 2})
	sw := p.Sweep()
	s := serve.New(serve.Options{})
	addr := netip.MustParseAddr("127.0.0.1")
	for i := range 8 { // one at a time: the breaker's count is in order
		tg := discovery.Target{Name: "hung" + string(rune('a'+i)) + ".example", Port: int(pit.Addr().Port()), Addresses: []netip.Addr{addr}}
		for _, o := range sw.Probe(context.Background(), tg) {
			if o.Failure != probes.FailTimeout {
				t.Fatalf("%s: failure %q, want timeout", tg.Name, o.Failure)
			}
			s.ObserveProbe(&o)
		}
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	h := scrape(t, hs.URL)["certwatch_probe_latency_seconds"]
	if h == nil {
		t.Fatal("no certwatch_probe_latency_seconds in /metrics")
	}
	var count uint64
	for _, m := range h.Metric {
		hist := m.Histogram
		count += hist.GetSampleCount()
		for _, b := range hist.Bucket {
			if b.GetUpperBound() < timeout.Seconds() && b.GetCumulativeCount() > 0 {
				t.Errorf("%d timed-out probes at or below %vs, faster than the %v handshake timeout", b.GetCumulativeCount(), b.GetUpperBound(), timeout)
			}
		}
	}
	if count != 2 {
		t.Errorf("latency histogram counts %d probes, want 2 (the 6 the breaker failed fast made no connection)", count)
	}
}

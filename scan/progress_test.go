package scan_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// slowProber takes a second (of the bubble's clock) a target and sees one
// endpoint, refused.
type slowProber struct{}

func (slowProber) Probe(ctx context.Context, t discovery.Target) []probes.Observation {
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return []probes.Observation{{Name: t.Name, Port: t.Port, Address: t.Addresses[0], Failure: probes.FailRefused, Error: "connection refused"}}
}

// countingSource is a source that says how far it has got (scan.Counter)
// and blocks in Discover until release is closed.
type countingSource struct {
	release chan struct{}
}

func (countingSource) Name() string                { return "networks:lab" }
func (countingSource) Progress() (done, total int) { return 300, 1024 }
func (s countingSource) Discover(ctx context.Context) (found.Yield, error) {
	<-s.release
	return found.Yield{}, nil
}

// TestPassProgress reads a pass's progress while it runs: during
// discovery, the sources read and what a counting source has swept; while
// probing 10 targets two at a time, a second each, after 2.5 s, 4 probed
// with their endpoints; at the end every target, and nothing running.
func TestPassProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var targets []discovery.Target
		for i := range 10 {
			targets = append(targets, discovery.Target{Name: fmt.Sprintf("h%d.example", i), Port: 443, Addresses: []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)})}, Sources: []string{"static"}})
		}
		release := make(chan struct{})
		p := &scan.Pass{
			Sources:     []scan.Source{listSource{name: "static", targets: targets}, countingSource{release: release}},
			Prober:      slowProber{},
			Parallelism: 2,
		}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := p.Run(t.Context()); err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait()
		want := scan.StageProgress{Running: true, Since: start, Done: 1, Total: 2, WorkDone: 300, WorkTotal: 1024}
		if got := p.Progress().Discovery; got != want {
			t.Errorf("discovery progress = %+v, want %+v", got, want)
		}
		close(release)
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		pr := p.Progress()
		want = scan.StageProgress{Running: true, Since: start, Done: 4, Total: 10, WorkDone: 4}
		if pr.Probe != want || pr.Discovery.Running || pr.Discovery.Done != 2 {
			t.Errorf("progress after 2.5 s of probing = %+v, want probe %+v and discovery done", pr, want)
		}
		<-done
		if got := p.Progress().Probe; got.Running || got.Done != 10 || got.Total != 10 || got.WorkDone != 10 {
			t.Errorf("probe progress at the end = %+v, want 10 of 10 targets, 10 endpoints, not running", got)
		}
	})
}

package daemon_test

import (
	"context"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// sweepSource is a network sweep as scan sees it: its discovery takes
// 110 s (the bubble's) and says how far it has got (scan.Counter), then
// yields 12 targets.
type sweepSource struct{ start time.Time }

func (sweepSource) Name() string { return "networks:lab" }
func (s sweepSource) Progress() (done, total int) {
	return min(int(time.Since(s.start)/time.Second)*50, 5000), 5000 // 50 connections a second
}
func (sweepSource) Discover(ctx context.Context) (found.Yield, error) {
	t := time.NewTimer(110 * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return found.Yield{}, ctx.Err()
	}
	var y found.Yield
	for i := range 12 {
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
		y.Targets = append(y.Targets, discovery.Target{Name: a.String(), Port: 443, Addresses: []netip.Addr{a}, Sources: []string{"networks:lab"}, FromRange: true})
	}
	return y, nil
}

// slowProber takes 10 s (the bubble's) a target and sees one endpoint,
// refused.
type slowProber struct{}

func (slowProber) Probe(ctx context.Context, t discovery.Target) []probes.Observation {
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return []probes.Observation{{Name: t.Name, Port: t.Port, Address: t.Addresses[0], Failure: probes.FailRefused, Error: "connection refused"}}
}

// TestLongRunsLogProgress runs the daemon over a real scan.Pass whose
// discovery sweeps for 110 s and whose probe runs take 120 s (12 targets,
// one at a time, 10 s each), logging progress every 25 s: the log says
// how many connections the sweep has made of how many, and how many
// targets were probed of 12, with a rate and the time left, four times a
// run.
func TestLongRunsLogProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pass := &scan.Pass{Sources: []scan.Source{sweepSource{start: time.Now()}}, Prober: slowProber{}, Parallelism: 1}
		c := config(0)
		c.ProgressEvery = 25 * time.Second
		var logs lockedBuffer
		d, err := daemon.New(c, pass, &fakeNotifier{}, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		time.Sleep(15 * time.Minute)
		synctest.Wait()
		stop()

		out := logs.String()
		discovery := regexp.MustCompile(`msg="discovery in progress" sources_done=0 sources=1 connections_done=(\d+) connections=5000 per_second=50 eta=(\S+)`).FindAllStringSubmatch(out, -1)
		if len(discovery) != 4 || discovery[0][1] != "1250" || discovery[0][2] != "1m15s" {
			t.Errorf("discovery progress lines %q, want four, every 25 s of the 110 s sweep, the first at 1250 of 5000 connections with 1m15s left; log:\n%s", discovery, out)
		}
		// Two probe runs in 15 minutes: at the end of discovery, and at 10m.
		probe := regexp.MustCompile(`msg="probe run in progress" targets_done=(\d+) targets=12 endpoints=(\d+) targets_per_second=(\S+) eta=(\S+)`).FindAllStringSubmatch(out, -1)
		if len(probe) != 8 || probe[0][1] != "2" || probe[0][2] != "2" || probe[0][3] != "0.08" || probe[0][4] != "2m5s" {
			t.Errorf("probe progress lines %q, want four a run, every 25 s of its 120 s, the first at 2 of 12 targets, 0.08 a second, 2m5s left; log:\n%s", probe, out)
		}
		if n := strings.Count(out, "in progress"); n != len(discovery)+len(probe) {
			t.Errorf("%d progress lines, %d of them as expected:\n%s", n, len(discovery)+len(probe), out)
		}
	})
}

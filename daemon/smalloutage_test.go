package daemon_test

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/certwatch/certwatch/daemon"
)

// TestSmallEstateOutageWithholdsHeartbeat: a daemon watching 3 endpoints
// whose host loses its network (every endpoint fails) must not ping its
// heartbeat as if the runs were good: the share's minimum of 10 endpoints
// guards against a few refused ports making the share jump, not against
// nothing answering at all, which `certwatch scan` exits 3 for whatever
// the estate's size.
func TestSmallEstateOutageWithholdsHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hb, closeHB := countHeartbeats()
		defer closeHB()

		s := &fakeScanner{sources: map[string]int{"zone": 3}, certs: true}
		rec := &successRecorder{}
		c := config(0)
		c.HeartbeatURL = "http://hc.example/ping/x"
		c.MaxFailureShare = 0.5
		d, err := daemon.New(c, s, &fakeNotifier{}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		d.Recorder = rec
		d.HTTPClient = hb.client
		stop := start(t, d)
		synctest.Wait()
		s.mu.Lock()
		s.down = true
		s.mu.Unlock()
		time.Sleep(20*time.Minute + time.Second)
		synctest.Wait()
		stop()

		if hb.count() != 1 {
			t.Errorf("%d heartbeats, want 1 (the run before the outage only)", hb.count())
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.errs) != 2 || !strings.Contains(rec.errs[0].Error(), "3 of 3 endpoints failed") {
			t.Errorf("probe runs during the outage recorded %v, want 2 errors saying every endpoint failed", rec.errs)
		}
	})
}

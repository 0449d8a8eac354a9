package daemon_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/certwatch/certwatch/daemon"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestShutdownAbandonsProbeRunLoudly: a probe run still going when the
// shutdown's grace period ends is abandoned. The process is exiting, so
// nothing of it is published or notified (no alert resolves on a partial
// view), the heartbeat is not pinged, the run is recorded as an error,
// and an error log line says what was abandoned and that the next start
// probes again; the report of the last complete run stays as it was.
func TestShutdownAbandonsProbeRunLoudly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hb, closeHB := countHeartbeats()
		defer closeHB()

		s := &fakeScanner{sources: map[string]int{"static": 3}}
		n := &fakeNotifier{}
		rec := &fakeRecorder{}
		c := config(0)
		c.HeartbeatURL = "http://hc.example/ping/x"
		var logs lockedBuffer
		d, err := daemon.New(c, s, n, slog.New(slog.NewJSONHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		d.HTTPClient = hb.client
		d.Recorder = rec
		stop := start(t, d)
		synctest.Wait() // first discovery and probe done, heartbeat pinged
		first := n.last()
		s.mu.Lock()
		s.probeTime = 5 * time.Minute // longer than the 30s grace period
		s.mu.Unlock()
		time.Sleep(10*time.Minute + time.Second) // a scheduled probe is running
		stop()

		if len(n.reports) != 1 || n.last() != first {
			t.Errorf("%d reports notified, want only the first run's: an abandoned run is not notified", len(n.reports))
		}
		if hb.count() != 1 {
			t.Errorf("%d heartbeats, want 1 (the first run's; none for the abandoned run)", hb.count())
		}
		if got := rec.count("probe:error"); got != 1 {
			t.Errorf("%d probe runs recorded as error, want 1 (the abandoned run); runs %v", got, rec.runs)
		}
		var line string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "abandoned") {
				line = l
			}
		}
		for _, want := range []string{`"level":"ERROR"`, "probe run of 3 targets abandoned at shutdown", "nothing of it is published or notified", "the next start probes again", "shutdown grace period over"} {
			if !strings.Contains(line, want) {
				t.Errorf("abandon log line %q lacks %q\nlogs:\n%s", line, want, logs.String())
			}
		}
	})
}

// TestShutdownBeforeTheSchedulerRuns: a shutdown that comes as the daemon
// starts, before its scheduler has run at all, still ends Run: the
// scheduler was started on a goroutine of its own, and a stop that came
// first found it not running, so it scheduled for ever after.
func TestShutdownBeforeTheSchedulerRuns(t *testing.T) {
	t.Parallel()
	for range 20 {
		d, _ := hungDaemon(t, 100*time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run, given a context cancelled before it started, has not returned 10s later")
		}
	}
}

package daemon_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state/sqlite"
)

// successRecorder keeps the reports, the runs' errors and the last
// successes restored at start-up.
type successRecorder struct {
	reportRecorder
	mu       sync.Mutex
	restored map[string]time.Time
	errs     []error
}

func (r *successRecorder) RecordLastSuccess(job string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.restored == nil {
		r.restored = map[string]time.Time{}
	}
	r.restored[job] = at
}

func (r *successRecorder) RecordRun(job string, start time.Time, took time.Duration, err error) {
	r.reportRecorder.RecordRun(job, start, took, err)
	if job == daemon.JobProbe && err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.errs = append(r.errs, err)
	}
}

func (r *successRecorder) last() *scan.Report {
	r.reportRecorder.mu.Lock()
	defer r.reportRecorder.mu.Unlock()
	if len(r.reports) == 0 {
		return nil
	}
	return r.reports[len(r.reports)-1]
}

// TestOutageKeepsFindingsUnverified: when every endpoint stops answering,
// the published report keeps the findings at their tier, unverified since
// the last run that saw them; the notifier gets the run as it was (its
// alerts stay open on their own); the heartbeat is not pinged and the run
// fails, naming the failure share.
func TestOutageKeepsFindingsUnverified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hb, closeHB := countHeartbeats()
		defer closeHB()

		s := &fakeScanner{sources: map[string]int{"zone": 12}, certs: true}
		n := &fakeNotifier{}
		rec := &successRecorder{}
		c := config(0)
		c.HeartbeatURL = "http://hc.example/ping/x"
		c.MaxFailureShare = 0.5
		d, err := daemon.New(c, s, n, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		d.Recorder = rec
		d.HTTPClient = hb.client
		stop := start(t, d)
		synctest.Wait()
		first := rec.last()
		if first == nil || len(findingsOf(first, policy.Expired)) != 12 {
			t.Fatalf("first report = %+v, want 12 expired findings", first)
		}
		s.mu.Lock()
		s.down = true
		s.mu.Unlock()
		time.Sleep(20*time.Minute + time.Second)
		synctest.Wait()
		stop()

		got := rec.last()
		exp := findingsOf(got, policy.Expired)
		if len(exp) != 12 || len(got.Certificates) != 12 {
			t.Fatalf("report after the outage: %d expired findings, %d certificates; want the 12 kept", len(exp), len(got.Certificates))
		}
		for _, f := range exp {
			if f.Tier != policy.Critical || !f.UnverifiedSince.Equal(first.GeneratedAt) {
				t.Errorf("kept finding %s: tier %v, unverified since %v; want critical, unverified since the first run at %v", f.Subject, f.Tier, f.UnverifiedSince, first.GeneratedAt)
			}
		}
		if nf := findingsOf(n.last(), policy.Expired); len(nf) != 0 {
			t.Errorf("notifier got %d carried findings, want the run's own (none)", len(nf))
		}
		if hb.count() != 1 {
			t.Errorf("%d heartbeats, want 1 (the run before the outage only)", hb.count())
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.errs) != 2 || !strings.Contains(rec.errs[0].Error(), "12 of 12 endpoints") || !strings.Contains(rec.errs[0].Error(), "max_failure_share") {
			t.Errorf("probe runs during the outage recorded %v, want 2 errors naming the failure share", rec.errs)
		}
	})
}

// TestRestartKeepsLastSuccessAndInventory: a restarted daemon exports each
// job's last success before any run, and a source failing since start-up
// keeps the targets of its last good run, from the state file.
func TestRestartKeepsLastSuccessAndInventory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	var firstSuccess time.Time
	synctest.Test(t, func(t *testing.T) {
		store, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		s := &fakeScanner{sources: map[string]int{"zone": 3, "static": 1}}
		d, err := daemon.New(config(0), s, &fakeNotifier{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Memory = store
		stop := start(t, d)
		synctest.Wait()
		firstSuccess = time.Now()
		stop()
	})
	synctest.Test(t, func(t *testing.T) {
		store, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		s := &fakeScanner{sources: map[string]int{"zone": -1, "static": 1}}
		rec := &successRecorder{}
		d, err := daemon.New(config(0), s, &fakeNotifier{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Memory, d.Recorder = store, rec
		stop := start(t, d)
		synctest.Wait()
		stop()

		rec.mu.Lock()
		for _, job := range []string{daemon.JobDiscovery, daemon.JobProbe} {
			if at := rec.restored[job]; !at.Equal(firstSuccess) {
				t.Errorf("%s last success restored at start-up = %v, want the first process's %v", job, at, firstSuccess)
			}
		}
		rec.mu.Unlock()
		runs := s.probeRuns()
		if len(runs) != 1 || len(runs[0].targets) != 4 {
			t.Fatalf("probe runs after restart = %+v, want one of the 4 targets: zone's last good 3 and static's 1", runs)
		}
		deg := findingsOf(rec.last(), policy.DiscoveryDegraded)
		if len(deg) != 1 || !strings.Contains(deg[0].Message, "last good inventory (3 targets") {
			t.Errorf("degraded findings = %+v, want zone's saying its last good inventory is still probed", deg)
		}
	})
}

// TestEmptyStateIsAnnounced: a daemon started on a state store that held
// nothing says so in its first notified report, once.
func TestEmptyStateIsAnnounced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeScanner{sources: map[string]int{"zone": 1}}
		n := &fakeNotifier{}
		d, err := daemon.New(config(0), s, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.EmptyState = "/var/lib/certwatch/state.db"
		stop := start(t, d)
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
		stop()
		n.mu.Lock()
		defer n.mu.Unlock()
		if len(n.reports) != 2 {
			t.Fatalf("%d reports notified, want 2", len(n.reports))
		}
		first := findingsOf(n.reports[0], policy.StateCreated)
		if len(first) != 1 || first[0].Tier != policy.Warning || !strings.Contains(first[0].Message, "announced as new") ||
			!strings.Contains(first[0].Message, "/var/lib/certwatch/state.db") {
			t.Errorf("first report's state_created findings = %+v, want one warning naming the store", first)
		}
		if again := findingsOf(n.reports[1], policy.StateCreated); len(again) != 0 {
			t.Errorf("second report repeats state_created: %+v", again)
		}
	})
}

// TestRestartDuringOutageKeepsFindings: a daemon restarted while every
// endpoint is down still publishes the findings the last report before the
// restart had, unverified since then.
func TestRestartDuringOutageKeepsFindings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	var seen time.Time
	for i, down := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			store, err := sqlite.Open(context.Background(), path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			s := &fakeScanner{sources: map[string]int{"zone": 12}, certs: true, down: down}
			rec := &successRecorder{}
			d, err := daemon.New(config(0), s, &fakeNotifier{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			d.Memory, d.Recorder = store, rec
			stop := start(t, d)
			synctest.Wait()
			stop()
			r := rec.last()
			exp := findingsOf(r, policy.Expired)
			if i == 0 {
				seen = r.GeneratedAt
				if len(exp) != 12 {
					t.Fatalf("first start: %d expired findings, want 12", len(exp))
				}
				return
			}
			if len(exp) != 12 || len(r.Certificates) != 12 {
				t.Fatalf("restart during the outage: %d expired findings, %d certificates; want the 12 kept", len(exp), len(r.Certificates))
			}
			for _, f := range exp {
				if !f.UnverifiedSince.Equal(seen) {
					t.Errorf("finding %s unverified since %v, want the last report before the restart, %v", f.Subject, f.UnverifiedSince, seen)
				}
			}
		})
	}
}

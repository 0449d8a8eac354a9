package cli_test

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cttest"
)

// matching returns the log lines that match, in order.
func (p *proc) matching(match func(map[string]any) bool) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, l := range p.lines {
		if match(l) {
			out = append(out, l)
		}
	}
	return out
}

// ctReads returns every "ct log read" line of rs, by time.
func ctReads(t *testing.T, rs ...*replica) []map[string]any {
	t.Helper()
	var all []map[string]any
	for _, r := range rs {
		all = append(all, r.matching(msg("ct log read"))...)
	}
	at := func(l map[string]any) time.Time {
		s, _ := l["time"].(string)
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("log line without a time: %v", l)
		}
		return tm
	}
	slices.SortStableFunc(all, func(a, b map[string]any) int { return at(a).Compare(at(b)) })
	return all
}

// TestReplicasReadACTLogOnce runs two `certwatch run` replicas on one
// PostgreSQL state with the same CT log. Only the leader reads it; a
// standby that takes over reads on from the position in the shared memo;
// and a replica that led before, lost the leadership while another read
// on, and leads again, reads on from the stored position too, not from
// where its own earlier term stopped: across both replicas every entry of
// the log is read once, and each read starts where the previous one ended.
func TestReplicasReadACTLogOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as two processes")
	}
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	bin := buildBinary(t)
	e := startCTEstate(t)
	const lease = 2 * time.Second
	cfg := e.config(t, fmt.Sprintf(`notify:
  state: %q
daemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1h"
    probe: "@every 1h"
  jitter: 10ms
  grace_period: 5s
  leader_lease: %v
`, url, lease))
	now := time.Now()
	appendNames := func(n int, prefix string) {
		t.Helper()
		for i := range n {
			l := e.issuing.MustLeaf(certtest.LeafOptions{DNSNames: []string{fmt.Sprintf("%s%d.%s", prefix, i, ctZone)}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)})
			if err := e.log.Append(cttest.Entry{Cert: l.Cert.Raw, Chain: [][]byte{e.issuing.Cert.Raw, e.root.Cert.Raw}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	readTo := func(size int64) func(map[string]any) bool {
		return func(l map[string]any) bool { return l["msg"] == "ct log read" && l["next"] == float64(size) }
	}

	rs := startReplicas(t, bin, cfg, 2)
	first := leaderOf(t, rs, 1)
	second := without(rs, first)[0]
	size0 := e.log.Size()
	first.waitLog(t, "the first leader's read of the log", 1, readTo(size0))
	// The position is kept once the discovery has finished: paused
	// before, it has none to hand over.
	first.waitLog(t, "the first leader's discovery", 1, msg("discovery finished"))

	// The first leader pauses past its lease; the second takes over and
	// reads on from the stored position: what was logged since.
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	appendNames(5, "during")
	size1 := e.log.Size()
	leaderOf(t, []*replica{second}, 2)
	second.waitLog(t, "the second leader's read of what was logged since", 1, readTo(size1))
	// The position is kept once the discovery has finished.
	second.waitLog(t, "the second leader's discovery", 1, msg("discovery finished"))

	// Resumed, the first finds it was replaced; the second is killed and
	// the first leads again.
	if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	first.waitLog(t, "the resumed ex-leader noticing", 1, msg("leadership lost: stopping this replica's runs and deliveries"))
	if err := second.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	second.waitExit(t)
	appendNames(3, "after")
	size2 := e.log.Size()
	leaderOf(t, []*replica{first}, 3)
	first.waitLog(t, "the first replica's read as leader again", 1, readTo(size2))

	reads := ctReads(t, first, second)
	var total float64
	next := float64(-1)
	for i, r := range reads {
		total += r["entries"].(float64)
		if i > 0 && r["from"] != next {
			t.Errorf("read %d %v starts at %v, want where the previous read ended (%v)", i, r, r["from"], next)
		}
		next = r["next"].(float64)
	}
	if total != float64(size2) {
		t.Errorf("the replicas read %v entries in %d reads, want each of the log's %d once", total, len(reads), size2)
	}
	if got := second.matching(msg("ct positions restored from the state")); len(got) == 0 {
		t.Errorf("the second leader did not restore the positions from the shared state")
	}
}

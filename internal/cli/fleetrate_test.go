package cli_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReplicasShareNetworkRate runs three `certwatch run` replicas on one
// PostgreSQL database sharing one network, 127.45.7.0/27 on one port (30
// addresses, each a listener that records when it accepts), at rate 10
// with a burst of 2. The leader sweeps the range, then the probe run's 30
// endpoints, one per shard, are probed by every replica. In no second do
// the addresses accept more than the network's rate allows all replicas
// together: rate × 1s + burst = 12, plus 1 for the time a connection
// takes between its slot and its accept. Each replica pacing with its own
// bucket let the three probe the range at three times the rate.
func TestReplicasShareNetworkRate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as three processes")
	}
	t.Parallel()
	const (
		rate   = 10
		burst  = 2
		window = time.Second
		// late is how much later than its slot an accept may be stamped:
		// this process stamps accepts as its goroutines are scheduled,
		// and on a loaded machine (the race detector, other tests) a
		// few paced connections queue and are stamped together.
		late = 500 * time.Millisecond
		// allowed is what a token bucket lets through in any window
		// stretched by late. Replicas each pacing on their own would let
		// through at least 2*(rate+burst) = 24 in one window.
		allowed = rate*int((window+late)/time.Millisecond)/1000 + burst
	)
	ac := listenRange(t, netip.MustParsePrefix("127.45.7.0/27"))
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	text := fmt.Sprintf(`networks:
  - name: lab
    cidrs: [127.45.7.0/27]
    ports: [%d]
    rate: %d
    burst: %d
    reverse_dns: false
probe:
  timeout: 2s
  retries: 0
notify:
  state: %q
daemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1h"
    probe: "@every 1m"
  jitter: 100ms
  grace_period: 5s
  sweep_timeout: 40s
  leader_lease: 2s
  shard_size: 1
`, ac.port, rate, burst, url)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := startReplicas(t, bin, cfg, 3)
	leader := leaderOf(t, rs, 1)
	done := leader.waitLog(t, "the first shared probe run", 1, msg("probe run finished"))
	if done["endpoints"] != 30.0 {
		t.Errorf("probe run finished with %v endpoints, want the 30 the sweep found: %v", done["endpoints"], done)
	}
	probing := 0
	for _, r := range rs {
		if r.count(msg("probe shard claimed")) > 0 {
			probing++
		}
	}
	if probing < 2 {
		t.Fatalf("%d replica(s) probed shards, want several sharing the network", probing)
	}

	_, all := ac.accepts()
	if len(all) < 60 {
		t.Fatalf("%d connections accepted, want at least 60 (30 for the sweep, 30 for the probes)", len(all))
	}
	most, at := 0, time.Time{}
	for i, start := range all {
		n := 0
		for _, a := range all[i:] {
			if a.Sub(start) >= window {
				break
			}
			n++
		}
		if n > most {
			most, at = n, start
		}
	}
	t.Logf("%d connections accepted from %d probing replicas in %v; at most %d in one %v (from %v after the first)",
		len(all), probing, all[len(all)-1].Sub(all[0]).Round(time.Millisecond), most, window, at.Sub(all[0]).Round(time.Millisecond))
	if most > allowed {
		t.Errorf("the network accepted %d connections within %v, want at most %d: rate %d/s with burst %d for all replicas together",
			most, window, allowed, rate, burst)
	}
}

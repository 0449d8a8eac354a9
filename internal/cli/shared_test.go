package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/lab"
	"github.com/certwatch/certwatch/internal/pagerdutytest"
	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// slowTargets starts n TLS servers on addresses of their own
// (127.0.0.61, ...), each waiting delay before its handshake, and writes
// their CA to dir. It returns the static targets ("127.0.0.61:port") and
// the CA file.
func slowTargets(t *testing.T, dir string, n int, delay time.Duration) (targets []string, caFile string) {
	t.Helper()
	now := time.Now()
	ca := certtest.MustCA("Slow Farm Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	for i := range n {
		ip := net.IPv4(127, 0, 0, byte(61+i))
		leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: ip.String(), IPs: []net.IP{ip}, NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)})
		srv, err := certtest.ServeAfter(ip.String()+":0", leaf.FullChain(), delay)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		targets = append(targets, srv.Addr().String())
	}
	caFile = filepath.Join(dir, "slow-ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return targets, caFile
}

// sharedRunConfig is a `certwatch run` configuration on the PostgreSQL
// state url, probing targets, one target per shard, with a 2s lease.
func sharedRunConfig(t *testing.T, dir, url, caFile string, targets []string) string {
	t.Helper()
	quoted, _ := json.Marshal(targets)
	text := fmt.Sprintf(`targets: %s
ca_files: [%q]
probe:
  timeout: 6s
  retries: 0
notify:
  state: %q
daemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1m"
    probe: "@every 30s"
  jitter: 500ms
  grace_period: 5s
  sweep_timeout: 25s
  leader_lease: 2s
  shard_size: 1
`, quoted, caFile, url)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// slowReplicas starts n `certwatch run` replicas on a new PostgreSQL
// database, probing eight slow endpoints (3s before each handshake), one
// per shard, and returns them with the endpoints' targets.
func slowReplicas(t *testing.T, n int) ([]*replica, []string) {
	t.Helper()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	targets, caFile := slowTargets(t, dir, 8, 3*time.Second)
	return startReplicas(t, bin, sharedRunConfig(t, dir, url, caFile, targets), n), targets
}

// report fetches a replica's /api/v1/report.
func report(t *testing.T, base string) scan.Report {
	t.Helper()
	code, body := httpGet(t, base+"/api/v1/report")
	if code != http.StatusOK {
		t.Fatalf("GET %s/api/v1/report = %d %s", base, code, body)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("report: %v", err)
	}
	return r
}

// TestSharedProbingKillMidShard runs three `certwatch run` replicas on one
// PostgreSQL database, probing eight slow endpoints (3s before each
// handshake), one per shard. A standby, killed with SIGKILL while it
// probes a shard it claimed, loses that shard after its 2s claim lease;
// the leader takes it over and the run completes: every endpoint probed,
// none reported not_probed, the run not cut short. Then the leader is
// killed while it probes a shard of the next run: the last replica takes
// over the leadership and its first run probes every endpoint too.
func TestSharedProbingKillMidShard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as three processes")
	}
	t.Parallel()
	rs, targets := slowReplicas(t, 3)
	// killMidShard kills r as soon as it claims a shard, checks that it
	// had not written that shard back, and returns the shard's log match.
	killMidShard := func(r *replica, what string, after int) func(string) func(map[string]any) bool {
		t.Helper()
		claim := r.waitLog(t, what+" claiming a shard", after+1, msg("probe shard claimed"))
		if err := r.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		r.waitExit(t)
		sweep, shard := claim["sweep"], claim["shard"]
		same := func(m string) func(map[string]any) bool {
			return func(l map[string]any) bool { return l["msg"] == m && l["sweep"] == sweep && l["shard"] == shard }
		}
		if r.count(same("probe shard written back")) != 0 {
			t.Fatalf("%s wrote shard %v of sweep %v back before it was killed: not killed mid-shard", what, shard, sweep)
		}
		return same
	}
	// checkRun checks the report of r's latest completed run: every
	// endpoint probed, none failed, not cut short.
	checkRun := func(r *replica, runs int) {
		t.Helper()
		done := r.waitLog(t, "a complete shared run", runs, func(l map[string]any) bool {
			return l["msg"] == "probe run finished" && l["cut_short"] == false
		})
		if done["failed"] != 0.0 {
			t.Errorf("probe run finished with %v endpoints failed, want 0: %v", done["failed"], done)
		}
		rep := report(t, r.base)
		if rep.CutShort || rep.NotProbed != 0 {
			t.Errorf("report cut short %v with %d not probed; want every endpoint probed", rep.CutShort, rep.NotProbed)
		}
		probed := map[string]bool{}
		for _, ep := range rep.Endpoints {
			if ep.Fault().Failure != "" {
				t.Errorf("%s:%d failed %s: %s", ep.Name, ep.Port, ep.Fault().Failure, ep.Fault().Error)
			}
			probed[net.JoinHostPort(ep.Name, fmt.Sprint(ep.Port))] = true
		}
		for _, tg := range targets {
			if !probed[tg] {
				t.Errorf("%s is not in the report", tg)
			}
		}
	}

	leader := leaderOf(t, rs, 1)
	standbys := without(rs, leader)
	same := killMidShard(standbys[0], "a standby", 0)
	eventually(t, "the killed standby's shard written back by another replica", func() bool {
		return leader.count(same("probe shard written back"))+standbys[1].count(same("probe shard written back")) == 1
	})
	checkRun(leader, 1)
	for _, r := range []*replica{leader, standbys[1]} {
		if n := r.count(func(l map[string]any) bool { return strings.HasPrefix(fmt.Sprint(l["msg"]), "probe shard not written") }); n != 0 {
			t.Errorf("a replica failed to write back %d shards", n)
		}
	}

	// The leader killed mid-shard in its next run: the last replica leads
	// and completes a run of its own with every endpoint probed.
	claimed := leader.count(msg("probe shard claimed"))
	killMidShard(leader, "the leader", claimed)
	last := leaderOf(t, []*replica{standbys[1]}, 2)
	checkRun(last, 1)
}

// siteConfig is the `certwatch run` configuration of one site on the
// PostgreSQL state url: static targets on the lab (resolved through the
// lab's DNS), Slack and PagerDuty fakes.
func siteConfig(t *testing.T, dir, site, url string, l *labInfo, names []string, slackURL, pdURL string) string {
	t.Helper()
	var targets []string
	for _, n := range names {
		targets = append(targets, fmt.Sprintf("%s:%d", n, l.port))
	}
	quoted, _ := json.Marshal(targets)
	text := fmt.Sprintf(`targets: %s
resolver: %s
ca_files: [%q]
probe:
  timeout: 2s
  retries: 0
notify:
  state: %q
%sdaemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1m"
    probe: "@every 5s"
  jitter: 500ms
  grace_period: 5s
  leader_lease: 2s
  site: %s
`, quoted, l.dns, l.caFile, url, channelsYAML(slackURL, pdURL), site)
	cfg := filepath.Join(dir, site+".yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// labInfo is what siteConfig needs of the lab.
type labInfo struct {
	dns, caFile string
	port        int
}

// TestSitesShareOneAlertState runs two `certwatch run` instances as two
// sites (two AWS accounts' worth) on one PostgreSQL database, each with
// its own static targets on the lab: site a probes api and expired, site
// b probes auth and billing. api, auth and billing serve one wildcard
// certificate that expires in 5 days. Both sites' reports show it as one
// finding with the endpoints of both, it pages once and is posted to
// Slack once; over several runs of each site, nothing is resolved (a site
// does not resolve what only the other sees), and nothing is announced
// twice.
func TestSitesShareOneAlertState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as two processes")
	}
	t.Parallel()
	db := pg.Server(t)
	url := db.CreateDatabase(t)
	bin := buildBinary(t)
	l := startLab(t)
	sl := slacktest.New(t, slackToken, "#certs")
	pd := pagerdutytest.New(t, pdKey)
	dir := t.TempDir()
	li := &labInfo{dns: l.DNS, caFile: l.CAFile, port: l.Port}
	env := []string{"CW_E2E_SLACK_TOKEN=" + slackToken, "CW_E2E_PD_KEY=" + pdKey}
	zone := "." + lab.Zone
	cfgA := siteConfig(t, dir, "a", url, li, []string{"api" + zone, "expired" + zone}, sl.URL(), pd.URL())
	a := startRun(t, bin, cfgA, env...)
	b := startRun(t, bin, siteConfig(t, dir, "b", url, li, []string{"auth" + zone, "billing" + zone}, sl.URL(), pd.URL()), env...)
	sites := map[string]*replica{}
	for name, p := range map[string]*proc{"a": a, "b": b} {
		sites[name] = &replica{proc: p, base: "http://" + p.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)}
	}
	for name, s := range sites {
		s.waitLog(t, "site "+name+" leading its replicas", 1, msg("leading the replicas"))
		s.waitLog(t, "four of site "+name+"'s probe runs", 4, msg("findings applied"))
	}

	wildcard := "*" + zone
	for name, s := range sites {
		r := report(t, s.base)
		var found []string
		for _, f := range r.Findings {
			if f.Subject != wildcard || f.Kind != policy.Expiring {
				continue
			}
			for _, ep := range f.Endpoints {
				found = append(found, ep.Name)
			}
		}
		slices.Sort(found)
		want := []string{"api" + zone, "auth" + zone, "billing" + zone}
		if !slices.Equal(found, want) {
			t.Errorf("site %s: the wildcard's finding covers %v, want one finding with both sites' endpoints %v", name, found, want)
		}
		expired := slices.ContainsFunc(r.Findings, func(f policy.Finding) bool { return f.Kind == policy.Expired })
		if !expired {
			t.Errorf("site %s: the expired certificate (seen by site a only) is not in its report", name)
		}
	}
	var wildcardPages int
	for _, ev := range pd.Events() {
		if ev.EventAction == "resolve" {
			t.Errorf("PagerDuty got a resolve for %s: a site resolved what the other sees", ev.DedupKey)
		}
	}
	for _, al := range pd.Alerts() {
		if strings.Contains(al.Summary, wildcard) {
			wildcardPages += al.Opened
		}
	}
	if wildcardPages != 1 {
		t.Errorf("the wildcard paged %d times, want once", wildcardPages)
	}
	var posts int
	for _, m := range sl.Messages(sl.ChannelID("#certs")) {
		// Its expiry; its renewal_missed is an alert of its own.
		if m.ThreadTS == "" && strings.Contains(m.Text, wildcard) && !strings.Contains(m.Text, "renewal overdue") {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("the wildcard was posted to Slack %d times, want once", posts)
	}

	// A scan --notify on the shared state would judge the sites' alerts on
	// its own view: it is refused, with the scan itself left to run
	// without --notify.
	cmd := exec.Command(bin, "scan", "--config", cfgA, "--notify")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "shared by certwatch run instances (sites: a, b)") {
		t.Errorf("scan --notify on the sites' state: exit %d (%v), output %q; want 2, naming the sites", code, err, out)
	}
}

// TestSharedProbingPausedMidShard: the standby, paused (SIGSTOP) while it
// probes a shard it claimed and resumed after the leader took the shard
// over and wrote it back, stops probing it and writes nothing of it: its
// claim is gone. The run the leader completed has every endpoint probed.
func TestSharedProbingPausedMidShard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as two processes")
	}
	t.Parallel()
	rs, targets := slowReplicas(t, 2)
	leader := leaderOf(t, rs, 1)
	standby := without(rs, leader)[0]
	claim := standby.waitLog(t, "the standby claiming a shard", 1, msg("probe shard claimed"))
	if err := standby.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	sweep, shard := claim["sweep"], claim["shard"]
	same := func(m string) func(map[string]any) bool {
		return func(l map[string]any) bool { return l["msg"] == m && l["sweep"] == sweep && l["shard"] == shard }
	}
	leader.waitLog(t, "the leader writing the paused standby's shard back", 1, same("probe shard written back"))
	if err := standby.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	standby.waitLog(t, "the resumed standby abandoning the shard", 1, same("probe shard abandoned: nothing of it is written, another replica probes it"))
	if n := standby.count(same("probe shard written back")); n != 0 {
		t.Errorf("the resumed standby wrote back the shard the leader had taken over")
	}
	leader.waitLog(t, "the shared run finishing", 1, func(l map[string]any) bool {
		return l["msg"] == "probe run finished" && l["cut_short"] == false && l["failed"] == 0.0
	})
	if r := report(t, leader.base); r.CutShort || r.NotProbed != 0 || len(r.Endpoints) != len(targets) {
		t.Errorf("report: %d endpoints, cut short %v, %d not probed; want all %d probed", len(r.Endpoints), r.CutShort, r.NotProbed, len(targets))
	}
}

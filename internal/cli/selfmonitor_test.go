package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/certwatch/certwatch/internal/lab"
)

// selfMonConfig is a `certwatch run` configuration for the lab with one
// log channel, fast schedules, and a heartbeat from $CW_HB_URL.
func selfMonConfig(l *lab.Lab, nameserver, state string) string {
	return fmt.Sprintf(`zones:
  - name: %s
    nameserver: %s
ports: [%d]
ca_files: [%q]
probe:
  timeout: 2s
  retries: 0
  allow_loopback: true
notify:
  state: %q
  channels:
    - name: log
      kind: log
  routes:
    - tiers: [notice, warning, page, critical]
      channels: [log]
daemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1m"
    probe: "@every 5s"
  jitter: 100ms
  grace_period: 3s
  heartbeat:
    url_env: CW_HB_URL
`, lab.Zone, nameserver, l.Port, l.CAFile, state)
}

// heartbeats is a dead-man's switch on loopback counting its pings.
type heartbeats struct {
	url   string
	pings atomic.Int64
}

func newHeartbeats(t *testing.T) *heartbeats {
	hb := &heartbeats{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ping/hb-token" {
			hb.pings.Add(1)
		}
	}))
	t.Cleanup(srv.Close)
	hb.url = srv.URL + "/ping/hb-token"
	return hb
}

// reportFinding is a finding as /api/v1/report shows it.
type reportFinding struct {
	Kind            string           `json:"kind"`
	Tier            string           `json:"tier"`
	Certificate     string           `json:"certificate"`
	Subject         string           `json:"subject"`
	Name            string           `json:"name"`
	Message         string           `json:"message"`
	UnverifiedSince string           `json:"unverified_since"`
	Endpoints       []reportEndpoint `json:"endpoints"`
}

type reportEndpoint struct {
	Name string `json:"name"`
}

type apiReport struct {
	GeneratedAt string          `json:"generated_at"`
	Findings    []reportFinding `json:"findings"`
	Endpoints   []struct {
		Name        string `json:"name"`
		Certificate string `json:"certificate"`
	} `json:"endpoints"`
}

func getReport(t *testing.T, base string) apiReport {
	t.Helper()
	code, body := httpGet(t, base+"/api/v1/report")
	var r apiReport
	if err := json.Unmarshal([]byte(body), &r); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/report = %d (%v): %s", code, err, body)
	}
	return r
}

func probeFinished(pred func(map[string]any) bool) func(map[string]any) bool {
	return func(l map[string]any) bool { return l["msg"] == "probe run finished" && pred(l) }
}

func writeConfig(t *testing.T, path, cfg string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunOutageKeepsFindings: the lab's TLS servers go away under a running
// daemon. The report, the metrics and the status page keep every finding
// at its tier, marked unverified since the last run that saw it, and the
// heartbeat is no longer pinged.
func TestRunOutageKeepsFindings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	l := startLab(t)
	hb := newHeartbeats(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, selfMonConfig(l, l.DNS, filepath.Join(dir, "state.db")))
	p := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
	base := "http://" + p.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p.waitLog(t, "two probe runs applied", 2, msg("findings applied"))
	eventually(t, "a heartbeat", func() bool { return hb.pings.Load() > 0 })

	before := getReport(t, base)
	type key struct{ kind, cert, name string }
	want := map[key]string{}
	for _, f := range before.Findings {
		if len(f.Endpoints) > 0 && f.Kind != "unreachable" {
			want[key{f.Kind, f.Certificate, f.Name}] = f.Tier
		}
	}
	if want[key{"expired", findingCert(before, "expired", "expired.internal.example"), ""}] != "critical" {
		t.Fatalf("before the outage the report has no critical expired finding: %+v", before.Findings)
	}

	if err := l.StopTLS(); err != nil {
		t.Fatal(err)
	}
	outage := probeFinished(func(l map[string]any) bool { u, _ := l["unverified"].(float64); return u > 0 })
	p.waitLog(t, "two probe runs in the outage", 2, outage)
	pings := hb.pings.Load()
	p.waitLog(t, "four probe runs in the outage", 4, outage)
	if got := hb.pings.Load(); got != pings {
		t.Errorf("%d heartbeats during the outage, want none", got-pings)
	}

	after := getReport(t, base)
	got := map[key]reportFinding{}
	for _, f := range after.Findings {
		got[key{f.Kind, f.Certificate, f.Name}] = f
	}
	for k, tier := range want {
		f, ok := got[k]
		switch {
		case !ok:
			t.Errorf("finding %v gone from the report during the outage", k)
		case f.Tier != tier || f.UnverifiedSince == "":
			t.Errorf("finding %v during the outage: tier %s, unverified_since %q; want %s and a time", k, f.Tier, f.UnverifiedSince, tier)
		}
	}
	for _, series := range []string{
		`certwatch_findings{kind="expired",tier="critical"}`,
		`certwatch_findings_unverified{kind="expired",tier="critical"}`,
	} {
		if v := metric(t, base, series); v != 1 {
			t.Errorf("%s = %v during the outage, want 1", series, v)
		}
	}
	if v := metric(t, base, `certwatch_job_runs_total{daemon_job="probe",result="error"}`); v < 2 {
		t.Errorf("certwatch_job_runs_total{probe,error} = %v during the outage, want the runs above the failure share counted as errors", v)
	}
	_, page := httpGet(t, base+"/")
	if !strings.Contains(page, `<span class="unverified"`) || !strings.Contains(page, "findings are unverified") {
		t.Error("status page shows no unverified badge or banner during the outage")
	}
	if _, subjects := labRows(page); !slices.Contains(subjects, "expired.internal.example") {
		t.Errorf("status page rows during the outage = %q, want the expired certificate kept", subjects)
	}
	if !strings.Contains(p.log(), "max_failure_share") {
		t.Error("the log does not say the failure share was exceeded")
	}
	// The alert state agrees: the alerts are open, not resolved.
	if out, stderr, code := run(t, "alerts", "--config", cfg); code != 0 || !strings.Contains(out, "expired.internal.example") {
		t.Errorf("certwatch alerts during the outage: exit %d, %q %q; want the expired certificate's alert open", code, out, stderr)
	}

	// A restart during the outage still shows what was known.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	p2 := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
	base2 := "http://" + p2.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p2.waitLog(t, "a probe run after the restart", 1, msg("probe run finished"))
	restarted := getReport(t, base2)
	for _, f := range restarted.Findings {
		if f.Kind == "expired" && f.Subject == "expired.internal.example" {
			if f.Tier != "critical" || f.UnverifiedSince == "" {
				t.Errorf("after a restart during the outage the expired finding is %s, unverified since %q; want critical and a time", f.Tier, f.UnverifiedSince)
			}
			return
		}
	}
	t.Errorf("after a restart during the outage the expired finding is gone: %+v", restarted.Findings)
}

func findingCert(r apiReport, kind, subject string) string {
	for _, f := range r.Findings {
		if f.Kind == kind && f.Subject == subject {
			return f.Certificate
		}
	}
	return ""
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, for a disk
// that fills up. It needs root; CERTWATCH_REQUIRE_TMPFS=1 makes its
// absence a failure.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	err := syscall.Mount("certwatch-test", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size))
	if err != nil {
		if os.Getenv("CERTWATCH_REQUIRE_TMPFS") == "1" {
			t.Fatalf("mount tmpfs on %s: %v (CERTWATCH_REQUIRE_TMPFS=1)", dir, err)
		}
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes to dir until its file system is full, and returns the
// filler's path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 32<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v, want ENOSPC", dir, err)
			}
			break
		}
	}
	// Smaller writes take the last partial blocks.
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// TestRunStateFaults: a state file corrupted, deleted or on a full disk
// under a running daemon turns /readyz to 503 and certwatch_state_up to 0,
// naming the fault; the probe runs fail; a deleted file is not recreated;
// a freed disk recovers.
func TestRunStateFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	l := startLab(t)
	hb := newHeartbeats(t)
	tests := []struct {
		name  string
		dir   func(t *testing.T) string
		harm  func(t *testing.T, path string) (undo func())
		want  string
		after func(t *testing.T, p *proc, path, base string)
	}{
		{
			name: "corrupted",
			dir:  func(t *testing.T) string { return t.TempDir() },
			harm: func(t *testing.T, path string) func() {
				writeConfig(t, path, strings.Repeat("not a database ", 2000))
				return nil
			},
			want: "state file is corrupt",
		},
		{
			name: "deleted",
			dir:  func(t *testing.T) string { return t.TempDir() },
			harm: func(t *testing.T, path string) func() {
				for _, f := range []string{path, path + "-wal", path + "-shm"} {
					if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
						t.Fatal(err)
					}
				}
				return nil
			},
			want: "state file was deleted or replaced",
			after: func(t *testing.T, p *proc, path, base string) {
				n := p.count(msg("probe run finished"))
				p.waitLog(t, "two more probe runs", n+2, msg("probe run finished"))
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the deleted state file was recreated while certwatch runs (stat: %v)", err)
				}
			},
		},
		{
			name: "disk full",
			dir:  func(t *testing.T) string { return mountTmpfs(t, 4<<20) },
			harm: func(t *testing.T, path string) func() {
				filler := fill(t, filepath.Dir(path))
				return func() {
					if err := os.Remove(filler); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: "disk full",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir(t)
			state := filepath.Join(dir, "state.db")
			cfg := filepath.Join(t.TempDir(), "config.yaml")
			writeConfig(t, cfg, selfMonConfig(l, l.DNS, state))
			p := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
			base := "http://" + p.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
			p.waitLog(t, "a probe run applied", 1, msg("findings applied"))
			eventually(t, "ready", func() bool { code, _ := httpGet(t, base+"/readyz"); return code == http.StatusOK })
			if v := metric(t, base, "certwatch_state_up"); v != 1 {
				t.Fatalf("certwatch_state_up = %v before the fault, want 1", v)
			}
			errorsBefore := metric(t, base, `certwatch_job_runs_total{daemon_job="probe",result="error"}`)

			undo := tt.harm(t, state)
			eventually(t, "/readyz 503 naming the fault", func() bool {
				code, body := httpGet(t, base+"/readyz")
				return code == http.StatusServiceUnavailable && strings.Contains(body, "state: ") && strings.Contains(body, tt.want)
			})
			if v := metric(t, base, "certwatch_state_up"); v != 0 {
				t.Errorf("certwatch_state_up = %v with the state %s, want 0", v, tt.name)
			}
			eventually(t, "a failed probe run", func() bool {
				return metric(t, base, `certwatch_job_runs_total{daemon_job="probe",result="error"}`) > errorsBefore
			})
			if tt.after != nil {
				tt.after(t, p, state, base)
			}
			if undo != nil {
				undo()
				eventually(t, "/readyz 200 once the disk has room", func() bool {
					code, _ := httpGet(t, base+"/readyz")
					return code == http.StatusOK && metric(t, base, "certwatch_state_up") == 1
				})
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			p.waitExit(t)
		})
	}
}

// TestRunRestartKeepsWhatItLearnt: after a restart, each job's last success
// is exported before it succeeds again, and a zone failing since start-up
// keeps its last good targets (probed, findings kept). A restart on a
// deleted state says loudly that every open finding is announced again.
func TestRunRestartKeepsWhatItLearnt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	l := startLab(t)
	hb := newHeartbeats(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	cfg := filepath.Join(dir, "config.yaml")
	env := "CW_HB_URL=" + hb.url

	writeConfig(t, cfg, selfMonConfig(l, l.DNS, state))
	p1 := startRun(t, bin, cfg, env)
	base1 := "http://" + p1.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p1.waitLog(t, "two probe runs applied", 2, msg("findings applied"))
	p1.waitLog(t, "state_created notification of the first start", 1, func(l map[string]any) bool {
		return l["kind"] == "state_created" && l["event"] == "new"
	})
	discovered := metric(t, base1, `certwatch_last_success_timestamp_seconds{daemon_job="discovery"}`)
	if discovered == 0 {
		t.Fatal("no discovery success before the restart")
	}
	if err := p1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p1.waitExit(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}

	// The zone's server is gone for the second start: discovery never
	// succeeds in it.
	writeConfig(t, cfg, selfMonConfig(l, l.Unreachable, state))
	p2 := startRun(t, bin, cfg, env)
	base2 := "http://" + p2.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p2.waitLog(t, "restored inventory", 1, msg("last good inventory restored from the state"))
	p2.waitLog(t, "a probe run applied", 1, msg("findings applied"))
	if v := metric(t, base2, `certwatch_last_success_timestamp_seconds{daemon_job="discovery"}`); v < discovered {
		t.Errorf("discovery's last success after the restart = %v, want the first process's (at least %v)", v, discovered)
	}
	r := getReport(t, base2)
	if findingCert(r, "expired", "expired.internal.example") == "" {
		t.Errorf("after the restart with the zone failing, the expired certificate is not reported: %+v", r.Findings)
	}
	var degraded *reportFinding
	for i, f := range r.Findings {
		if f.Kind == "discovery_degraded" {
			degraded = &r.Findings[i]
		}
		if f.Kind == "state_created" {
			t.Errorf("a restart on the same state reports state_created: %+v", f)
		}
	}
	if degraded == nil || !strings.Contains(degraded.Message, "last good inventory") {
		t.Errorf("discovery_degraded = %+v, want the zone's last good inventory still probed", degraded)
	}
	if n := p2.count(func(l map[string]any) bool {
		return l["msg"] == "findings applied" && l["new"] != 0.0 && l["new"] != 1.0
	}); n > 0 {
		t.Errorf("after the restart %d probe runs announced findings again, want at most the new discovery_degraded", n)
	}
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p2.waitExit(t)

	// A restart on a deleted state announces everything again, loudly.
	for _, f := range []string{state, state + "-wal", state + "-shm"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	writeConfig(t, cfg, selfMonConfig(l, l.DNS, state))
	p3 := startRun(t, bin, cfg, env)
	base3 := "http://" + p3.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	warn := p3.waitLog(t, "empty state warning", 1, msg("the state store held no state at start: every open finding is announced as new, with a state_created finding"))
	if warn["level"] != "WARN" || warn["state"] != state {
		t.Errorf("empty state log line = %v, want a warning naming the file", warn)
	}
	p3.waitLog(t, "a probe run applied", 1, msg("findings applied"))
	if v := metric(t, base3, `certwatch_findings{kind="state_created",tier="warning"}`); v != 1 {
		t.Errorf(`certwatch_findings{kind="state_created"} = %v after a restart on a deleted state, want 1`, v)
	}
	p3.waitLog(t, "state_created notification on the log channel", 1, func(l map[string]any) bool {
		return l["kind"] == "state_created" && l["event"] == "new" && strings.Contains(fmt.Sprint(l["message"]), "announced as new")
	})
}

// TestRunCutShortPublishes: a probe run that hits its sweep timeout (the
// lab's hung address takes the whole probe timeout) publishes what it
// probed, with a probe_cut_short finding and a timeout in the metrics,
// never a discarded report, and does not ping the heartbeat.
func TestRunCutShortPublishes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	l := startLab(t)
	hb := newHeartbeats(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	// The hung address takes the whole probe timeout, which is also the
	// sweep's: every run is cut short.
	text := strings.Replace(selfMonConfig(l, l.DNS, filepath.Join(dir, "state.db")),
		"  grace_period: 3s\n", "  grace_period: 3s\n  sweep_timeout: 1s\n", 1)
	writeConfig(t, cfg, strings.Replace(text, "probe:\n  timeout: 2s\n", "probe:\n  timeout: 1s\n", 1))
	p := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
	base := "http://" + p.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p.waitLog(t, "two cut-short probe runs", 2, probeFinished(func(l map[string]any) bool { return l["cut_short"] == true }))
	p.waitLog(t, "findings applied", 2, msg("findings applied"))

	r := getReport(t, base)
	if findingCert(r, "expired", "expired.internal.example") == "" {
		t.Errorf("the cut-short run's report lacks the expired certificate it probed: %+v", r.Findings)
	}
	var cut *reportFinding
	for i, f := range r.Findings {
		if f.Kind == "probe_cut_short" {
			cut = &r.Findings[i]
		}
	}
	if cut == nil || cut.Tier != "warning" || !strings.Contains(cut.Message, "timeout of 1s") || !strings.Contains(cut.Message, "sweep_timeout") {
		t.Errorf("probe_cut_short finding = %+v, want a warning naming the 1s timeout and what to change", cut)
	}
	// A run is counted when it ends, after its findings are applied.
	eventually(t, "the two cut-short runs counted as timeouts", func() bool {
		return metric(t, base, `certwatch_job_runs_total{daemon_job="probe",result="timeout"}`) >= 2
	})
	if v := metric(t, base, `certwatch_findings{kind="probe_cut_short",tier="warning"}`); v != 1 {
		t.Errorf(`certwatch_findings{kind="probe_cut_short"} = %v, want 1`, v)
	}
	if strings.Contains(p.log(), "discarded") {
		t.Error("the log says a report was discarded")
	}
	if n := hb.pings.Load(); n != 0 {
		t.Errorf("%d heartbeats after cut-short runs, want none", n)
	}
}

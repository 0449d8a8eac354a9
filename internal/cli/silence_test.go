package cli_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/certwatch/certwatch/internal/pagerdutytest"
	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/state"
)

// The lab's shared wildcard (*.internal.example, expiring in 5 days: page)
// is served on billing.internal.example and three other names.
const wildcardSubject = "*.internal.example"

// addSilence runs `certwatch silence add` with args and returns the
// silence it added.
func addSilence(t *testing.T, cfg string, args ...string) state.Silence {
	t.Helper()
	stdout, stderr, code := run(t, append([]string{"silence", "add", "--config", cfg, "--output", "json", "--author", "tester"}, args...)...)
	var s state.Silence
	if err := json.Unmarshal([]byte(stdout), &s); code != 0 || err != nil || s.ID == "" {
		t.Fatalf("silence add %v: exit %d, %v\n%s%s", args, code, err, stdout, stderr)
	}
	return s
}

// pagedFor returns the PagerDuty alerts whose summary names subject.
func pagedFor(pd *pagerdutytest.Server, subject string) []pagerdutytest.Alert {
	var out []pagerdutytest.Alert
	for _, a := range pd.Alerts() {
		if strings.Contains(a.Summary, subject) {
			out = append(out, a)
		}
	}
	return out
}

// postedFor returns the Slack posts (thread replies too) that name subject.
func postedFor(sl *slacktest.Server, subject string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range sl.Messages("#certs") {
		if strings.Contains(m.Text, subject) {
			out = append(out, m)
		}
	}
	return out
}

// TestRunSilences runs `certwatch run` on the lab with two silences added
// by `certwatch silence add`: the wildcard's page is silenced (nothing on
// PagerDuty or Slack, but on the page, in the JSON report, in /metrics and
// in the API); the old certificate of mixed, a warning silenced up to
// warning, is announced once a reload makes it a page; and expiring the
// wildcard's silence announces it at the next run, exactly once.
func TestRunSilences(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	l := startLab(t)
	sl := slacktest.New(t, slackToken, "#certs")
	pd := pagerdutytest.New(t, pdKey)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	good := runConfig(l, dir, sl.URL(), pd.URL())
	if err := os.WriteFile(cfg, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CW_E2E_SLACK_TOKEN=" + slackToken, "CW_E2E_PD_KEY=" + pdKey}

	if _, stderr, code := run(t, "silence", "add", "--config", cfg, "--kind", "expiring", "--for", "91d", "--reason", "too long", "--author", "tester"); code != 2 ||
		!strings.Contains(stderr, "longer than notify.silence_max (90d)") {
		t.Errorf("a 91-day silence: exit %d, %q; want 2 naming notify.silence_max", code, stderr)
	}
	wild := addSilence(t, cfg, "--kind", "expiring", "--name", "billing.internal.example", "--for", "1d", "--reason", "CHG-42 renewal booked")
	if wild.UpTo.String() != "page" {
		t.Errorf("a matcher silence covers up to %s, want page by default", wild.UpTo)
	}
	addSilence(t, cfg, "--kind", "expiring", "--name", "mixed.internal.example", "--up-to", "warning", "--for", "30d", "--reason", "old certificate, to be removed")
	// The wildcard was never renewed: its renewal_missed is silenced with
	// its expiry.

	p := startRun(t, bin, cfg, env...)
	base := "http://" + p.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p.waitLog(t, "two probe runs applied", 2, msg("findings applied"))
	eventually(t, "outboxes drained", func() bool {
		return metric(t, base, `certwatch_outbox_depth{channel="oncall"}`) == 0 && metric(t, base, `certwatch_outbox_depth{channel="certs"}`) == 0 &&
			len(pd.Alerts()) > 0
	})
	if got := pagedFor(pd, wildcardSubject); len(got) != 0 {
		t.Errorf("the silenced wildcard reached PagerDuty: %+v", got)
	}
	if got := postedFor(sl, wildcardSubject); len(got) != 0 {
		t.Errorf("the silenced wildcard reached Slack: %q", got[0].Text)
	}
	if len(pagedFor(pd, "expired.internal.example")) != 1 {
		t.Errorf("the expired certificate, not silenced, was not paged: %+v", pd.Alerts())
	}
	_, page := httpGet(t, base+"/")
	if !strings.Contains(page, "silenced by tester until") || !strings.Contains(page, "CHG-42 renewal booked") {
		t.Error("the status page does not show the silence with who, why and until when")
	}
	if v := metric(t, base, `certwatch_findings_silenced{kind="expiring",tier="page"}`); v != 1 {
		t.Errorf(`certwatch_findings_silenced{kind="expiring",tier="page"} = %v, want 1`, v)
	}
	rep := report(t, base)
	silenced := 0
	for _, f := range rep.Findings {
		if f.Silenced != nil {
			silenced++
			if f.Silenced.ID != wild.ID && f.Subject != "mixed.internal.example" {
				t.Errorf("finding %s %s is marked silenced by %s", f.Kind, f.Subject, f.Silenced.ID)
			}
		}
	}
	if silenced == 0 {
		t.Error("the JSON report marks no finding silenced")
	}
	code, body := httpGet(t, base+"/api/v1/silences")
	var listed []state.SilenceStatus
	if err := json.Unmarshal([]byte(body), &listed); code != http.StatusOK || err != nil || len(listed) != 2 {
		t.Fatalf("GET /api/v1/silences = %d %s, want the two silences", code, body)
	}
	for _, s := range listed {
		// The wildcard's silence of its expiry matches its renewal_missed
		// too.
		want := 1
		if s.ID == wild.ID {
			want = 2
		}
		if len(s.Matching) != want {
			t.Errorf("silence %s matches %v, want %d open alerts", s.ID, s.Matching, want)
		}
	}
	if code, _ := httpPost(t, base+"/api/v1/silences/"+wild.ID+"/expire", ""); code != http.StatusForbidden {
		t.Errorf("expire over HTTP without serve.silence_token = %d, want 403 (off)", code)
	}

	// Escalation past the silenced tier: with page from 13 days, mixed's
	// old certificate (12 days left) is a page, above its silence.
	reloaded := strings.Replace(good, "\nprobe:\n", "\npolicy:\n  tiers:\n    page: {within: 13d}\nprobe:\n", 1)
	if reloaded == good {
		t.Fatal("could not add policy tiers to the config")
	}
	if err := os.WriteFile(cfg, []byte(reloaded), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "reload", 1, msg("config reloaded"))
	eventually(t, "mixed's page on PagerDuty", func() bool { return len(pagedFor(pd, "mixed.internal.example")) == 1 })
	if got := pagedFor(pd, wildcardSubject); len(got) != 0 {
		t.Errorf("the wildcard, silenced up to page, reached PagerDuty after the reload: %+v", got)
	}

	// Expired, the wildcard's silence lets it be announced, once.
	stdout, stderr, code := run(t, "silence", "expire", wild.ID, "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "ended") {
		t.Fatalf("silence expire: exit %d, %s%s", code, stdout, stderr)
	}
	eventually(t, "the wildcard on PagerDuty after its silence ended", func() bool { return len(pagedFor(pd, wildcardSubject)) == 1 })
	applied := p.count(msg("findings applied"))
	p.waitLog(t, "one more probe run", applied+1, msg("findings applied"))
	eventually(t, "Slack outbox drained", func() bool { return metric(t, base, `certwatch_outbox_depth{channel="certs"}`) == 0 })
	if got := pagedFor(pd, wildcardSubject); len(got) != 1 || got[0].Opened != 1 || got[0].Triggers != 1 {
		t.Errorf("the wildcard on PagerDuty: %+v; want one alert, opened and triggered once", got)
	}
	if got := postedFor(sl, wildcardSubject); len(got) != 2 || !strings.Contains(got[0].Text+got[1].Text, "renewal overdue") {
		t.Errorf("the wildcard in #certs %d times, want twice: its expiry and its renewal_missed, once each", len(got))
	}
	if v := metric(t, base, `certwatch_findings_silenced{kind="expiring",tier="page"}`); v != 0 {
		t.Errorf("certwatch_findings_silenced{expiring,page} = %v after the silence ended, want 0", v)
	}
	stdout, _, _ = run(t, "silence", "list", "--config", cfg, "--all")
	if !strings.Contains(stdout, wild.ID) || !strings.Contains(stdout, "ended") {
		t.Errorf("silence list --all does not show the ended silence:\n%s", stdout)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

func httpPost(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, resp.Status)
	return resp.StatusCode, b.String()
}

// TestReplicasHonourOneSilence runs two `certwatch run` replicas on one
// PostgreSQL database with the wildcard's page silenced: neither leader
// announces it, the one that takes over after the first is killed
// included; expired through the HTTP API (with the silence token), it is
// announced once.
func TestReplicasHonourOneSilence(t *testing.T) {
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
	cfg := filepath.Join(dir, "config.yaml")
	const token = "silence-token-e2e-83c1"
	text := stateLine.ReplaceAllString(runConfig(l, dir, sl.URL(), pd.URL()), fmt.Sprintf("  state: %q\n", url))
	text += "  leader_lease: 2s\nserve:\n  silence_token_env: CW_E2E_SILENCE_TOKEN\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CW_E2E_SLACK_TOKEN=" + slackToken, "CW_E2E_PD_KEY=" + pdKey, "CW_E2E_SILENCE_TOKEN=" + token}
	wild := addSilence(t, cfg, "--kind", "expiring", "--name", "billing.internal.example", "--for", "1d", "--reason", "CHG-42")

	rs := startReplicas(t, bin, cfg, 2, env...)
	first := leaderOf(t, rs, 1)
	first.waitLog(t, "the leader's first probe run", 1, msg("findings applied"))
	eventually(t, "PagerDuty outbox drained", func() bool {
		return metric(t, first.base, `certwatch_outbox_depth{channel="oncall"}`) == 0 && len(pd.Alerts()) > 0
	})
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.waitExit(t)
	second := leaderOf(t, without(rs, first), 2)
	second.waitLog(t, "the new leader's first probe run", 1, msg("findings applied"))
	if got := pagedFor(pd, wildcardSubject); len(got) != 0 {
		t.Fatalf("a leader announced the silenced wildcard: %+v", got)
	}
	if v := metric(t, second.base, `certwatch_findings_silenced{kind="expiring",tier="page"}`); v != 1 {
		t.Errorf("the new leader's certwatch_findings_silenced{expiring,page} = %v, want 1", v)
	}

	if code, _ := httpPost(t, second.base+"/api/v1/silences/"+wild.ID+"/expire", "wrong-token"); code != http.StatusUnauthorized {
		t.Errorf("expire with a wrong token = %d, want 401", code)
	}
	if code, status := httpPost(t, second.base+"/api/v1/silences/"+wild.ID+"/expire", token); code != http.StatusOK {
		t.Fatalf("expire with the token = %s, want 200", status)
	}
	eventually(t, "the wildcard on PagerDuty after its silence ended", func() bool { return len(pagedFor(pd, wildcardSubject)) == 1 })
	applied := second.count(msg("findings applied"))
	second.waitLog(t, "one more probe run", applied+1, msg("findings applied"))
	if got := pagedFor(pd, wildcardSubject); len(got) != 1 || got[0].Opened != 1 || got[0].Triggers != 1 {
		t.Errorf("the wildcard on PagerDuty: %+v; want one alert, opened and triggered once", got)
	}
	for _, r := range rs {
		if strings.Contains(r.log(), token) {
			t.Error("a replica's log contains the silence token")
		}
	}
}

// TestSilenceAddWithoutUser runs `certwatch silence add` where $USER is
// unset, as in many containers: a missing --for is reported as such, not
// as a missing $USER, and a complete command succeeds with the author
// taken from the operating system's user.
func TestSilenceAddWithoutUser(t *testing.T) {
	t.Setenv("USER", "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	text := fmt.Sprintf("zones: [{name: example.com, nameserver: 127.0.0.1:53}]\nnotify:\n  state: %s\n  channels: [{name: log, kind: log}]\n  routes: [{tiers: [page], channels: [log]}]\n", filepath.Join(dir, "state.db"))
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "silence", "add", "--config", cfg, "--kind", "expiring", "--reason", "r")
	if code != 2 || !strings.Contains(stderr, "--for 7d or --until") || strings.Contains(stderr, "USER") {
		t.Errorf("silence add without --for and $USER: exit %d, %q; want 2 asking for --for", code, stderr)
	}
	stdout, stderr, code := run(t, "silence", "add", "--config", cfg, "--kind", "expiring", "--for", "1d", "--reason", "r", "--output", "json")
	var s state.Silence
	if err := json.Unmarshal([]byte(stdout), &s); code != 0 || err != nil || s.Author == "" {
		t.Errorf("silence add without $USER: exit %d, author %q, %v; want the OS user as author\n%s", code, s.Author, err, stderr)
	}
}

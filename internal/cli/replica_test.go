package cli_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/pagerdutytest"
	"github.com/certwatch/certwatch/internal/slacktest"
)

// replica is one `certwatch run` of several sharing a PostgreSQL state.
type replica struct {
	*proc
	base string
}

func (r *replica) leads() int {
	return r.count(msg("leading the replicas"))
}

// TestReplicasFailover runs three `certwatch run` processes on one
// PostgreSQL database against the lab, Slack and PagerDuty: one leads;
// killed (SIGKILL) while Slack is down and its notifications wait, another
// takes over within the lease; that one paused (SIGSTOP) past its lease is
// replaced too and, resumed, delivers nothing. Every transition reaches
// each channel exactly once, and only the leader says certwatch_leader 1.
func TestReplicasFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as three processes")
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
	const lease = 2 * time.Second
	text := stateLine.ReplaceAllString(runConfig(l, dir, sl.URL(), pd.URL()), fmt.Sprintf("  state: %q\n", url))
	text += fmt.Sprintf("  leader_lease: %v\n", lease)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CW_E2E_SLACK_TOKEN=" + slackToken, "CW_E2E_PD_KEY=" + pdKey}

	// Slack is down at first: the leader's Slack notifications wait in the
	// outbox, being retried, when it is killed.
	sl.SetHook(func(slacktest.Call) (slacktest.Response, bool) {
		return slacktest.Response{Status: http.StatusInternalServerError}, true
	})

	rs := startReplicas(t, bin, cfg, 3, env...)
	leader := func(alive []*replica, epoch float64) *replica {
		t.Helper()
		return leaderOf(t, alive, epoch)
	}
	checkOneLeader := func(alive []*replica, want *replica) {
		t.Helper()
		eventually(t, "certwatch_leader 1 on the leader only", func() bool {
			for _, r := range alive {
				if (metric(t, r.base, "certwatch_leader") == 1) != (r == want) {
					return false
				}
			}
			return true
		})
		for _, r := range alive {
			if r == want {
				continue
			}
			// /readyz reads the leadership as /metrics does, but a scrape
			// apart: on a loaded machine the two may straddle a renewal.
			eventually(t, "standby's /readyz 200 saying standby", func() bool {
				code, body := httpGet(t, r.base+"/readyz")
				return code == http.StatusOK && strings.Contains(body, "standby")
			})
		}
	}

	first := leader(rs, 1)
	checkOneLeader(rs, first)
	first.waitLog(t, "the leader's first probe run", 1, msg("findings applied"))
	eventually(t, "PagerDuty outbox drained", func() bool {
		return metric(t, first.base, `certwatch_outbox_depth{channel="oncall"}`) == 0 && len(pd.Alerts()) >= len(pagedSubjects)
	})
	// The depth is read at a scrape; on a loaded machine the first may
	// come before the leader's gauge caught up with its outbox.
	eventually(t, "a Slack notification waiting while Slack is down", func() bool {
		return metric(t, first.base, `certwatch_outbox_depth{channel="certs"}`) > 0
	})

	// kill -9 the leader with Slack notifications pending.
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.waitExit(t)
	killed := time.Now()
	alive := without(rs, first)
	second := leader(alive, 2)
	if took := time.Since(killed); took > lease+lease/2+5*time.Second {
		t.Errorf("takeover took %v, want about the lease (%v)", took, lease)
	} else {
		t.Logf("takeover %v after SIGKILL (lease %v)", took.Round(10*time.Millisecond), lease)
	}
	checkOneLeader(alive, second)
	second.waitLog(t, "the new leader's first probe run", 1, msg("findings applied"))
	if n := second.count(func(l map[string]any) bool { return l["msg"] == "findings applied" && l["new"] != 0.0 }); n != 0 {
		_, report := httpGet(t, second.base+"/api/v1/report")
		t.Errorf("the new leader announced new findings in %d runs, want none: the state is shared; its report:\n%s", n, report)
	}

	// Pause the new leader past its lease; the third takes over.
	if err := second.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	third := leader(without(alive, second), 3)
	t.Logf("takeover %v after SIGSTOP (lease %v)", time.Since(paused).Round(10*time.Millisecond), lease)
	third.waitLog(t, "the third leader's first probe run", 1, msg("findings applied"))
	// Slack is back: the third leader delivers what waited.
	sl.SetHook(nil)
	eventually(t, "Slack outbox drained by the third leader", func() bool {
		return metric(t, third.base, `certwatch_outbox_depth{channel="certs"}`) == 0
	})
	posted := len(sl.Calls())
	// Resumed, the paused one finds it was replaced, and delivers nothing.
	if err := second.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	second.waitLog(t, "the resumed ex-leader noticing", 1, msg("leadership lost: stopping this replica's runs and deliveries"))
	checkOneLeader(alive, third)
	third.waitLog(t, "two more probe runs", 3, msg("findings applied"))
	if n := len(sl.Calls()); n != posted {
		t.Errorf("%d Slack calls after the ex-leader resumed, want none (it is fenced)", n-posted)
	}

	// Every transition exactly once per channel.
	for _, a := range pd.Alerts() {
		if a.Opened != 1 || a.Triggers != 1 {
			t.Errorf("PagerDuty alert %s (%s): opened %d times, %d triggers; want 1 and 1", a.DedupKey, a.Summary, a.Opened, a.Triggers)
		}
	}
	seen := map[string]int{}
	for _, m := range sl.TopLevel("#certs") {
		seen[m.Text]++
	}
	if len(seen) < len(pagedSubjects) {
		t.Errorf("%d distinct Slack posts, want at least %d", len(seen), len(pagedSubjects))
	}
	for text, n := range seen {
		if n != 1 {
			t.Errorf("Slack post %q made %d times, want once", text, n)
		}
	}
	for _, r := range alive {
		if r.leads() > 1 {
			t.Errorf("a replica led %d times, want at most once", r.leads())
		}
	}
	// Every completed run of every leader probed every target: none was
	// cut short, none left an endpoint not probed.
	for i, r := range []*replica{first, second, third} {
		runs := r.count(msg("probe run finished"))
		if runs == 0 {
			t.Errorf("leader %d finished no probe run", i+1)
		}
		if n := r.count(func(l map[string]any) bool { return l["msg"] == "probe run finished" && l["cut_short"] != false }); n != 0 {
			t.Errorf("leader %d: %d of %d probe runs cut short", i+1, n, runs)
		}
	}
	if rep := report(t, third.base); rep.CutShort || rep.NotProbed != 0 || len(rep.Endpoints) == 0 {
		t.Errorf("the last leader's report: %d endpoints, cut short %v, %d not probed; want every endpoint probed", len(rep.Endpoints), rep.CutShort, rep.NotProbed)
	}
}

// startReplicas starts n `certwatch run` processes on cfg and waits for
// each one's start line.
func startReplicas(t *testing.T, bin, cfg string, n int, env ...string) []*replica {
	t.Helper()
	var rs []*replica
	for range n {
		p := startRun(t, bin, cfg, env...)
		rs = append(rs, &replica{proc: p, base: "http://" + p.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)})
	}
	return rs
}

// leaderOf waits until one of alive leads with epoch, and returns it.
func leaderOf(t *testing.T, alive []*replica, epoch float64) *replica {
	t.Helper()
	var found *replica
	eventually(t, fmt.Sprintf("a replica leading epoch %v", epoch), func() bool {
		for _, r := range alive {
			if r.count(func(l map[string]any) bool { return l["msg"] == "leading the replicas" && l["epoch"] == epoch }) > 0 {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

func without(rs []*replica, gone *replica) []*replica {
	var out []*replica
	for _, r := range rs {
		if r != gone {
			out = append(out, r)
		}
	}
	return out
}

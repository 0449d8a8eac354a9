package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/pagerdutytest"
	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify/slack"
)

// TestScanNotifyKilledAfterSlackAccepted kills a real `certwatch scan
// --notify` with SIGKILL the moment Slack has accepted its first post,
// before the answer reaches it (so before anything is recorded), then runs
// it again: every finding is in #certs once, the killed post included, on
// a SQLite state file (and on a PostgreSQL database:
// TestScanNotifyKilledAfterSlackAcceptedPostgres). Each waits out the
// killed scan's delivery lease, about a minute, so each is a parallel test
// of its own: as parallel subtests they waited for a slot behind every
// other test of the package, and ended last.
func TestScanNotifyKilledAfterSlackAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	testKilledAfterSlackAccepted(t, buildBinary(t), func(cfg string) string { return cfg })
}

// TestScanNotifyKilledAfterSlackAcceptedPostgres is
// TestScanNotifyKilledAfterSlackAccepted on a PostgreSQL state.
func TestScanNotifyKilledAfterSlackAcceptedPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	srv := pgPW.Server(t)
	url := srv.CreateDatabase(t)
	testKilledAfterSlackAccepted(t, bin, func(cfg string) string {
		return stateLine.ReplaceAllString(cfg, fmt.Sprintf("  state: %q\n  state_password_env: CW_E2E_STATE_PW\n", url))
	}, "CW_E2E_STATE_PW="+stateDBPassword)
}

var (
	// channelURL is a channel's URL in channelsYAML, closing its flow map.
	channelURL = regexp.MustCompile(`url: ("[^"]*")}`)
	// leaseEnds is when another process's delivery lease ends, as logged.
	leaseEnds = regexp.MustCompile(`"lease_ends":"([^"]+)"`)
)

func testKilledAfterSlackAccepted(t *testing.T, bin string, edit func(string) string, env ...string) {
	l := startLab(t)
	sl := slacktest.New(t, slackToken, "#certs")
	pd := pagerdutytest.New(t, pdKey)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	// A delivery attempt may take 5s (notify.send_timeout), so the killed
	// scan's delivery lease lasts 35s, not the default's minute; the
	// channels' requests must fit in it.
	text := strings.Replace(edit(runConfig(l, dir, sl.URL(), pd.URL())), "notify:\n", "notify:\n  send_timeout: 5s\n", 1)
	text = channelURL.ReplaceAllString(text, "url: $1, timeout: 5s}")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(append(os.Environ(), env...), "CW_E2E_SLACK_TOKEN="+slackToken, "CW_E2E_PD_KEY="+pdKey)
	scan := func(flags ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"scan", "--config", cfg, "--notify", "--output", "json"}, flags...)...)
		cmd.Env = env
		cmd.Stdout = new(bytes.Buffer)
		cmd.Stderr = new(bytes.Buffer)
		return cmd
	}

	first := scan()
	// exited is closed once the first scan has exited, with its error in
	// exitErr: Slack's handler and the test both wait for it.
	exited := make(chan struct{})
	var exitErr error
	var killedAt time.Time // when Slack's handler killed it
	killed := make(chan slacktest.Message, 1)
	// started hands the first scan's process to Slack's handler: the
	// handler runs on the fake's goroutine, which only the child's
	// request orders after Start.
	started := make(chan *os.Process, 1)
	sl.OnPosted(func(m slacktest.Message) {
		if m.ThreadTS != "" || len(killed) > 0 {
			return
		}
		// Slack has the message; certwatch never hears back: it is dead
		// before the handler answers.
		p := <-started
		started <- p
		killedAt = time.Now()
		_ = p.Kill()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
		}
		killed <- m
	})
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	started <- first.Process
	go func() { exitErr = first.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		t.Fatal("the first scan neither posted to Slack nor exited")
	}
	err := exitErr
	sl.OnPosted(nil)
	if len(killed) == 0 {
		t.Fatalf("the first scan exited (%v) without posting to Slack; stderr:\n%s", err, first.Stderr)
	}
	lost := <-killed
	if ps := first.ProcessState; ps == nil || ps.Success() || !strings.Contains(ps.String(), "killed") {
		t.Fatalf("first scan: %v, want killed", ps)
	}
	if lost.Metadata == nil || lost.Metadata.EventType != slack.MetadataEventType || lost.Metadata.EventPayload["key"] == nil {
		t.Fatalf("the post Slack accepted carries metadata %+v, want certwatch's marker and key", lost.Metadata)
	}
	key := lost.Metadata.EventPayload["key"]

	second := scan("-v")
	if err := second.Run(); second.ProcessState.ExitCode() != 1 {
		t.Fatalf("second scan: %v, want exit code 1 (findings); stderr:\n%s", err, second.Stderr)
	}
	// The killed scan's delivery lease outlives it: the second waits it
	// out, and says so rather than hanging silently.
	stderr := second.Stderr.(*bytes.Buffer).String()
	if !strings.Contains(stderr, "another certwatch process is delivering this channel; waiting for it") {
		t.Errorf("the second scan did not say it waits for the killed scan's delivery lease; stderr:\n%s", second.Stderr)
	}
	// The lease it waits for ends send_timeout plus 30s after the killed
	// scan last took it, before its post: not the default's minute.
	if m := leaseEnds.FindStringSubmatch(stderr); m == nil {
		t.Errorf("the second scan did not say when the lease ends; stderr:\n%s", stderr)
	} else if ends, err := time.Parse(time.RFC3339, m[1]); err != nil || ends.After(killedAt.Add(36*time.Second)) {
		t.Errorf("the killed scan's lease ends at %s (%v), %v after it was killed; want at most 35s (send_timeout 5s + 30s)", m[1], err, ends.Sub(killedAt))
	}

	// Every finding once in #certs: the killed post was found and adopted,
	// not posted again.
	byKey := map[any][]string{}
	for _, m := range sl.TopLevel("#certs") {
		if m.Metadata == nil {
			t.Errorf("message without metadata: %q", m.Text)
			continue
		}
		k := m.Metadata.EventPayload["key"]
		byKey[k] = append(byKey[k], m.Text)
	}
	for k, texts := range byKey {
		if len(texts) != 1 {
			t.Errorf("finding %v is in #certs %d times: %q", k, len(texts), texts)
		}
	}
	if got := byKey[key]; len(got) != 1 || got[0] != lost.Text {
		t.Errorf("the killed post's finding %v: %q in #certs, want it once, as posted", key, got)
	}
	if len(byKey) < 2 {
		t.Errorf("#certs has %d findings, want the lab's several", len(byKey))
	}
	looked := false
	for _, c := range sl.Calls() {
		looked = looked || (c.Method == "conversations.history" && c.IncludeAllMetadata)
	}
	if !looked {
		t.Error("the second scan did not look for the killed post in the channel's history")
	}
}

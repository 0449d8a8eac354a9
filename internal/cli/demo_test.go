package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/cli"
)

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls s until re matches, for at most 60s.
func waitFor(t *testing.T, what string, s *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(s.String()); m != nil {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s within 60s; output:\n%s", what, s.String())
	return nil
}

// TestDemoKeepWritesRunConfig runs `certwatch demo --keep`, then the
// `certwatch run` command it prints, and finds the lab's expired
// certificate in the daemon's report, the renewal it holds at rest, and
// the certificate from an unexpected issuer in its CT log.
func TestDemoKeepWritesRunConfig(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var demoOut, demoErr syncBuffer
	demoDone := make(chan error, 1)
	go func() { demoDone <- cli.Run(ctx, []string{"demo", "--keep"}, &demoOut, &demoErr) }()
	m := waitFor(t, "run command", &demoErr, regexp.MustCompile(`status page on http://(127\.0\.0\.1:\d+)/.*\n  certwatch run --config (\S+)\n`))
	listen, cfg := m[1], m[2]

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var runErr syncBuffer
	runDone := make(chan error, 1)
	go func() { runDone <- cli.Run(runCtx, []string{"run", "--config", cfg}, io.Discard, &runErr) }()
	waitFor(t, "a probe run", &runErr, regexp.MustCompile(`"msg":"findings applied"`))

	resp, err := http.Get("http://" + listen + "/api/v1/report")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "expired.internal.example") {
		t.Errorf("GET /api/v1/report = %d, want 200 with the lab's expired certificate:\n%.500s", resp.StatusCode, body)
	}
	// The daemon reads the lab's files too: the wildcard renewed at rest.
	if !strings.Contains(string(body), "stale_deployment") || !strings.Contains(string(body), "wildcard.internal.example.pem") {
		t.Errorf("the daemon's report lacks the stale deployment naming the renewed wildcard's file:\n%.500s", body)
	}
	// And the lab's CT log: the certificate from a CA not the lab's.
	if !strings.Contains(string(body), `"unexpected_issuer"`) || !strings.Contains(string(body), "Elsewhere Issuing CA") {
		t.Errorf("the daemon's report lacks the unexpected issuer the lab's CT log holds:\n%.500s", body)
	}

	stopRun()
	if err := <-runDone; cli.ExitCode(err) != 0 {
		t.Errorf("run exited with %v; stderr:\n%s", err, runErr.String())
	}
	cancel()
	if err := <-demoDone; err != nil {
		t.Errorf("demo --keep exited with %v", err)
	}
}

// shellWords splits a command line the demo prints as a POSIX shell would
// (words separated by spaces, '…' quoting), without the program name.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 || words[0] != "certwatch" {
		t.Fatalf("%q is not a certwatch command", line)
	}
	return words[1:]
}

// TestDemoKeepCommandsRun runs every command `certwatch demo --keep`
// prints (but `run`, which TestDemoKeepWritesRunConfig runs) against its
// lab, as a user copying them would: none is refused for its flags, and
// each sees the zone delegated from the lab's zone and transferred
// (svc.internal.example); scan and coverage the one refusing transfers
// (partners.internal.example) too, and the lab's CT log: scan its
// undeployed renewal and its certificate from an unexpected issuer.
func TestDemoKeepCommandsRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var demoOut, demoErr syncBuffer
	demoDone := make(chan error, 1)
	go func() { demoDone <- cli.Run(ctx, []string{"demo", "--keep"}, &demoOut, &demoErr) }()
	waitFor(t, "the commands to try", &demoErr, regexp.MustCompile(`certwatch run --config \S+\n`))
	try, _, _ := strings.Cut(demoErr.String(), "or run the daemon")
	_, try, _ = strings.Cut(try, "Try:\n")
	lines := strings.Split(strings.TrimSpace(try), "\n")
	if scanning := regexp.MustCompile(`Scanning as: (.*)\n`).FindStringSubmatch(demoOut.String()); scanning != nil {
		lines = append(lines, scanning[1])
	} else {
		t.Error("the demo does not print the scan it runs")
	}
	seen := map[string]bool{}
	for _, line := range lines {
		args := shellWords(t, strings.TrimSpace(line))
		seen[args[0]] = true
		stdout, stderr, code := run(t, args...)
		if code == cli.ExitUsage || code == 3 {
			t.Errorf("%s: exit %d (refused); stderr:\n%s", line, code, stderr)
			continue
		}
		for _, zone := range []string{"svc.internal.example", "partners.internal.example"} {
			if zone == "partners.internal.example" && args[0] == "inventory" {
				continue // a gap is not a target: coverage lists it
			}
			if !strings.Contains(stdout, zone) {
				t.Errorf("%s: the output does not name %s (a delegated zone of the lab):\n%s", args[0], zone, stdout)
			}
		}
		// scan and coverage read the lab's CT log as the demo does.
		switch args[0] {
		case "scan":
			for _, want := range []string{"stale_deployment \"www.internal.example\"", "unexpected_issuer \"www.internal.example\"", "/logs/test2026h1 at index 0 on "} {
				if !strings.Contains(stdout, want) {
					t.Errorf("%s: the output lacks %q (the lab's CT log):\n%s", line, want, stdout)
				}
			}
		case "coverage":
			if !regexp.MustCompile(`(?m)^ct +0 +0 +0 +2 +-$`).MatchString(stdout) {
				t.Errorf("%s: coverage lists no ct source with the log's 2 certificates:\n%s", line, stdout)
			}
		}
	}
	for _, cmd := range []string{"scan", "inventory", "coverage"} {
		if !seen[cmd] {
			t.Errorf("the demo prints no %q command to try; printed:\n%s", cmd, strings.Join(lines, "\n"))
		}
	}
	cancel()
	if err := <-demoDone; err != nil {
		t.Errorf("demo --keep exited with %v", err)
	}
}

package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/kubetest"
)

// hungSourceConfig writes a configuration of three sources: a static
// target, 127.0.0.1 on a loopback listener serving a certificate that
// expires in 3 days; a files source whose glob matches a symlink to a FIFO
// nobody writes to (which once made opening it hang for good, and is now
// that source's error); and a Kubernetes cluster whose API server accepts
// every list and never answers (its request timeout an hour away, so only
// the source's deadline, discoveryTimeout, ends it). extra is appended. It
// returns the configuration's path and the API server.
func hungSourceConfig(t *testing.T, discoveryTimeout, extra string) (cfg string, kube *kubetest.Server) {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca := certtest.MustCA("Hung Source Root", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "soon.example", IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: now.Add(-30 * 24 * time.Hour), NotAfter: now.Add(3 * 24 * time.Hour)})
	srv, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "stuck.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifo, filepath.Join(certs, "stuck.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certs, "bomb.jks"), crashJKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	kube = kubetest.New(t)
	for _, r := range []string{"secrets", "configmaps", "certificates", "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "apiservices", "customresourcedefinitions"} {
		kube.Hang(r)
	}
	cfg = filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf(`targets: [%q]
files:
  - paths: [%q]
kubernetes:
  - name: stuck
    kubeconfig: %q
    context: stuck
    timeout: 1h
ca_files: [%q]
discovery_timeout: %s
probe:
  timeout: 2s
  retries: 0
%s`, srv.Addr().String(), filepath.Join(certs, "*"), kube.Kubeconfig(t, dir, "stuck"), caFile, discoveryTimeout, extra)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, kube
}

// crashJKS is a JKS keystore of 103 bytes whose private-key entry states
// 4,294,967,295 certificates: read as stated, it ran the process out of
// memory at once.
func crashJKS() []byte {
	b := []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2, 0, 0, 0, 1} // magic, version 2, one entry
	b = append(b, 0, 0, 0, 1, 0, 6)                             // a private key entry, its alias of 6 bytes
	b = append(b, "server"...)
	b = append(b, make([]byte, 8)...)           // its date
	b = append(b, 0, 0, 0, 4, 1, 2, 3, 4)       // a key of 4 bytes
	b = append(b, 0xff, 0xff, 0xff, 0xff, 0, 5) // 2^32-1 certificates, the first of type
	b = append(b, "X.509"...)                   // X.509
	b = append(b, 0, 0, 0, 16)                  // of 16 bytes
	b = append(b, make([]byte, 16)...)
	return append(b, make([]byte, 20)...) // the digest
}

// waitListing waits until the API server has been asked for more than
// before lists, so that what the test does next happens while the
// Kubernetes source waits for an answer that never comes.
func waitListing(t *testing.T, kube *kubetest.Server, before int) {
	t.Helper()
	eventually(t, "certwatch listing from the API server", func() bool { return len(kube.Requests()) > before })
}

// scanReport is the part of the JSON report these tests read.
type scanReport struct {
	Sources []struct {
		Name  string `json:"name"`
		Error string `json:"error"`
	} `json:"sources"`
	Findings []struct {
		Kind    string `json:"kind"`
		Tier    string `json:"tier"`
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"findings"`
}

// TestScanHungSource: `certwatch scan` whose Kubernetes source waits for
// an API server that never answers, beside a files source whose glob
// matches a FIFO, finishes once the source's deadline (2s) has passed: it
// probes the static target and reports its expiry, reports the Kubernetes
// source as failed for its deadline and the files source for the FIFO
// (their errors, discovery_failed findings), and exits 1 for them.
func TestScanHungSource(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	cfg, _ := hungSourceConfig(t, "2s", "")
	cmd := exec.Command(bin, "scan", "--config", cfg, "--output", "json")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("certwatch scan has not exited 60s after start: a stuck source stalls it\nstderr:\n%s", stderr.String())
	}
	took := time.Since(start)
	t.Logf("certwatch scan exited %v after start", took)

	if code := cmd.ProcessState.ExitCode(); code != cli.ExitFindings {
		t.Errorf("exit code = %d, want %d (findings at page)\nstderr:\n%s", code, cli.ExitFindings, stderr.String())
	}
	if took > 20*time.Second {
		t.Errorf("scan took %v, want about the 2s deadline", took)
	}
	var r scanReport
	if err := json.Unmarshal([]byte(stdout.String()), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout.String())
	}
	const want = "did not finish within its deadline of 2s (discovery_timeout) and was abandoned"
	const fifo = "not a regular file (named pipe); certwatch reads only regular files"
	var expiring, kubeFailed, filesFailed bool
	for _, f := range r.Findings {
		expiring = expiring || f.Kind == "expiring" && f.Tier == "page"
		kubeFailed = kubeFailed || f.Kind == "discovery_failed" && f.Name == "kubernetes:stuck" && strings.Contains(f.Message, want)
		filesFailed = filesFailed || f.Kind == "discovery_failed" && f.Name == "files" && strings.Contains(f.Message, fifo)
	}
	if !expiring || !kubeFailed || !filesFailed {
		t.Errorf("findings = %+v; want the static target's certificate expiring at page, kubernetes:stuck discovery_failed saying %q and files discovery_failed saying %q", r.Findings, want, fifo)
	}
	for _, s := range r.Sources {
		if s.Name == "kubernetes:stuck" && !strings.Contains(s.Error, want) {
			t.Errorf("kubernetes:stuck source error = %q, want %q", s.Error, want)
		}
		if s.Name == "files" && (!strings.Contains(s.Error, fifo) || !strings.Contains(s.Error, "bomb.jks: JKS keystore: malformed")) {
			t.Errorf("files source error = %q, want %q and bomb.jks refused as malformed", s.Error, fifo)
		}
	}
}

// TestScanSIGTERMDuringHungSource: `certwatch scan` stuck on a Kubernetes
// source (its deadline and its request timeout an hour away) exits at once on SIGTERM, non-zero,
// saying it was interrupted.
func TestScanSIGTERMDuringHungSource(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	cfg, kube := hungSourceConfig(t, "1h", "")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			before := len(kube.Requests())
			cmd := exec.Command(bin, "scan", "--config", cfg)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-done
			})
			waitListing(t, kube, before)

			sent := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
				done <- nil // for the cleanup
			case <-time.After(30 * time.Second):
				t.Fatalf("certwatch scan has not exited 30s after %v", sig)
			}
			t.Logf("certwatch scan exited %v after %v", time.Since(sent), sig)
			if took := time.Since(sent); took > 5*time.Second {
				t.Errorf("scan exited %v after %v, want at once", took, sig)
			}
			code := cmd.ProcessState.ExitCode()
			if code == cli.ExitOK || code == -1 || !strings.Contains(stderr.String(), "certwatch: scan interrupted during discovery") {
				t.Errorf("exit code %d, stderr %q; want a non-zero exit saying the scan was interrupted", code, stderr.String())
			}
		})
	}
}

// TestRunHungSource: `certwatch run` whose Kubernetes source waits for an
// API server that never answers, beside a files source whose glob matches
// a FIFO, probes the static target once the source's deadline (2s) has
// passed, publishes its expiry, and reports both sources as degraded (the
// report's findings, /metrics, a note on /readyz); /readyz is ready, the
// static target's inventory being probed. SIGTERM, with the API server still silent, ends
// the process within the grace period.
func TestRunHungSource(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	cfg, kube := hungSourceConfig(t, "2s", fmt.Sprintf(`notify:
  state: %q
daemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1h"
    probe: "@every 1h"
  jitter: 100ms
  grace_period: 3s
`, filepath.Join(dir, "state.db")))
	start := time.Now()
	p := startRun(t, bin, cfg)
	base := "http://" + p.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)

	p.waitLog(t, "first probe run", 1, msg("probe run finished"))
	t.Logf("first probe run finished %v after start", time.Since(start))
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("first probe run finished %v after start, want about the 2s deadline", took)
	}
	_, body := httpGet(t, base+"/api/v1/report")
	var r scanReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, body)
	}
	const want = "did not finish within its deadline of 2s (discovery_timeout) and was abandoned"
	const fifo = "not a regular file (named pipe)"
	var expiring, kubeDegraded, filesDegraded bool
	for _, f := range r.Findings {
		expiring = expiring || f.Kind == "expiring" && f.Tier == "page"
		kubeDegraded = kubeDegraded || f.Kind == "discovery_degraded" && f.Name == "kubernetes:stuck" && strings.Contains(f.Message, want)
		filesDegraded = filesDegraded || f.Kind == "discovery_degraded" && f.Name == "files" && strings.Contains(f.Message, fifo)
	}
	if !expiring || !kubeDegraded || !filesDegraded {
		t.Errorf("findings = %+v; want the static target's certificate expiring at page, kubernetes:stuck discovery_degraded saying %q and files discovery_degraded saying %q", r.Findings, want, fifo)
	}
	if code, body := httpGet(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d %q, want 200: the static target's inventory is probed", code, body)
	} else if !strings.Contains(body, "note: discovery source kubernetes:stuck is degraded") || !strings.Contains(body, want) ||
		!strings.Contains(body, "note: discovery source files is degraded") || !strings.Contains(body, fifo) {
		t.Errorf("/readyz = %q, want a note for each degraded source, saying why", body)
	}
	for _, series := range []string{`certwatch_findings{kind="discovery_degraded",tier="warning"}`, `certwatch_job_runs_total{daemon_job="discovery",result="error"}`} {
		if v := metric(t, base, series); v < 1 {
			t.Errorf("%s = %v, want at least 1", series, v)
		}
	}

	if n := len(kube.Requests()); n == 0 {
		t.Fatal("the API server was never asked")
	}
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := p.waitExit(t)
	t.Logf("certwatch run exited %v after SIGTERM", time.Since(sent))
	if took := time.Since(sent); took > 3*time.Second+2*time.Second {
		t.Errorf("certwatch run exited %v after SIGTERM, want within the 3s grace period", took)
	}
	if code != 0 {
		t.Errorf("exit code = %d after SIGTERM, want 0", code)
	}
}

// TestScanEverySourceFailedEscapes: the stderr line of a scan whose every
// source failed quotes a file name holding control characters (a screen
// clear, a right-to-left override) escaped, not as they are.
func TestScanEverySourceFailedEscapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	evil := filepath.Join(dir, "\x1b[2Jok\u202egnp.pem")
	if err := os.Symlink(filepath.Join(dir, "gone"), evil); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := run(t, "scan", "--file", filepath.Join(dir, "*.pem"))

	if code != cli.ExitUsage {
		t.Errorf("exit code = %d, want %d (every source failed)\nstderr: %q", code, cli.ExitUsage, stderr)
	}
	if strings.ContainsAny(stdout+stderr, "\x1b\u202e") {
		t.Errorf("output holds the file name's control characters as they are:\nstdout %q\nstderr %q", stdout, stderr)
	}
	if !strings.Contains(stderr, "certwatch: every discovery source failed: ") || !strings.Contains(stderr, `\x1b[2Jok\u202egnp.pem`) {
		t.Errorf("stderr = %q, want the every-source-failed line naming the file, escaped", stderr)
	}
}

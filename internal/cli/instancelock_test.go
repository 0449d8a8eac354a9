package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
)

// TestRunInstanceLock: a second `certwatch run` on the SQLite state of a
// running one exits 1 at once, naming the holder (pid, host, since when),
// where both used to run, each probing the whole fleet; so does a
// `scan --notify`, before it probes anything. `certwatch alerts` only
// reads, and works beside the daemon. Once the daemon is gone, the next
// one starts. Real processes: the lock is the kernel's.
func TestRunInstanceLock(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `targets: [%q]
probe: {timeout: 1s, retries: 0}
notify:
  state: %q
  channels: [{name: log, kind: log}]
  routes: [{tiers: [notice, warning, page, critical], channels: [log]}]
daemon:
  listen: 127.0.0.1:0
  schedules: {discovery: "@every 1h", probe: "@every 10m"}
  jitter: 100ms
  grace_period: 2s
`, certtest.RefusingAddr(t, netip.MustParseAddr("127.0.0.1")).String(), state), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startRun(t, bin, cfg)
	first.waitLog(t, "start-up", 1, msg("certwatch running"))
	host, _ := os.Hostname()
	holder := regexp.MustCompile(fmt.Sprintf(`state is locked by another process: held by certwatch run \(pid %d on host %s, since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, \d+s ago\)`,
		first.cmd.Process.Pid, regexp.QuoteMeta(host)))

	for _, args := range [][]string{{"run", "--config", cfg}, {"scan", "--config", cfg, "--notify"}} {
		stdout, stderr, code := runBinary(t, bin, args...)
		if code != 1 || !holder.MatchString(stderr) || !strings.Contains(stderr, state) {
			t.Errorf("certwatch %s beside a running daemon: exit %d, stderr:\n%s\nwant exit 1 naming %s and matching %s", strings.Join(args, " "), code, stderr, state, holder)
		}
		if stdout != "" {
			t.Errorf("certwatch %s beside a running daemon printed (it must stop before probing):\n%s", strings.Join(args, " "), stdout)
		}
	}
	if stdout, stderr, code := runBinary(t, bin, "alerts", "--config", cfg); code != 0 {
		t.Errorf("certwatch alerts beside a running daemon: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}

	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first.waitExit(t); code != 0 {
		t.Fatalf("first daemon exit code %d, want 0", code)
	}
	next := startRun(t, bin, cfg)
	next.waitLog(t, "start-up of the next daemon", 1, msg("certwatch running"))
}

// runBinary runs the certwatch binary to its end, killing it after a
// minute.
func runBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("certwatch %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
)

// TestRunSaysWhatIsMissing starts a daemon with no notification channel
// on a zone with nothing to probe: it says both at start-up, in a log line
// each and as notes on /readyz.
func TestRunSaysWhatIsMissing(t *testing.T) {
	srv, err := dnstest.Start(dnstest.Zone{Name: "empty.example", Text: "@ TXT \"nothing here\"\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	dir := t.TempDir()
	listen := freeAddr(t)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `zones:
  - name: empty.example
    nameserver: %s
notify:
  state: %q
daemon:
  listen: %s
  schedules: {discovery: "@every 1h", probe: "@every 10m"}
  jitter: 100ms
  grace_period: 2s
`, srv.Addr(), filepath.Join(dir, "state.db"), listen), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- cli.Run(ctx, []string{"run", "--config", cfg}, io.Discard, &stderr) }()
	waitFor(t, "no-channel warning", &stderr, regexp.MustCompile(`"level":"WARN","msg":"no notification channel configured: findings reach only the status page`))
	waitFor(t, "empty-inventory warning", &stderr, regexp.MustCompile(`"level":"WARN","msg":"first inventory is empty: nothing will be probed until discovery finds targets".*dnszone:empty.example found nothing to probe`))

	resp, err := http.Get("http://" + listen + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"  note: no notification channel: findings are not sent anywhere (notify.channels)\n",
		"  note: the inventory is empty: dnszone:empty.example found nothing to probe\n",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /readyz = %d %q, want the note %q", resp.StatusCode, body, want)
		}
	}
	cancel()
	if err := <-done; cli.ExitCode(err) != 0 {
		t.Errorf("run exited with %v; stderr:\n%s", err, stderr.String())
	}
}

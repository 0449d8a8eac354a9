package cli_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/slacktest"
)

// TestScanNotifySlackTokenSharesLimits: two channels configured by name
// on one bot token. Each one's first post is answered 429, so its retry
// first looks for the post (by channel ID: conversations.list), and the
// first conversations.list is answered 429 with Retry-After. The channel
// that did not get it waits too instead of calling inside the window, and
// one lookup resolves both names.
func TestScanNotifySlackTokenSharesLimits(t *testing.T) {
	t.Parallel()
	now := time.Now()
	self := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: []string{"printer.example"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 6, 0)})
	s, err := certtest.Serve("127.0.0.1:0", self.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sl := slacktest.New(t, slackToken, "#certs", "#incidents")
	var mu sync.Mutex
	posted := map[string]bool{}
	var listUntil time.Time
	listLimited, violations, lookups := false, 0, 0
	sl.SetHook(func(c slacktest.Call) (slacktest.Response, bool) {
		mu.Lock()
		defer mu.Unlock()
		limited := slacktest.Response{Status: 429, RetryAfter: "1"}
		switch c.Method {
		case "chat.postMessage":
			if !posted[c.Channel] {
				posted[c.Channel] = true
				return limited, true
			}
		case "conversations.list":
			switch {
			case time.Now().Before(listUntil):
				violations++
				return limited, true
			case !listLimited:
				listLimited, listUntil = true, time.Now().Add(time.Second)
				return limited, true
			}
			lookups++
		}
		return slacktest.Response{}, false
	})
	dir := t.TempDir()
	token := filepath.Join(dir, "slack-token")
	if err := os.WriteFile(token, []byte(slackToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `targets: [%q]
notify:
  state: %q
  channels:
    - name: certs
      kind: slack
      slack: {channel: "#certs", token_file: %q, api_url: %q}
    - name: incidents
      kind: slack
      slack: {channel: "#incidents", token_file: %q, api_url: %q}
  routes:
    - tiers: [page, critical]
      channels: [certs, incidents]
`, s.Addr().String(), filepath.Join(dir, "state.db"), token, sl.URL(), token, sl.URL()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, "scan", "--config", cfg, "--notify", "--notify-timeout", "30s")
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	for _, ch := range []string{"#certs", "#incidents"} {
		if len(sl.TopLevel(ch)) == 0 {
			t.Errorf("nothing posted to %s", ch)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if violations != 0 || lookups != 1 {
		t.Errorf("%d conversations.list calls inside its Retry-After window and %d lookups answered, want 0 and 1 (the token's channels share the limit and the lookup)", violations, lookups)
	}
}

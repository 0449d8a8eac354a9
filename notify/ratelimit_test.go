package notify_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state/sqlite"
)

// slackStorm is a Slack under load, in real time: each channel's first
// chat.postMessage is answered 429 (Retry-After: 1, Slack's per-channel
// limit), and conversations.list, which Slack limits per workspace, is
// answered 429 (Retry-After: 1) the first time it is called outside a
// window. A call inside a window it opened is a violation.
type slackStorm struct {
	mu          sync.Mutex
	postUntil   map[string]time.Time
	listUntil   time.Time
	listLimited int
	violations  map[string]int
	lookups     int
}

func (s *slackStorm) hook(c slacktest.Call) (slacktest.Response, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	limited := slacktest.Response{Status: 429, RetryAfter: "1"}
	switch c.Method {
	case "chat.postMessage":
		until, seen := s.postUntil[c.Channel]
		switch {
		case now.Before(until):
			s.violations["chat.postMessage "+c.Channel]++
			return limited, true
		case !seen:
			s.postUntil[c.Channel] = now.Add(time.Second)
			return limited, true
		}
	case "conversations.list":
		switch {
		case now.Before(s.listUntil):
			s.violations["conversations.list"]++
			return limited, true
		case s.listLimited < 1:
			s.listLimited++
			s.listUntil = now.Add(time.Second)
			return limited, true
		}
		s.lookups++
	}
	return slacktest.Response{}, false
}

// TestSlackWorkspaceRateLimitIsShared: two channels on one bot token,
// configured by name, in a 429 storm. A Retry-After on conversations.list
// (limited per workspace) holds every channel of the token, not only the
// one that got it, and one lookup resolves both names, kept for every
// later attempt. chat.postMessage keeps its per-channel limit.
func TestSlackWorkspaceRateLimitIsShared(t *testing.T) {
	t.Parallel()
	const findings = 30
	api := slacktest.New(t, slackToken, "#certs", "#incidents")
	storm := &slackStorm{postUntil: map[string]time.Time{}, violations: map[string]int{}}
	api.SetHook(storm.hook)
	cfg := notify.Config{
		Channels: []notify.Channel{
			{Name: "certs", Rate: 1000, Burst: 1000},
			{Name: "incidents", Rate: 1000, Burst: 1000},
		},
		Routes: []notify.Route{{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs", "incidents"}}},
		Storm:  notify.Storm{MaxNewFindings: findings},
		Retry:  notify.Retry{Initial: 50 * time.Millisecond, Max: 5 * time.Second, AlertAfter: time.Hour},
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var shared []*slack.Sender
	senders := map[string]notify.Sender{}
	for _, c := range cfg.Channels {
		s, err := slack.New(slack.Config{Name: c.Name, Channel: "#" + c.Name, Token: slackToken, APIURL: api.URL()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		shared = append(shared, s)
		senders[c.Name] = s
	}
	slack.Share(shared...)
	n, err := notify.New(cfg, store, senders, nil)
	if err != nil {
		t.Fatal(err)
	}
	var fs []policy.Finding
	for i := range findings {
		fs = append(fs, warning(fmt.Sprintf("w%03d.example.com", i)))
	}
	if _, err := n.Apply(context.Background(), notify.Sweep{Findings: fs}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	for _, ch := range []string{"#certs", "#incidents"} {
		if got := len(api.TopLevel(ch)); got != findings {
			t.Errorf("%s has %d messages, want %d, each once", ch, got, findings)
		}
	}
	storm.mu.Lock()
	defer storm.mu.Unlock()
	t.Logf("violations %v, lookups %d, conversations.list answered 429 %d times", storm.violations, storm.lookups, storm.listLimited)
	for what, v := range storm.violations {
		t.Errorf("%d %s calls inside a Retry-After window, want 0", v, what)
	}
	if storm.lookups != 1 {
		t.Errorf("%d conversations.list lookups answered for one bot token, want 1 (one resolves every configured name)", storm.lookups)
	}
}

package slack_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/policy"
)

// sharedSenders are Senders for the given channels of api, on one bot
// token, shared, on the clock *clock.
func sharedSenders(t *testing.T, api *slacktest.Server, clock *time.Time, mu *sync.Mutex, channels ...string) []*slack.Sender {
	t.Helper()
	var out []*slack.Sender
	for _, ch := range channels {
		c := slack.Config{Name: strings.TrimPrefix(ch, "#"), Channel: ch, Token: token, APIURL: api.URL()}
		s, err := slack.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return *clock }
		out = append(out, s)
	}
	slack.Share(out...)
	return out
}

func count(api *slacktest.Server, method string) int {
	n := 0
	for _, c := range api.Calls() {
		if c.Method == method {
			n++
		}
	}
	return n
}

// TestShareHoldsWorkspaceLimits: a 429 Retry-After got by one channel,
// on any method, holds every request of the bot token, on every channel,
// until it ends (answered at once, without a call); one conversations.list
// then resolves every configured name, and the IDs are kept.
func TestShareHoldsWorkspaceLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := slacktest.New(t, token, "#certs", "#incidents", "#other")
	var mu sync.Mutex
	clock := now
	limit := map[string]string{} // method -> channel name that gets one 429
	api.SetHook(func(c slacktest.Call) (slacktest.Response, bool) {
		for m, ch := range limit {
			if c.Method == m && (ch == "" || c.Channel == ch) {
				delete(limit, m)
				return slacktest.Response{Status: 429, RetryAfter: "30"}, true
			}
		}
		return slacktest.Response{}, false
	})
	ss := sharedSenders(t, api, &clock, &mu, "#certs", "#incidents")
	certs, incidents := ss[0], ss[1]
	find := func(s *slack.Sender) error {
		_, _, err := s.Find(ctx, notify.Notification{Event: notify.EventNew, Marker: "m", Intended: now})
		return err
	}

	limit["conversations.list"] = ""
	if d, ok := notify.RetryDelay(find(certs)); !ok || d != 30*time.Second {
		t.Fatalf("Find on certs after a 429 = delay %v %v, want the Retry-After, 30s", d, ok)
	}
	mu.Lock()
	clock = clock.Add(10 * time.Second)
	mu.Unlock()
	err := find(incidents)
	if d, ok := notify.RetryDelay(err); !ok || d != 20*time.Second || !strings.Contains(err.Error(), "429 on conversations.list for channel certs") {
		t.Errorf("Find on incidents 10s into certs' Retry-After = %v (delay %v), want the 20s left, naming certs' 429", err, d)
	}
	if n := count(api, "conversations.list"); n != 1 {
		t.Errorf("%d conversations.list calls, want 1 (the held channel does not call)", n)
	}

	mu.Lock()
	clock = clock.Add(20 * time.Second)
	mu.Unlock()
	for _, s := range []*slack.Sender{incidents, certs, incidents, certs} {
		if err := find(s); err != nil {
			t.Fatalf("Find after the Retry-After = %v", err)
		}
	}
	if n := count(api, "conversations.list"); n != 2 {
		t.Errorf("%d conversations.list calls, want 2: the 429 and one lookup for both names", n)
	}
	for _, c := range api.Calls() {
		if c.Method == "conversations.history" && c.Channel != api.ChannelID("#certs") && c.Channel != api.ChannelID("#incidents") {
			t.Errorf("conversations.history of %q, want a channel ID", c.Channel)
		}
	}

	// A 429 on chat.postMessage holds every channel and method of the
	// token too: Slack's answer does not say which limit it is about.
	f := wildcard(policy.Warning, 1)
	ref, err := incidents.Send(ctx, notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
	if err != nil {
		t.Fatalf("post to incidents = %v", err)
	}
	limit["chat.postMessage"] = "#certs"
	if _, err := certs.Send(ctx, notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f}); err == nil {
		t.Fatal("post with a 429 = nil")
	}
	before := len(api.Calls())
	if _, err := incidents.Send(ctx, notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f}); err == nil {
		t.Error("incidents' post inside certs' Retry-After = nil, want held")
	} else if d, ok := notify.RetryDelay(err); !ok || d != 30*time.Second {
		t.Errorf("incidents' post inside certs' Retry-After = %v, want a Retry-After of 30s", err)
	}
	up := notify.Notification{Event: notify.EventResolved, At: now, Key: f.ID(), Finding: f, Ref: ref, Reason: "replaced"}
	if _, err := incidents.Send(ctx, up); err == nil {
		t.Error("incidents' chat.update inside certs' Retry-After = nil, want held")
	}
	if n := len(api.Calls()) - before; n != 0 {
		t.Errorf("%d calls inside the Retry-After, want 0", n)
	}
	mu.Lock()
	clock = clock.Add(30 * time.Second)
	mu.Unlock()

	// A 429 on chat.update holds it for both.
	limit["chat.update"] = ""
	if _, err := incidents.Send(ctx, up); err == nil {
		t.Fatal("update with a 429 = nil")
	}
	before = count(api, "chat.update")
	if _, err := certs.Send(ctx, up); err == nil {
		t.Error("certs' chat.update inside incidents' Retry-After = nil, want held")
	} else if _, ok := notify.RetryDelay(err); !ok {
		t.Errorf("certs' chat.update inside the Retry-After = %v, want a Retry-After", err)
	}
	if n := count(api, "chat.update") - before; n != 0 {
		t.Errorf("%d chat.update calls inside the Retry-After, want 0", n)
	}
}

// TestShareIsPerToken: senders on another bot token, or another API URL,
// do not share a workspace.
func TestShareIsPerToken(t *testing.T) {
	t.Parallel()
	api := slacktest.New(t, token, "#certs", "#incidents")
	api.SetHook(func(c slacktest.Call) (slacktest.Response, bool) {
		return slacktest.Response{Status: 429, RetryAfter: "30"}, c.Method == "conversations.list"
	})
	mk := func(ch string, tok string) *slack.Sender {
		c := slack.Config{Name: strings.TrimPrefix(ch, "#"), Channel: ch, Token: tok, APIURL: api.URL()}
		s, err := slack.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := mk("#certs", token), mk("#incidents", "xoxb-another-workspace")
	slack.Share(a, b)
	for _, s := range []*slack.Sender{a, b} {
		s.Find(context.Background(), notify.Notification{Event: notify.EventNew, Marker: "m", Intended: now})
	}
	if n := count(api, "conversations.list"); n != 2 {
		t.Errorf("%d conversations.list calls, want 2: a 429 on one token holds nothing on another", n)
	}
}

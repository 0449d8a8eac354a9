package slack_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/policy"
)

// windowedSlack answers every request of the token, whatever its method
// and channel, and now and then gives a Retry-After window: it records
// when each request arrived and every window it gave, and counts requests
// that arrived inside one.
type windowedSlack struct {
	every int // a window on every every-th request outside one

	mu       sync.Mutex
	served   int
	windows  []window
	inside   []string
	requests int
}

type window struct {
	from, to time.Time
	method   string
	channel  string
}

func (ws *windowedSlack) hook(c slacktest.Call) (slacktest.Response, bool) {
	at := time.Now()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.requests++
	limited := slacktest.Response{Status: 429, RetryAfter: "1"}
	for _, w := range ws.windows {
		if !at.Before(w.from) && at.Before(w.to) {
			ws.inside = append(ws.inside, fmt.Sprintf("%s %s %v into the window given to %s %s",
				c.Method, c.Channel, at.Sub(w.from).Round(time.Millisecond), w.method, w.channel))
			return limited, true
		}
	}
	ws.served++
	if ws.served%ws.every == 0 {
		ws.windows = append(ws.windows, window{from: at, to: at.Add(time.Second), method: c.Method, channel: c.Channel})
		return limited, true
	}
	return slacktest.Response{}, false
}

// deliver sends ns through s one after another as the dispatcher's worker
// for a channel does: after a failure it waits what Slack asked for (or a
// moment), then looks for the message (Find) before sending again.
func deliver(ctx context.Context, t *testing.T, s *slack.Sender, ns []notify.Notification) error {
	ref := ""
	for _, n := range ns {
		if n.Event == notify.EventResolved {
			n.Ref = ref
		}
		n.Intended = time.Now()
		failed := false
		for attempt := 0; ; attempt++ {
			if attempt > 50 {
				return fmt.Errorf("%s: not delivered after 50 attempts", n.Key)
			}
			var err error
			found := false
			got := ""
			if failed {
				got, found, err = s.Find(ctx, n)
			}
			if err == nil && !found {
				got, err = s.Send(ctx, n)
			}
			if err == nil {
				if n.Event == notify.EventNew {
					ref = got
				}
				break
			}
			failed = true
			d, ok := notify.RetryDelay(err)
			if !ok {
				return fmt.Errorf("%s: %v, want only Retry-After failures", n.Key, err)
			}
			wait := time.NewTimer(d)
			select {
			case <-ctx.Done():
				wait.Stop()
				return ctx.Err()
			case <-wait.C:
			}
		}
	}
	return nil
}

// TestRetryAfterHoldsTheToken: two channels configured by name on one bot
// token deliver a storm (new findings and their resolutions: posts,
// edits, replies, and the lookups of a retry) while Slack gives the token
// a Retry-After window now and then. Not one request of either channel,
// on any method, reaches Slack inside a window it gave: the window is the
// token's, and is checked right before each request, including the first
// one after a wait another channel's 429 lengthened.
func TestRetryAfterHoldsTheToken(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := slacktest.New(t, token, "#certs", "#incidents")
	fake := &windowedSlack{every: 12}
	api.SetHook(fake.hook)
	var senders []*slack.Sender
	for _, ch := range []string{"#certs", "#incidents"} {
		c := slack.Config{Name: strings.TrimPrefix(ch, "#"), Channel: ch, Token: token, APIURL: api.URL()}
		s, err := slack.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		senders = append(senders, s)
	}
	slack.Share(senders...)

	const findings = 12
	var wg sync.WaitGroup
	errs := make([]error, len(senders))
	for i, s := range senders {
		var ns []notify.Notification
		for j := range findings {
			f := wildcard(policy.Warning, 1)
			f.Name = fmt.Sprintf("svc-%02d.example", j)
			key := fmt.Sprintf("%s-%02d", f.ID(), j)
			ns = append(ns,
				notify.Notification{Event: notify.EventNew, At: now, Key: key, Finding: f, Marker: fmt.Sprintf("new-%d-%d", i, j)},
				notify.Notification{Event: notify.EventResolved, At: now, Key: key, Finding: f, Marker: fmt.Sprintf("res-%d-%d", i, j), Reason: "replaced"})
		}
		wg.Go(func() { errs[i] = deliver(ctx, t, s, ns) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("channel %d: %v", i, err)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	t.Logf("%d requests, %d Retry-After windows given", fake.requests, len(fake.windows))
	if len(fake.windows) < 3 {
		t.Errorf("%d windows given, want at least 3 for the test to mean anything", len(fake.windows))
	}
	if len(fake.inside) > 0 {
		t.Errorf("%d requests inside a Retry-After window Slack gave the token, want 0:\n%s", len(fake.inside), strings.Join(fake.inside, "\n"))
	}
	for _, ch := range []string{"#certs", "#incidents"} {
		if got := len(api.TopLevel(ch)); got != findings {
			t.Errorf("%d top-level messages in %s, want %d (each finding posted once)", got, ch, findings)
		}
	}
}

package slack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/policy"
)

var _ notify.Finder = (*slack.Sender)(nil)

// TestFind: a message posted with a marker is found by it, through the
// real slack-go client reading conversations.history and .replies (with
// metadata) from the fake; others' markers, and messages older than the
// intent, are not.
func TestFind(t *testing.T) {
	ctx := context.Background()
	api := slacktest.New(t, token, "#certs")
	clock := now
	api.SetClock(func() time.Time { return clock })
	s := newSender(t, api)
	f := wildcard(policy.Warning, 2)
	key := f.ID()

	n := notify.Notification{Event: notify.EventNew, Channel: "certs", At: now, Key: key, Finding: f, Since: now, Marker: "m-new"}
	ref, err := s.Send(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	// Many messages from others since, over more than one page.
	for i := range 250 {
		clock = clock.Add(time.Second)
		if _, err := s.Send(ctx, notify.Notification{Event: notify.EventNew, Channel: "certs", At: clock, Key: key, Finding: f, Since: now, Marker: "other-" + strings.Repeat("x", i%3)}); err != nil {
			t.Fatal(err)
		}
	}
	got, found, err := s.Find(ctx, notify.Notification{Event: notify.EventNew, Key: key, Marker: "m-new", Intended: now})
	if err != nil || !found || got != ref {
		t.Errorf("Find(m-new) = %q, %v, %v; want %q, found", got, found, err, ref)
	}
	if _, found, err := s.Find(ctx, notify.Notification{Event: notify.EventNew, Key: key, Marker: "m-never", Intended: now}); err != nil || found {
		t.Errorf("Find(m-never) = found %v, %v; want not found", found, err)
	}
	// An intent recorded well after the message (beyond the skew allowed
	// for clocks) does not look that far back.
	if _, found, err := s.Find(ctx, notify.Notification{Event: notify.EventNew, Key: key, Marker: "m-new", Intended: now.Add(slack.FindSkew + time.Minute)}); err != nil || found {
		t.Errorf("Find(m-new, intended after it) = found %v, %v; want not found", found, err)
	}

	// A resolution replies in the thread (not broadcast, so not in the
	// channel's history): found among the replies.
	res := notify.Notification{Event: notify.EventResolved, Channel: "certs", At: clock, Key: key, Finding: f, Since: now, Reason: "certificate replaced", Ref: ref, Marker: "m-res"}
	if _, err := s.Send(ctx, res); err != nil {
		t.Fatal(err)
	}
	res.Intended = clock
	if got, found, err := s.Find(ctx, res); err != nil || !found || got != ref {
		t.Errorf("Find(resolution) = %q, %v, %v; want the thread's ref %q", got, found, err, ref)
	}
	var reads []string
	for _, c := range api.Calls() {
		if strings.HasPrefix(c.Method, "conversations.") {
			if !c.IncludeAllMetadata && c.Method != "conversations.list" {
				t.Errorf("%s without include_all_metadata", c.Method)
			}
			reads = append(reads, c.Method)
		}
	}
	// The channel ID came from the first post's answer: no
	// conversations.list.
	want := "conversations.history conversations.history conversations.history conversations.history conversations.history conversations.replies"
	if strings.Join(reads, " ") != want {
		t.Errorf("reads = %q, want %q", strings.Join(reads, " "), want)
	}
}

// TestFindRefusals: a token without the history scope cannot find; the
// error says which scope and is one the dispatcher posts again after,
// rather than holding the notification.
func TestFindRefusals(t *testing.T) {
	api := slacktest.New(t, token, "#certs")
	api.SetHook(func(c slacktest.Call) (slacktest.Response, bool) {
		return slacktest.Response{Error: "missing_scope"}, strings.HasPrefix(c.Method, "conversations.")
	})
	s := newSender(t, api)
	_, found, err := s.Find(context.Background(), notify.Notification{Event: notify.EventNew, Marker: "m", Intended: now})
	if found || err == nil || !(notify.IsChannelDown(err) || notify.IsPermanent(err)) || !strings.Contains(err.Error(), "missing_scope") {
		t.Errorf("Find with missing_scope = found %v, %v; want a refusal naming missing_scope", found, err)
	}
}

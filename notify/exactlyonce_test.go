package notify_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/state"
)

var _ notify.Finder = (*slack.Sender)(nil)

// intendingStore is a store whose process dies once Slack has accepted a
// post, before the delivery is recorded: the outcome is lost, as in a
// crash. It keeps the store's delivery intents, as any wrapper must.
type intendingStore struct {
	state.Outbox
	crash bool
	kill  context.CancelFunc
}

func (s *intendingStore) Settle(ctx context.Context, ids []int64, st state.Settlement) error {
	if s.crash && st.Delivered {
		s.kill()
		return errors.New("process killed")
	}
	return s.Outbox.Settle(ctx, ids, st)
}

// marker returns the certwatch marker of a message's metadata.
func marker(m slacktest.Message) string {
	if m.Metadata == nil || m.Metadata.EventType != slack.MetadataEventType {
		return ""
	}
	s, _ := m.Metadata.EventPayload["marker"].(string)
	return s
}

// TestEndToEndCrashAfterSlackAcceptedPostsOnce: certwatch dies after
// Slack accepted chat.postMessage and before the delivery was recorded.
// chat.postMessage has no idempotency key, so the next process finds the
// message by the marker in its metadata (conversations.history) instead of
// posting it again, adopts its ts, and the later escalation lands in its
// thread.
func TestEndToEndCrashAfterSlackAcceptedPostsOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.slack.SetClock(w.clock.Now)
	c := cert{subject: "db.internal.example", notAfter: t0.Add(12 * day), eps: eps("db.internal.example")}

	ctx, kill := context.WithCancel(context.Background())
	defer kill()
	w.wrap = func(s state.Outbox) state.Outbox {
		return &intendingStore{Outbox: s, crash: true, kill: kill}
	}
	w.start()
	if _, err := w.n.Apply(ctx, sweep(t0, c), t0); err != nil {
		t.Fatal(err)
	}
	_ = w.n.Flush(ctx) // dies once Slack accepted the post
	w.stop()
	w.wrap = func(s state.Outbox) state.Outbox { return &intendingStore{Outbox: s} }

	posted := w.slack.TopLevel("#certs")
	if len(posted) != 1 || marker(posted[0]) == "" {
		t.Fatalf("#certs after the crash = %q (metadata %+v), want the one warning, carrying a marker", texts(posted), posted)
	}

	// The next run, an hour later: found, not posted again.
	w.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), c))
	top := w.slack.TopLevel("#certs")
	equalLines(t, "#certs after the restart", texts(top), texts(posted))
	var history []slacktest.Call
	for _, call := range w.slack.Calls() {
		if call.Method == "conversations.history" {
			history = append(history, call)
		}
	}
	if len(history) != 1 || !history[0].IncludeAllMetadata || history[0].Channel != w.slack.ChannelID("#certs") {
		t.Fatalf("conversations.history calls = %+v, want one, by channel ID, with include_all_metadata", history)
	}
	if want := t0.Add(-slack.FindSkew); history[0].Oldest != slackTS(want) {
		t.Errorf("conversations.history oldest = %s, want %s (the intent, less the allowed skew)", history[0].Oldest, slackTS(want))
	}
	if !strings.Contains(w.logs.String(), "not posting it again") {
		t.Errorf("log does not say the message was found:\n%s", w.logs.String())
	}

	// Two days later the finding is a page: the escalation is a reply in
	// the thread of the adopted message, whose header is edited.
	at := t0.Add(5*day + time.Hour)
	w.run(at, sweep(at, c))
	top = w.slack.TopLevel("#certs")
	if len(top) != 2 || top[0].TS != posted[0].TS || !strings.HasPrefix(top[1].Text, "PAGE (was warning)") || top[1].ThreadTS != posted[0].TS {
		t.Fatalf("#certs after the escalation = %q, want the original and its escalation broadcast from its thread", texts(top))
	}
	thread := w.slack.Thread("#certs", posted[0].TS)
	if len(thread) != 1 || marker(thread[0]) == "" || marker(thread[0]) == marker(posted[0]) {
		t.Errorf("thread = %+v, want the escalation, with a marker of its own", thread)
	}
	if top[0].Edits != 1 {
		t.Errorf("original edited %d times, want once (header shows the page)", top[0].Edits)
	}
}

// TestEndToEndCrashBeforeSlackAcceptedPostsOnce: the process dies after
// recording its intent and before Slack received anything; the next one
// looks, finds nothing, and posts the message, once.
func TestEndToEndCrashBeforeSlackAcceptedPostsOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.slack.SetClock(w.clock.Now)
	c := cert{subject: "db.internal.example", notAfter: t0.Add(12 * day), eps: eps("db.internal.example")}
	w.wrap = func(s state.Outbox) state.Outbox { return &intendingStore{Outbox: s} }
	// Slack answers 503 to the first process's post: the intent was
	// recorded before the attempt; then the process stops.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.slack.SetHook(func(c slacktest.Call) (slacktest.Response, bool) {
		if c.Method != "chat.postMessage" {
			return slacktest.Response{}, false
		}
		cancel()
		return slacktest.Response{Status: 503}, true
	})
	w.start()
	if _, err := w.n.Apply(context.Background(), sweep(t0, c), t0); err != nil {
		t.Fatal(err)
	}
	_ = w.n.Flush(ctx)
	w.stop()
	if got := len(w.slack.TopLevel("#certs")); got != 0 {
		t.Fatalf("#certs has %d messages after 503s, want none", got)
	}
	w.slack.SetHook(nil)
	w.run(t0.Add(time.Hour), sweep(t0.Add(time.Hour), c))
	top := w.slack.TopLevel("#certs")
	if len(top) != 1 || marker(top[0]) == "" {
		t.Fatalf("#certs = %q, want the warning, once, with its marker", texts(top))
	}
	var methods []string
	for _, call := range w.slack.Calls() {
		if call.Channel == "#certs" || call.Channel == w.slack.ChannelID("#certs") || call.Method == "conversations.list" {
			methods = append(methods, call.Method)
		}
	}
	if len(methods) < 3 || strings.Join(methods[len(methods)-2:], " ") != "conversations.history chat.postMessage" {
		t.Errorf("Slack calls = %q, want the post to follow a look at the history", methods)
	}
}

func slackTS(t time.Time) string { return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000) }

// TestEndToEndCrashAfterSlackAcceptedDigestPostsOnce: the same for a
// digest, one message for several outbox rows: found once for all of
// them, and not posted again.
func TestEndToEndCrashAfterSlackAcceptedDigestPostsOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.slack.SetClock(w.clock.Now)
	a := cert{subject: "a.internal.example", notAfter: t0.Add(30 * day), eps: eps("a.internal.example")}
	b := cert{subject: "b.internal.example", notAfter: t0.Add(29 * day), eps: eps("b.internal.example")}

	ctx, kill := context.WithCancel(context.Background())
	defer kill()
	w.wrap = func(s state.Outbox) state.Outbox {
		return &intendingStore{Outbox: s, crash: true, kill: kill}
	}
	w.start()
	if _, err := w.n.Apply(ctx, sweep(t0, a, b), t0); err != nil {
		t.Fatal(err)
	}
	w.clock.Set(t0.Add(19 * time.Hour)) // past the daily digest time
	_ = w.n.Flush(ctx)                  // dies once Slack accepted the digest
	w.stop()
	w.wrap = func(s state.Outbox) state.Outbox { return &intendingStore{Outbox: s} }

	posted := w.slack.TopLevel("#certs")
	if len(posted) != 1 || !strings.HasPrefix(posted[0].Text, "certwatch digest: 2 items") || marker(posted[0]) == "" {
		t.Fatalf("#certs after the crash = %q, want the digest of both notices, with a marker", texts(posted))
	}
	at := t0.Add(20 * time.Hour)
	w.run(at, sweep(at, a, b))
	equalLines(t, "#certs after the restart", texts(w.slack.TopLevel("#certs")), texts(posted))
	w.start()
	stats, err := w.store.OutboxStats(context.Background())
	w.stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		if s.Channel == "certs" && (s.Pending != 0 || s.Delivered != 2) {
			t.Errorf("#certs outbox: %d pending, %d delivered; want the digest's 2 rows delivered", s.Pending, s.Delivered)
		}
	}
}

package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/certwatch/certwatch/notify"
)

// Find looks for the message about n that carries n.Marker in its
// metadata, posted since n.Intended less FindSkew: a reply in the thread
// of n.Ref for an update (conversations.replies), else a message in the
// channel (conversations.history, which also lists broadcast replies). It
// returns the reference Send would have returned: n.Ref for a reply, the
// message's "channel:ts" otherwise. Errors are classified as Send's are;
// a history longer than Find reads is a permanent error (the caller posts
// again rather than never).
func (s *Sender) Find(ctx context.Context, n notify.Notification) (string, bool, error) {
	if n.Marker == "" {
		return "", false, nil
	}
	oldest := ""
	if !n.Intended.IsZero() {
		oldest = slackTS(n.Intended.Add(-FindSkew))
	}
	switch n.Event {
	case notify.EventEscalated, notify.EventReminder, notify.EventResolved:
		if channel, ts, ok := strings.Cut(n.Ref, ":"); ok {
			found, err := s.findReply(ctx, channel, ts, oldest, n.Marker)
			if err != nil {
				return "", false, err
			}
			if found {
				return n.Ref, true, nil
			}
			// The original may have been deleted, and the update posted
			// as a new message: look in the channel too.
		}
	}
	channel, err := s.channelIDOf(ctx)
	if err != nil {
		return "", false, err
	}
	ts, found, err := s.findInHistory(ctx, channel, oldest, n.Marker)
	if err != nil || !found {
		return "", false, err
	}
	return channel + ":" + ts, true, nil
}

// classifyRead is classify for the reads Find makes, whose missing scope
// is not chat:write's.
func classifyRead(ctx context.Context, op string, err error, scope string) error {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "missing_scope" {
		return notify.Permanent(fmt.Errorf("%s: missing_scope: the bot token needs %s to check whether a message was posted before a crash", op, scope))
	}
	return classify(ctx, op, err)
}

// slackTS formats t as a Slack ts (seconds and microseconds).
func slackTS(t time.Time) string {
	return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

func carries(m slack.Message, marker string) bool {
	md := m.Metadata
	return md.EventType == MetadataEventType && md.EventPayload["marker"] == marker
}

// findReply looks for marker among the replies to channel's message ts.
// A thread that is gone holds nothing.
func (s *Sender) findReply(ctx context.Context, channel, ts, oldest, marker string) (bool, error) {
	op := fmt.Sprintf("slack %s conversations.replies %s", s.name, s.channel)
	cursor := ""
	for range findPages {
		var msgs []slack.Message
		var more, gone bool
		var next string
		err := s.call(ctx, op, "conversations.replies", func(ctx context.Context) error {
			var err error
			msgs, more, next, err = s.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: channel, Timestamp: ts, Oldest: oldest, Cursor: cursor, Limit: 200, IncludeAllMetadata: true,
			})
			var se slack.SlackErrorResponse
			if errors.As(err, &se) && se.Err == "thread_not_found" {
				gone = true
				return nil
			}
			if err != nil {
				return classifyRead(ctx, op, err, "channels:history (groups:history for a private channel)")
			}
			return nil
		})
		if err != nil || gone {
			return false, err
		}
		for _, m := range msgs {
			if m.ThreadTimestamp == ts && m.Timestamp != ts && carries(m, marker) {
				return true, nil
			}
		}
		if !more || next == "" {
			return false, nil
		}
		cursor = next
	}
	return false, notify.Permanent(fmt.Errorf("%s: the thread has more than %d replies since the attempt; not read to the end", op, findPages*200))
}

// findInHistory looks for marker in channel's history since oldest and
// returns the message's ts.
func (s *Sender) findInHistory(ctx context.Context, channel, oldest, marker string) (string, bool, error) {
	op := fmt.Sprintf("slack %s conversations.history %s", s.name, s.channel)
	cursor := ""
	for range findPages {
		var resp *slack.GetConversationHistoryResponse
		err := s.call(ctx, op, "conversations.history", func(ctx context.Context) error {
			var err error
			resp, err = s.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: channel, Oldest: oldest, Cursor: cursor, Limit: 200, IncludeAllMetadata: true,
			})
			if err != nil {
				return classifyRead(ctx, op, err, "channels:history (groups:history for a private channel)")
			}
			return nil
		})
		if err != nil {
			return "", false, err
		}
		for _, m := range resp.Messages {
			if carries(m, marker) {
				return m.Timestamp, true, nil
			}
		}
		if !resp.HasMore || resp.ResponseMetaData.NextCursor == "" {
			return "", false, nil
		}
		cursor = resp.ResponseMetaData.NextCursor
	}
	return "", false, notify.Permanent(fmt.Errorf("%s: more than %d messages since the attempt; not read to the end", op, findPages*200))
}

// channelIDOf returns the configured channel's ID, which the read methods
// need: the configured value when it is one, else the one a post answered
// with or a lookup found, kept for every Sender of the bot token (see
// Share). A lookup walks conversations.list once for every name the
// token's Senders are configured with; concurrent callers wait for it
// rather than calling too.
func (s *Sender) channelIDOf(ctx context.Context) (string, error) {
	name, ok := channelName(s.channel)
	if !ok {
		return s.channel, nil
	}
	if id := s.ws.id(name); id != "" {
		return id, nil
	}
	op := fmt.Sprintf("slack %s conversations.list %s", s.name, s.channel)
	select {
	case s.ws.lookup <- struct{}{}:
		defer func() { <-s.ws.lookup }()
	case <-ctx.Done():
		if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
			return "", fmt.Errorf("%s: waiting for another channel's lookup: %w", op, cause)
		}
		return "", ctx.Err()
	}
	// The lookup this one waited for may have found it.
	if id := s.ws.id(name); id != "" {
		return id, nil
	}
	cursor := ""
	for range findPages {
		var chans []slack.Channel
		var next string
		err := s.call(ctx, op, "conversations.list", func(ctx context.Context) error {
			var err error
			chans, next, err = s.api.GetConversationsContext(ctx, &slack.GetConversationsParameters{
				Cursor: cursor, ExcludeArchived: true, Limit: 1000, Types: []string{"public_channel", "private_channel"},
			})
			if err != nil {
				return classifyRead(ctx, op, err, "channels:read (groups:read for a private channel), or configure the channel by its ID")
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		if s.ws.found(chans) {
			break
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if id := s.ws.id(name); id != "" {
		return id, nil
	}
	return "", notify.Permanent(fmt.Errorf("%s: no channel named %s is visible to the bot; configure the channel by its ID", op, name))
}

// id returns the ID of the channel called name, "" while unknown.
func (w *workspace) id(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ids[name]
}

// found records the IDs of the token's channel names among chans, and
// reports whether every name's ID is now known.
func (w *workspace) found(chans []slack.Channel) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range chans {
		if w.names[c.Name] {
			w.ids[c.Name] = c.ID
		}
	}
	for name := range w.names {
		if w.ids[name] == "" {
			return false
		}
	}
	return true
}

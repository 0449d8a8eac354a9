// Package slack posts notifications to a Slack channel with a bot token,
// through github.com/slack-go/slack.
//
// Each finding gets one message (Block Kit: tier, deadline and days left,
// kind, subject, certificate, what to do, blast radius, runbook link). Later
// updates go into that message's thread, and the original's header is
// edited (chat.update) to show the current tier or that it was resolved, so
// the channel shows one line per problem in its current state. Digests and
// storm summaries are single messages. A 429 answer is returned with its
// Retry-After for the dispatcher to honour; refusals of the token, app or
// channel (invalid_auth, not_in_channel, ...) are marked notify.ChannelDown
// with a hint, and refusals of one message notify.Permanent.
//
// chat.postMessage has no idempotency key, so every message carries the
// marker the dispatcher recorded before posting it, in its message
// metadata (event type certwatch_notification, payload marker, key and
// event), and Find looks for it with conversations.history (and, for a
// reply, conversations.replies) after an attempt whose outcome was lost:
// a message Slack accepted just before certwatch crashed is adopted, with
// its ts, instead of being posted twice. Reading history needs the bot
// token's channels:history scope (groups:history for a private channel),
// and finding a channel configured by name its channels:read (groups:read).
//
// A Retry-After Slack gives is honoured for the whole bot token: Senders
// on one token (see Share) send no request, on any method and to any
// channel, while a window one of them was given lasts. They send one
// request at a time, and check the window right before each, so that a
// window Slack gives one request is known before the next is sent. They
// also share the channel IDs one conversations.list found for all their
// names.
//
// The HTTP client follows no redirect (the token is in every request) and
// reads at most MaxAnswerBytes of an answer.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/certwatch/certwatch/notify"
)

// DefaultTimeout bounds one API request.
const DefaultTimeout = 10 * time.Second

// MaxAnswerBytes caps how much of one Web API answer is read: a longer
// one fails the call (retried; a post that Slack took is then found by
// its marker). The largest answers certwatch asks for, a page of 200
// messages of history or of 1,000 channels, stay well below it.
const MaxAnswerBytes = 8 << 20

// Sender posts to one Slack channel. Set the exported fields before first
// use. It is safe for concurrent use.
type Sender struct {
	// RunbookURL, when set, is linked from every finding message.
	RunbookURL string

	// Now is the clock a Retry-After is counted on; nil means time.Now.
	Now func() time.Time

	name    string
	channel string
	token   string
	apiURL  string
	api     *slack.Client
	timeout time.Duration
	// ws is what Slack applies to the bot token as a whole, shared with
	// the token's other Senders (see Share).
	ws *workspace
}

// workspace is what the Senders of one bot token share. Slack limits
// most Web API methods per workspace (and app) and chat.postMessage per
// channel, and says which limit a 429 is about only in prose; a 429 on
// any request holds every request of the token until its Retry-After
// ends, so that no request is sent inside a window Slack gave. It also
// keeps the channel IDs of the names the Senders are configured with, so
// that one conversations.list resolves every name, once.
type workspace struct {
	// lookup is held by the one conversations.list walk in flight.
	lookup chan struct{}
	// calling is held by the token's one request in flight, from the
	// check of the window to the recording of the answer's Retry-After:
	// a request sent alongside another could reach Slack after the
	// other's 429 opened a window.
	calling chan struct{}

	// mu guards the fields below.
	mu sync.Mutex
	// names are the channel names (without "#") of the token's Senders.
	names map[string]bool
	// ids maps a channel name to its ID, once a post or a lookup told it.
	ids map[string]string
	// until is when the latest Retry-After Slack gave the token ends,
	// and which request got it.
	until pause
}

type pause struct {
	end     time.Time
	method  string
	channel string
}

func newWorkspace() *workspace {
	return &workspace{lookup: make(chan struct{}, 1), calling: make(chan struct{}, 1), names: map[string]bool{}, ids: map[string]string{}}
}

// Share makes the Senders that post with the same bot token to the same
// Web API URL share what Slack applies to the token as a whole: a 429
// Retry-After on any request holds every request of all of them (every
// method, every channel) until it ends, where each would otherwise find
// the limit by calling again inside it; they send one request at a time;
// and the channel IDs of their names, which one conversations.list finds
// for all of them, are kept. Call it once, with every Slack
// Sender, before the first Send or Find; a Sender never shared has a
// workspace of its own.
func Share(senders ...*Sender) {
	type key struct{ token, apiURL string }
	shared := map[key]*workspace{}
	for _, s := range senders {
		k := key{s.token, s.apiURL}
		ws := shared[k]
		if ws == nil {
			ws = newWorkspace()
			shared[k] = ws
		}
		if name, ok := channelName(s.channel); ok {
			ws.names[name] = true
		}
		s.ws = ws
	}
}

// channelName is the name a channel is configured by, without "#", and
// false when it is configured by its ID.
func channelName(channel string) (string, bool) {
	if channelIDPattern.MatchString(channel) {
		return "", false
	}
	return strings.TrimPrefix(channel, "#"), true
}

func (s *Sender) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// call makes one request for method, op naming it in errors. It waits
// for the token's request in flight (or ctx), then fails with a
// notify.RetryAfter error, without calling Slack, while a window Slack
// gave the token lasts. Otherwise it runs request with a context bounded
// by the Sender's timeout and records the Retry-After of a 429 it met for
// every Sender of the token. request makes the call and classifies its
// error (classify turns a 429 into a notify.RetryAfter error).
func (s *Sender) call(ctx context.Context, op, method string, request func(ctx context.Context) error) error {
	select {
	case s.ws.calling <- struct{}{}:
		defer func() { <-s.ws.calling }()
	case <-ctx.Done():
		if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("%s: waiting for another request of the bot token: %w", op, cause)
		}
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if err := s.held(op); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeoutCause(ctx, s.timeout, fmt.Errorf("%s: no answer within %v", op, s.timeout))
	defer cancel()
	err := request(rctx)
	s.limited(method, err)
	return err
}

// held returns a notify.RetryAfter error while a Retry-After Slack gave
// the token lasts.
func (s *Sender) held(op string) error {
	s.ws.mu.Lock()
	p := s.ws.until
	s.ws.mu.Unlock()
	left := p.end.Sub(s.now())
	if left <= 0 {
		return nil
	}
	return notify.RetryAfter(left, fmt.Errorf("%s: rate limited: Slack asked the bot token to wait (429 on %s for channel %s); not called until then", op, p.method, p.channel))
}

// limited records the Retry-After err carries (a 429 on method, as
// classify returns it) for every Sender of the token.
func (s *Sender) limited(method string, err error) {
	d, ok := notify.RetryDelay(err)
	if !ok || d <= 0 {
		return
	}
	end := s.now().Add(min(d, time.Hour))
	s.ws.mu.Lock()
	defer s.ws.mu.Unlock()
	if end.After(s.ws.until.end) {
		s.ws.until = pause{end: end, method: method, channel: s.name}
	}
}

// MetadataEventType is the event_type of the metadata every message
// certwatch posts carries.
const MetadataEventType = "certwatch_notification"

// FindSkew is how much earlier than the recorded intent Find looks, for
// a clock of this host behind Slack's.
const FindSkew = 5 * time.Minute

// findPages bounds how many pages of history (of 200 messages) Find reads.
const findPages = 25

// channelIDPattern matches a Slack conversation ID (public, private,
// direct), as opposed to a name.
var channelIDPattern = regexp.MustCompile(`^[CGD][A-Z0-9]{6,}$`)

// Config is a Slack channel as its Sender needs it: plain values, the
// bot token already read by the caller. It prints and logs without the
// token.
type Config struct {
	// Name is the certwatch channel's name, for errors and shared limits.
	Name string
	// Channel is the Slack channel's name ("#certs") or ID ("C0123456789").
	Channel string
	// Token is the bot token (chat:write scope).
	Token string
	// APIURL is the Web API base URL, ending in "/"; "" means Slack's own.
	APIURL string
	// Timeout bounds one API request; 0 means DefaultTimeout.
	Timeout time.Duration
}

// String describes c without its token.
func (c Config) String() string {
	return fmt.Sprintf("slack channel %s (%s, token <secret>)", c.Name, c.Channel)
}

// GoString is String, so that %#v does not print the token either.
func (c Config) GoString() string { return c.String() }

// LogValue is String, so that a logged Config carries no token.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// New returns a Sender for channel c. client carries every request; nil
// means a plain http.Client (each request is bounded by the channel's
// timeout). The Sender uses a copy of client that follows no redirect (the
// token travels in every request's form body, and a 307 or 308 would post
// it again to wherever the redirect points) and reads at most
// MaxAnswerBytes of an answer (notify.GuardClient).
func New(c Config, client *http.Client) (*Sender, error) {
	if c.Token == "" {
		return nil, fmt.Errorf("slack channel %s: empty bot token (set token_env or token_file)", c.Name)
	}
	opts := []slack.Option{slack.OptionHTTPClient(notify.GuardClient(client, MaxAnswerBytes))}
	if c.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(c.APIURL))
	}
	s := &Sender{
		name:    c.Name,
		channel: c.Channel,
		token:   c.Token,
		apiURL:  c.APIURL,
		api:     slack.New(c.Token, opts...),
		timeout: c.Timeout,
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	Share(s)
	return s, nil
}

// Send delivers n. A new finding, digest, summary or test is posted as a
// message; an escalation, reminder or resolution of a finding already posted
// (n.Ref set) edits the original and replies in its thread, and is posted
// as a new message when there is no original. It returns "channel:ts" of the
// finding's message.
func (s *Sender) Send(ctx context.Context, n notify.Notification) (string, error) {
	switch n.Event {
	case notify.EventDigest:
		return s.post(ctx, n, notify.Headline(n), digestBlocks(n, s.RunbookURL))
	case notify.EventSummary:
		return s.post(ctx, n, notify.Headline(n), summaryBlocks(n, s.RunbookURL))
	case notify.EventTest:
		return s.post(ctx, n, notify.Headline(n), testBlocks(n))
	case notify.EventEscalated, notify.EventReminder, notify.EventResolved:
		if n.Ref != "" {
			return s.update(ctx, n)
		}
	}
	return s.post(ctx, n, notify.Headline(n), findingBlocks(n, s.RunbookURL))
}

// update edits the finding's original message and then replies in its
// thread. The edit goes first because it can be repeated harmlessly: if the
// reply fails, the retry edits again and replies once.
func (s *Sender) update(ctx context.Context, n notify.Notification) (string, error) {
	channel, ts, ok := strings.Cut(n.Ref, ":")
	if !ok {
		return s.post(ctx, n, notify.Headline(n), findingBlocks(n, s.RunbookURL))
	}
	original := n
	if n.Event != notify.EventResolved {
		// The original shows the finding's current state, not "reminder".
		original.Event = notify.EventNew
	}
	err := s.edit(ctx, channel, ts, notify.Headline(original), findingBlocks(original, s.RunbookURL))
	var gone *goneError
	if errors.As(err, &gone) {
		// Someone deleted the original: start over with a new message.
		return s.post(ctx, n, notify.Headline(n), findingBlocks(n, s.RunbookURL))
	}
	if err != nil {
		return "", err
	}
	broadcast := n.Event == notify.EventEscalated || n.Event == notify.EventReminder
	if _, err := s.postTo(ctx, n, channel, ts, broadcast, notify.Headline(n), threadBlocks(n)); err != nil {
		return "", err
	}
	return n.Ref, nil
}

// post posts a top-level message about n to the configured channel.
func (s *Sender) post(ctx context.Context, n notify.Notification, text string, blocks []slack.Block) (string, error) {
	return s.postTo(ctx, n, s.channel, "", false, text, blocks)
}

// postTo posts a message about n, carrying n.Marker in its metadata.
func (s *Sender) postTo(ctx context.Context, n notify.Notification, channel, threadTS string, broadcast bool, text string, blocks []slack.Block) (string, error) {
	marker := n.Marker
	op := fmt.Sprintf("slack %s chat.postMessage %s", s.name, s.channel)
	opts := []slack.MsgOption{
		slack.MsgOptionText(text, false),
		slack.MsgOptionBlocks(blocks...),
		slack.MsgOptionDisableLinkUnfurl(),
	}
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
		if broadcast {
			opts = append(opts, slack.MsgOptionBroadcast())
		}
	}
	if marker != "" {
		opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{
			EventType:    MetadataEventType,
			EventPayload: map[string]any{"marker": marker, "key": n.Key, "event": string(n.Event)},
		}))
	}
	var respChannel, ts string
	err := s.call(ctx, op, "chat.postMessage", func(ctx context.Context) error {
		var err error
		respChannel, ts, err = s.api.PostMessageContext(ctx, channel, opts...)
		if err != nil {
			return classify(ctx, op, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if name, ok := channelName(s.channel); ok && threadTS == "" && respChannel != "" {
		s.ws.mu.Lock()
		s.ws.ids[name] = respChannel
		s.ws.mu.Unlock()
	}
	return respChannel + ":" + ts, nil
}

// goneError: the message to edit no longer exists.
type goneError struct{ err error }

func (e *goneError) Error() string { return e.err.Error() }

func (s *Sender) edit(ctx context.Context, channel, ts, text string, blocks []slack.Block) error {
	op := fmt.Sprintf("slack %s chat.update %s", s.name, s.channel)
	return s.call(ctx, op, "chat.update", func(ctx context.Context) error {
		_, _, _, err := s.api.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...))
		var se slack.SlackErrorResponse
		if errors.As(err, &se) && slices.Contains([]string{"message_not_found", "cant_update_message", "edit_window_closed"}, se.Err) {
			return &goneError{err: fmt.Errorf("%s: %s", op, se.Err)}
		}
		if err != nil {
			return classify(ctx, op, err)
		}
		return nil
	})
}

// retryable are Slack error codes that may succeed on a later attempt.
var retryable = []string{"ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout", "team_added_to_org"}

// channelDown are Slack error codes that refuse every message to the
// channel until an operator fixes the token, the app or the channel: the
// dispatcher holds the channel rather than dropping notifications. Every
// other ok:false answer refuses one message (its payload) for good.
var channelDown = []string{
	"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "no_permission",
	"not_allowed_token_type", "team_access_not_granted", "ekm_access_denied", "access_denied", "org_login_required",
	"not_in_channel", "channel_not_found", "is_archived", "missing_scope", "restricted_action",
}

// hints for errors an operator must fix.
var hints = map[string]string{
	"invalid_auth":     "check the bot token (token_env or token_file)",
	"not_authed":       "check the bot token (token_env or token_file)",
	"token_revoked":    "the bot token was revoked: install the app again and update the token",
	"token_expired":    "the bot token expired: rotate it",
	"account_inactive": "the bot's account is deactivated",
	"channel_not_found": "check the channel name in the configuration, and for a private channel " +
		"invite the bot",
	"not_in_channel":    "invite the bot to the channel (/invite @bot)",
	"is_archived":       "the channel is archived: unarchive it or configure another",
	"missing_scope":     "the bot token needs the chat:write scope",
	"no_permission":     "the bot token lacks a permission: check the app's scopes and installation",
	"msg_too_long":      "the message is too long",
	"invalid_blocks":    "Slack rejected the message layout",
	"restricted_action": "the workspace does not let the bot post in this channel",
}

// classify turns a slack-go error into one the dispatcher understands:
// Retry-After for 429, channel down for refusals of the token or channel
// (and HTTP 401, 403, 404, and a redirect), permanent for refusals of one
// message, retryable otherwise (an answer over MaxAnswerBytes too). The token is never part of slack-go's errors; URLs
// are stripped anyway.
func classify(ctx context.Context, op string, err error) error {
	var redirect *notify.RedirectError
	if errors.As(err, &redirect) {
		// Every call would be redirected alike: hold the channel.
		return notify.ChannelDown(fmt.Errorf("%s: %v: check slack.api_url in the channel's configuration "+
			"(the address Slack's Web API answers at, by default https://slack.com/api/)", op, redirect))
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return notify.RetryAfter(rl.RetryAfter, fmt.Errorf("%s: rate limited", op))
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		se := &notify.StatusError{Op: op, Status: sc.Code}
		switch sc.Code {
		case 401, 403:
			se.Hint = "check the bot token (token_env or token_file)"
		case 404:
			se.Hint = "check slack.api_url in the channel's configuration"
		}
		return notify.Classify(se)
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		if slices.Contains(retryable, se.Err) {
			return fmt.Errorf("%s: %s", op, se.Err)
		}
		refusal := fmt.Errorf("%s: %s", op, se.Err)
		if h, ok := hints[se.Err]; ok {
			refusal = fmt.Errorf("%s: %s: %s", op, se.Err, h)
		}
		if slices.Contains(channelDown, se.Err) {
			return notify.ChannelDown(refusal)
		}
		return notify.Permanent(refusal)
	}
	return notify.TransportError(ctx, op, err)
}

// Package notify decides who hears about which finding, and makes sure they
// hear it exactly once per step of urgency.
//
// After each evaluation, Apply compares the findings with the alert state in
// the store (a state.Outbox): a new finding at a notified tier is announced,
// a finding that moves up a tier is announced again, one that stays is quiet
// (apart from reminders), and one that is gone for a number of consecutive
// runs, or whose certificate was replaced, is resolved. Each transition is
// routed to channels by tier and match rules, and written to the outbox in
// the same transaction that updates the state, so a crash can never lose or
// repeat a transition. A run with too many notifications for a channel sends
// it one summary instead; on a channel that keeps incidents open (PagerDuty)
// the summary is an incident of its own, resolved in the first run in which
// no open alert is known there only through it.
//
// The dispatcher (Run, Flush) delivers the outbox through one Sender per
// channel, in order per channel, with exponential backoff and full jitter,
// honouring a service's Retry-After, and at most at the channel's rate. A
// notification that cannot be delivered stays in the outbox across restarts
// until it is; a channel that keeps failing is reported on every other
// channel. The store (a state.Outbox) leases each channel to one process at
// a time, so processes sharing a state never send the same notification
// twice, and fences a replica that no longer leads, so it delivers nothing.
// For a channel without idempotency keys (a Sender that is a Finder, Slack),
// a marker is recorded in the store before each attempt and carried by the
// message, and an attempt whose outcome was lost (a crash, a takeover) is
// looked for before it is posted again.
//
// A silence (state.Silence, kept in the store or declared in the
// configuration) keeps the findings it matches from being announced, up to
// a tier, until it ends; they are announced as they stand then, through
// the same outbox (see silence.go).
//
// Senders sort failures three ways. Retryable (network errors, 408, 429,
// 5xx): retried with backoff. Refusals of one notification (Permanent: a
// payload the service rejects, such as Slack's invalid_blocks or
// msg_too_long, or a PagerDuty 400 about the event): that notification is
// marked failed, the rest go on. Refusals of the whole channel (ChannelDown:
// Slack's invalid_auth, not_authed, account_inactive, token_revoked,
// not_in_channel, channel_not_found, is_archived, missing_scope; HTTP 401,
// 403 and 404; a PagerDuty 400 about the routing key): nothing is dropped;
// the channel is held, its notifications stay pending and are tried again
// every retry.max, the other channels are told at once that it is failing,
// and the refusal, which says what to fix, is logged at Error level once
// per change. Once an operator fixes the channel, everything held goes out
// in order and the channel_failing alert resolves.
//
// A channel whose service forgets an open alert unless told again
// (Alertmanager: a Sender that is a Refresher) also has its open alerts
// posted again every RefreshEvery, from the alert state and outside the
// outbox, by the process that holds its delivery lease.
//
// Channels live in sub-packages (notify/slack, notify/pagerduty,
// notify/alertmanager, notify/webhook); LogSender writes notifications to
// the log.
package notify

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/state"
)

// Event names what a notification announces.
type Event string

// Events.
const (
	// EventNew announces a finding to a channel for the first time.
	EventNew Event = "new"
	// EventEscalated announces that a finding moved up a tier.
	EventEscalated Event = "escalated"
	// EventReminder re-announces an unresolved finding.
	EventReminder Event = "reminder"
	// EventResolved says a finding is gone: the certificate was replaced or
	// the problem has not been seen for several runs.
	EventResolved Event = "resolved"
	// EventDigest bundles a channel's digest items (Items).
	EventDigest Event = "digest"
	// EventSummary replaces many notifications of one run with one
	// (Items holds the most urgent, Total counts all).
	EventSummary Event = "summary"
	// EventTest is `certwatch notify test`.
	EventTest Event = "test"
)

// AlertID is the identity of a finding's alert: its ID (policy.Finding.ID),
// the one every view shows. An expired certificate shares it with its
// expiry, so its alert continues and expiry does not page anew.
func AlertID(f policy.Finding) string {
	return f.ID()
}

// Notification is one message for one channel. It is stored in the outbox as
// JSON and handed to the channel's Sender.
type Notification struct {
	Event   Event     `json:"event"`
	Channel string    `json:"channel"`
	At      time.Time `json:"at"`
	// Key identifies what the notification is about across messages: the
	// alert ID (a finding's ID) or, for a summary, the run. PagerDuty derives
	// its dedup_key from it.
	Key string `json:"key"`
	// Finding is the finding as of At, for per-finding events.
	Finding policy.Finding `json:"finding,omitzero"`
	// Since is when the alert was first raised.
	Since time.Time `json:"since,omitzero"`
	// Issuer is the certificate's issuer, when the run saw it.
	Issuer string `json:"issuer,omitempty"`
	// Previous is, for EventEscalated, the tier the channel was last told.
	Previous policy.Tier `json:"previous,omitempty"`
	// Told is, for EventReminder and EventResolved, the tier the channel
	// was last told of the alert (its Finding may since stand lower), so
	// that a channel keying alerts by tier (Alertmanager's severity label)
	// reminds or resolves the one it has; 0 in notifications written
	// before it was recorded.
	Told policy.Tier `json:"told,omitempty"`
	// Labels are the finding's routing labels (zone, target and Route 53
	// labels) at the time of the transition.
	Labels map[string]string `json:"labels,omitempty"`
	// Reason says why: the resolution ("certificate replaced by ..."), or
	// what caused a summary.
	Reason string `json:"reason,omitempty"`
	// Items are the notifications a digest or summary stands for.
	Items []Notification `json:"items,omitempty"`
	// Total is, for a summary, how many notifications it stands for.
	Total int `json:"total,omitempty"`
	// Ref is the reference the channel's sender returned when it first
	// posted about Key, empty if none; set at delivery, never stored in the
	// payload.
	Ref string `json:"-"`
	// Marker is, for a sender that is a Finder, the unique marker the
	// message must carry, recorded in the store before the attempt; "" for
	// other senders. Intended is, when set, when an earlier attempt that
	// may have posted the message began (see Finder). Both are set at
	// delivery, never stored in the payload.
	Marker   string    `json:"-"`
	Intended time.Time `json:"-"`
	// DeliveryKey identifies this delivery across attempts, restarts and
	// processes sharing the state: it is derived from the outbox rows it
	// delivers (their channel, IDs and creation times), so every attempt
	// to deliver one transition carries the same key and no other
	// transition does. A webhook sends it as its idempotency key. "" when
	// the notification does not come from the outbox (a test message, a
	// Refresher's re-send). Set at delivery, never stored in the payload.
	DeliveryKey string `json:"-"`
}

// DeliveryKey is the key of a delivery of the outbox rows rows (one
// notification, or the rows of one digest): hex SHA-256 of their
// channel, IDs and creation times, 32 characters.
func DeliveryKey(rows []state.Outbound) string {
	h := sha256.New()
	for i, r := range rows {
		if i == 0 {
			fmt.Fprintf(h, "certwatch outbox\n%s\n", r.Channel)
		}
		fmt.Fprintf(h, "%d %d\n", r.ID, r.Created.UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Sender delivers notifications to one channel.
//
// Send returns a reference to the message it posted (for Slack, the channel
// and ts, so later updates can go in its thread), or "" when there is
// nothing to refer back to. Errors retrying cannot fix are marked with
// Permanent; a service's requested delay is carried by RetryAfter. Send must
// be safe to call again with the same notification after a failure.
//
// A Sender may also have a capability its service needs, asserted by the
// dispatcher on each channel's Sender: Refresher (a service that forgets
// an alert not posted again) and Finder (a service with no idempotency
// key). assemble checks at compile time that each channel implementing
// one still does.
type Sender interface {
	Send(ctx context.Context, n Notification) (ref string, err error)
}

// Refresher is a Sender for a service that forgets an open alert unless it
// is told about it again: Alertmanager resolves an alert once its endsAt
// passes. Transitions still go through the outbox (exactly once per
// channel, in order, with retries); besides them, the dispatcher posts
// every alert open on the channel again every RefreshEvery, from the
// alert state, through Refresh.
//
// A re-send is not a transition: it is not written to the outbox, not
// retried before the next one is due (a service's Retry-After puts the
// next one off), and not counted as a delivery. A failed one is counted
// as a retried attempt and marks the channel failing (ChannelHealth,
// certwatch_notify_channel_failing) until a delivery or re-send works; a
// channel that refuses it (ChannelDown), or that keeps failing past
// retry.alert_after, is announced as channel_failing on the other
// channels, as for failed deliveries.
//
// Implemented by notify/alertmanager; asserted by the dispatcher between
// deliveries and by Refresh (refresh.go).
type Refresher interface {
	Sender
	// RefreshEvery is how often the open alerts are posted again.
	RefreshEvery() time.Duration
	// Refresh posts the open alerts notes again, each an EventReminder
	// whose Told is the tier the channel was last told (and whose Labels
	// are the finding's labels now). It must post them as Send posts the
	// alerts of their transitions, so that the service folds both into
	// one alert.
	Refresh(ctx context.Context, notes []Notification) error
}

// Finder is a Sender for a service that has no idempotency key (Slack's
// chat.postMessage has none), so that a crash between the service
// accepting a message and the outcome being recorded would post it twice.
// With a Finder, the dispatcher records a unique
// marker before each attempt and hands it to Send in Notification.Marker,
// which the message must carry. An attempt that follows one whose outcome
// is unknown (a crash, a takeover by another process, a lost answer) first
// calls Find, and when the message is there it is recorded as delivered
// instead of being posted again. Implemented by notify/slack; asserted by
// the dispatcher before each attempt (intent.go).
type Finder interface {
	// Find looks for the message of n (carrying n.Marker) posted since
	// n.Intended, and returns the reference Send would have returned for
	// it and true when it is there. An error that IsPermanent or
	// IsChannelDown says the service cannot be asked (a missing scope): n
	// is then posted again. Other errors are retried.
	Find(ctx context.Context, n Notification) (ref string, found bool, err error)
}

// Notifier turns findings into notifications and delivers them. Create it
// with New and set the exported fields before first use. Apply may be
// called while Run is running; Run and Flush must not run at the same time.
type Notifier struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// After waits for a duration, as time.After does; tests replace it to
	// drive time. nil means time.After.
	After func(time.Duration) <-chan time.Time
	// Rand returns a number in [0, 1) for backoff jitter; nil means
	// math/rand/v2.
	Rand func() float64
	// Labels returns a finding's labels for routes that match on labels;
	// nil means findings carry none.
	Labels func(policy.Finding) map[string]string
	// Silences are silences besides those in the store: the ones the
	// configuration file declares (silences:). Apply honours both.
	Silences []state.Silence
	// SendTimeout bounds one delivery attempt; 0 means 30s.
	SendTimeout time.Duration
	// Poll is how often Run looks for notifications written by another
	// process; 0 means 30s.
	Poll time.Duration

	cfg   Config
	store state.Outbox
	// holder names this Notifier in delivery leases.
	holder    string
	logger    *slog.Logger
	router    router
	reminders map[policy.Tier]time.Duration
	workers   []*worker
	byName    map[string]*worker
	// queued counts notifications the dispatcher itself queued (channel
	// failure alerts), so Flush knows to go round again.
	queued atomic.Int64
	// written is what Apply last wrote of each certificate.
	written *written

	// startMu guards started: whether the first Run or Flush has dealt
	// with channels removed from the configuration.
	startMu sync.Mutex
	started bool
}

// Default rates per channel kind, deliveries per second.
const (
	DefaultSlackRate     = 1
	DefaultPagerDutyRate = 2
	// DefaultHTTPRate is for Alertmanager and webhook channels, services
	// of the operator's own.
	DefaultHTTPRate = 10
	DefaultBurst    = 5
)

// New returns a Notifier for cfg (defaults are applied to zero values),
// keeping state in store and delivering through senders, which must have
// one Sender per configured channel, by channel name. logger receives
// delivery problems and one line per Apply; nil discards.
//
// store is the whole delivery contract (state.Outbox), not a part found by
// type assertion: a store wrapped for metrics or retries must carry its
// leases, intents and fence along to be accepted, so that none is lost
// silently.
func New(cfg Config, store state.Outbox, senders map[string]Sender, logger *slog.Logger) (*Notifier, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("notify config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r, err := newRouter(cfg.Routes)
	if err != nil {
		return nil, err
	}
	n := &Notifier{
		cfg:       cfg,
		store:     store,
		holder:    crand.Text(),
		logger:    logger,
		router:    r,
		reminders: cfg.Reminders,
		byName:    map[string]*worker{},
		written:   newWritten(),
	}
	for _, c := range cfg.Channels {
		s, ok := senders[c.Name]
		if !ok || s == nil {
			return nil, fmt.Errorf("notify: channel %s has no sender", c.Name)
		}
		w := &worker{name: c.Name, sender: s, limiter: newLimiter(c), wake: make(chan struct{}, 1)}
		n.workers = append(n.workers, w)
		n.byName[c.Name] = w
	}
	for name := range senders {
		if _, ok := n.byName[name]; !ok {
			return nil, fmt.Errorf("notify: sender for %s, which is not a configured channel", name)
		}
	}
	return n, nil
}

// newLimiter returns the limiter of channel c: its rate and burst, no cap
// for a zero rate.
func newLimiter(c Channel) *rate.Limiter {
	if c.Rate == 0 {
		return rate.NewLimiter(rate.Inf, 1)
	}
	b := c.Burst
	if b == 0 {
		b = DefaultBurst
	}
	return rate.NewLimiter(rate.Limit(c.Rate), b)
}

func (n *Notifier) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

func (n *Notifier) after(d time.Duration) <-chan time.Time {
	if n.After != nil {
		return n.After(d)
	}
	return time.After(d)
}

func (n *Notifier) rand() float64 {
	if n.Rand != nil {
		return n.Rand()
	}
	return rand.Float64()
}

// Channels returns the configured channel names, in configuration order.
func (n *Notifier) Channels() []string {
	names := make([]string, len(n.workers))
	for i, w := range n.workers {
		names[i] = w.name
	}
	return names
}

// Test sends a test message to the named channel at once, bypassing the
// outbox, and returns the sender's error.
func (n *Notifier) Test(ctx context.Context, channel string) error {
	w, ok := n.byName[channel]
	if !ok {
		return fmt.Errorf("notify test: no channel named %q (configured: %v)", channel, n.Channels())
	}
	ctx, cancel := context.WithTimeout(ctx, n.sendTimeout())
	defer cancel()
	if _, err := w.sender.Send(ctx, TestNotification(channel, n.now())); err != nil {
		return fmt.Errorf("notify test %s: %w", channel, err)
	}
	return nil
}

// TestNotification is the test message for channel at time at, as Test
// sends it; a caller with only that channel's Sender can send it directly.
func TestNotification(channel string, at time.Time) Notification {
	return Notification{
		Event: EventTest, Channel: channel, At: at, Key: "test:" + channel,
		Reason: "certwatch test message: if you can read this, channel " + channel + " works.",
	}
}

func (n *Notifier) sendTimeout() time.Duration {
	if n.SendTimeout > 0 {
		return n.SendTimeout
	}
	return 30 * time.Second
}

func (n *Notifier) poll() time.Duration {
	if n.Poll > 0 {
		return n.Poll
	}
	return 30 * time.Second
}

// ChannelHealth is the dispatcher's view of one channel.
type ChannelHealth struct {
	Channel string `json:"channel"`
	// FailingSince is when the current run of failed deliveries started,
	// zero while the channel works.
	FailingSince time.Time `json:"failing_since,omitzero"`
	// LastError is the latest delivery error, cleared on success.
	LastError string `json:"last_error,omitempty"`
	// Delivered, Retried and Refused count attempts since start: delivered
	// messages (a digest counts once), failed attempts that will be retried,
	// and notifications refused for good.
	Delivered uint64 `json:"delivered"`
	Retried   uint64 `json:"retried"`
	Refused   uint64 `json:"refused"`
}

// Health returns the delivery health of every channel, for metrics and the
// status page. It is safe to call at any time.
func (n *Notifier) Health() []ChannelHealth {
	out := make([]ChannelHealth, 0, len(n.workers))
	for _, w := range n.workers {
		w.mu.Lock()
		out = append(out, w.health)
		w.mu.Unlock()
		out[len(out)-1].Channel = w.name
	}
	return out
}

// worker delivers one channel's outbox.
type worker struct {
	name    string
	sender  Sender
	limiter *rate.Limiter
	wake    chan struct{}

	mu     sync.Mutex
	health ChannelHealth
	// raised: whether a channel_failing alert is open for this channel;
	// unknown until checked after start.
	raised raisedState
	// unrecorded is an attempt's outcome the store failed to record; it is
	// recorded before anything else is sent.
	unrecorded *settlement
	// leased is set while this worker may hold the channel's delivery
	// lease; only the worker's goroutine uses it.
	leased bool
	// waiting is set while another process holds the channel's delivery
	// lease and this worker has said it waits; only the worker's goroutine
	// uses it.
	waiting bool
	// downErr is the refusal last logged while the channel is down, so
	// that it is logged once, not at every attempt; only the worker's
	// goroutine uses it.
	downErr string
	// nextRefresh is when a Refresher's open alerts are due to be posted
	// again (zero: at once); only the worker's goroutine uses it.
	nextRefresh time.Time
}

type settlement struct {
	ids []int64
	s   state.Settlement
}

type raisedState int

const (
	raisedUnknown raisedState = iota
	raisedNo
	raisedYes
)

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

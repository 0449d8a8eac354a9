package notify

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/certwatch/certwatch/policy"
)

// Config is what a Notifier needs of the configuration: plain values that
// its caller (internal/cli) builds from the checked configuration file.
// A zero value means the default documented on the field.
type Config struct {
	// Channels are the places notifications go, each with a unique name.
	Channels []Channel
	// Routes send findings of given tiers to channels. For a finding and a
	// tier, the routes with a match that selects the finding win; when
	// none does, the routes without one apply.
	Routes []Route
	// Reminders re-announce an unresolved finding after this long at the
	// same tier; 0 never reminds. A tier left out keeps its default
	// (DefaultReminders).
	Reminders map[policy.Tier]time.Duration
	// ResolveAfter is how many consecutive runs a finding must be absent
	// before it resolves; 0 means DefaultResolveAfter.
	ResolveAfter int
	// DigestInterval is how often digest routes deliver, aligned to UTC;
	// 0 means DefaultDigestInterval.
	DigestInterval time.Duration
	// Storm limits the messages one run produces.
	Storm Storm
	// Retry tunes delivery retries.
	Retry Retry
}

// Channel is one destination, as the dispatcher needs it.
type Channel struct {
	// Name is how routes refer to the channel.
	Name string
	// Rate caps deliveries to the channel per second, retries included;
	// 0 means no cap (see DefaultSlackRate and the others for each kind's).
	Rate float64
	// Burst is how many deliveries may go out at once before Rate
	// applies; 0 means DefaultBurst.
	Burst int
	// KeepsIncidents says the channel keeps what it is sent open until it
	// is resolved (PagerDuty, Alertmanager), so that a storm summary sent
	// there is resolved too.
	KeepsIncidents bool
}

// Route sends findings at some tiers to some channels.
type Route struct {
	// Tiers the route applies to: notice, warning, page or critical.
	Tiers []policy.Tier
	// Channels are channel names.
	Channels []string
	// Digest collects the route's notifications into one message per
	// channel every DigestInterval.
	Digest bool
	// Zones, Names and Labels, when any is set, limit the route to the
	// findings they all select, and such routes override the routes
	// without them. Zones match a finding with an endpoint name in the
	// zone; Names are globs ("*" spans dots) matched against endpoint
	// names, the subject and, for name findings, the name; Labels must all
	// be on the finding with these values.
	Zones  []string
	Names  []string
	Labels map[string]string
}

// Storm limits the messages one run produces: past MaxNewFindings new
// findings, or MaxFailureShare of the endpoints failing at once, each
// channel gets one summary of the Top most urgent items instead.
type Storm struct {
	// MaxNewFindings is the most new findings announced one by one in a
	// run; 0 means DefaultStormMaxNew.
	MaxNewFindings int
	// MaxFailureShare is the share of probed endpoints (0 to 1) that may
	// fail in one run before it is treated as an outage; 0 means
	// DefaultStormFailureShare.
	MaxFailureShare float64
	// Top is how many items a summary lists; 0 means DefaultStormTop.
	Top int
}

// Retry tunes delivery: exponential backoff from Initial to Max with full
// jitter, or the delay a service asks for.
type Retry struct {
	// Initial is the first backoff ceiling; 0 means DefaultRetryInitial.
	Initial time.Duration
	// Max caps one backoff, and is how often a channel the service
	// refuses is tried again; 0 means DefaultRetryMax.
	Max time.Duration
	// AlertAfter is how long a channel may fail to deliver before it is
	// reported as failing on every other channel; 0 means
	// DefaultRetryAlertAfter.
	AlertAfter time.Duration
}

// Defaults of Config's zero values.
const (
	DefaultResolveAfter      = 2
	DefaultDigestInterval    = 24 * time.Hour
	DefaultStormMaxNew       = 20
	DefaultStormFailureShare = 0.5
	DefaultStormTop          = 10
	DefaultRetryInitial      = 2 * time.Second
	DefaultRetryMax          = 5 * time.Minute
	DefaultRetryAlertAfter   = 15 * time.Minute
)

// DefaultReminders are the reminder intervals per tier: notices weekly (in
// the digest), warnings daily, pages and critical never (PagerDuty
// escalates).
func DefaultReminders() map[policy.Tier]time.Duration {
	return map[policy.Tier]time.Duration{
		policy.Notice:   7 * 24 * time.Hour,
		policy.Warning:  24 * time.Hour,
		policy.Page:     0,
		policy.Critical: 0,
	}
}

// withDefaults returns c with every zero value replaced by its default.
func (c Config) withDefaults() Config {
	reminders := DefaultReminders()
	maps.Copy(reminders, c.Reminders)
	c.Reminders = reminders
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	if c.ResolveAfter == 0 {
		c.ResolveAfter = DefaultResolveAfter
	}
	set(&c.DigestInterval, DefaultDigestInterval)
	if c.Storm.MaxNewFindings == 0 {
		c.Storm.MaxNewFindings = DefaultStormMaxNew
	}
	if c.Storm.MaxFailureShare == 0 {
		c.Storm.MaxFailureShare = DefaultStormFailureShare
	}
	if c.Storm.Top == 0 {
		c.Storm.Top = DefaultStormTop
	}
	set(&c.Retry.Initial, DefaultRetryInitial)
	set(&c.Retry.Max, DefaultRetryMax)
	set(&c.Retry.AlertAfter, DefaultRetryAlertAfter)
	return c
}

// check reports what would make a Notifier on c misbehave; the checked
// configuration file never has it.
func (c Config) check() error {
	var errs []error
	names := map[string]bool{}
	for _, ch := range c.Channels {
		if ch.Name == "" || names[ch.Name] {
			errs = append(errs, fmt.Errorf("channel %q: empty or listed twice", ch.Name))
		}
		names[ch.Name] = true
		if ch.Rate < 0 || ch.Burst < 0 {
			errs = append(errs, fmt.Errorf("channel %s: rate and burst must not be negative", ch.Name))
		}
	}
	for i, r := range c.Routes {
		for _, t := range r.Tiers {
			if t < policy.Notice || t > policy.Critical {
				errs = append(errs, fmt.Errorf("routes[%d]: tiers: unknown tier %q (want notice, warning, page or critical)", i, t))
			}
		}
		for _, name := range r.Channels {
			if !names[name] {
				errs = append(errs, fmt.Errorf("routes[%d]: channels: no channel named %q", i, name))
			}
		}
	}
	for t, d := range c.Reminders {
		if d < 0 {
			errs = append(errs, fmt.Errorf("reminders: %s: must not be negative, got %v", t, d))
		}
	}
	if c.ResolveAfter < 0 || c.Storm.MaxNewFindings < 0 || c.Storm.Top < 0 || c.Storm.MaxFailureShare < 0 || c.Storm.MaxFailureShare > 1 {
		errs = append(errs, errors.New("resolve_after and storm: must not be negative (max_failure_share at most 1)"))
	}
	if c.Retry.Initial <= 0 || c.Retry.Max < c.Retry.Initial {
		errs = append(errs, fmt.Errorf("retry: max (%v) must not be below initial (%v)", c.Retry.Max, c.Retry.Initial))
	}
	return errors.Join(errs...)
}

package config

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
)

// Notify configures alert state, channels and routing: who hears about a
// finding, at which tier, how often, and where the state that makes every
// announcement happen once is kept.
//
// Without channels and routes nothing is sent; `certwatch scan` notifies
// only with --notify.
type Notify struct {
	// State is the SQLite file holding alert state and the outbox of
	// notifications not yet delivered, or a PostgreSQL URL
	// (postgres://user@host:5432/db?sslmode=verify-full) that several
	// certwatch processes share. A URL never carries the password.
	State string `yaml:"state"`
	// StatePasswordFile and StatePasswordEnv say where the password of a
	// PostgreSQL state is read from (a file, an environment variable);
	// without them libpq's PGPASSWORD and PGPASSFILE apply.
	StatePasswordFile string `yaml:"state_password_file,omitempty"`
	StatePasswordEnv  string `yaml:"state_password_env,omitempty"`
	// Channels are the places notifications go, each with a unique name
	// that routes refer to.
	Channels []Channel `yaml:"channels,omitempty"`
	// Routes send findings of given tiers to channels. For a finding and a
	// tier, the routes whose Match selects the finding win; when none does,
	// the routes without a Match apply.
	Routes []Route `yaml:"routes,omitempty"`
	// Reminders re-announce an unresolved finding after this long at the
	// same tier, per tier name. 0 never reminds (page and critical rely on
	// PagerDuty's own escalation). Tiers left out keep their default.
	Reminders map[string]Duration `yaml:"reminders,omitempty"`
	// ResolveAfter is how many consecutive runs a finding must be absent
	// before it resolves, to ride out a flapping probe. A replaced
	// certificate resolves at once; a run in which every endpoint of the
	// finding failed to answer does not count.
	ResolveAfter int `yaml:"resolve_after"`
	// DigestInterval is how often digest routes deliver, aligned to UTC
	// (24h: once a day just after midnight UTC).
	DigestInterval Duration `yaml:"digest_interval"`
	// FlushTimeout is how long `certwatch scan --notify` waits for the
	// outbox to drain (a dead channel is retried with backoff until then)
	// before it exits 1 and leaves the rest for the next run.
	FlushTimeout Duration `yaml:"flush_timeout"`
	// SendTimeout bounds one delivery attempt of a notification (waiting
	// for the channel's rate, then its requests: a Slack post may first
	// look for an earlier one). A channel's delivery lease lasts this plus
	// 30s, so a process killed while delivering holds its channels that
	// long. It must be at least every channel's own request timeout.
	SendTimeout Duration `yaml:"send_timeout"`
	// RunbookURL, when set, is linked from every finding message.
	RunbookURL string `yaml:"runbook_url,omitempty"`
	// StatusURL, when set, is the address of certwatch's status page as
	// people reach it (https://certwatch.internal.example/): Alertmanager
	// alerts link to it as their generatorURL and webhook bodies carry it.
	StatusURL string `yaml:"status_url,omitempty"`
	// SilenceMax is the longest a silence may last, from when it is added
	// (certwatch silence) or from when the file is loaded (silences:).
	SilenceMax Duration `yaml:"silence_max"`
	// Storm limits the messages one run can produce.
	Storm Storm `yaml:"storm"`
	// Retry tunes delivery retries.
	Retry Retry `yaml:"retry"`
}

// Channel is one destination for notifications.
type Channel struct {
	// Name is how routes refer to the channel, e.g. "certs" or "oncall".
	Name string `yaml:"name"`
	// Kind is slack, pagerduty, alertmanager, webhook or log (a log line
	// per notification).
	Kind string `yaml:"kind"`
	// Slack configures a kind: slack channel.
	Slack *SlackChannel `yaml:"slack,omitempty"`
	// PagerDuty configures a kind: pagerduty channel.
	PagerDuty *PagerDutyChannel `yaml:"pagerduty,omitempty"`
	// Alertmanager configures a kind: alertmanager channel.
	Alertmanager *AlertmanagerChannel `yaml:"alertmanager,omitempty"`
	// Webhook configures a kind: webhook channel.
	Webhook *WebhookChannel `yaml:"webhook,omitempty"`
	// RatePerSecond caps deliveries to this channel, retries included.
	// 0 means the kind's default: 1 for Slack (its per-channel posting
	// limit), 2 for PagerDuty, 10 for Alertmanager and webhooks,
	// unlimited for log.
	RatePerSecond float64 `yaml:"rate_per_second,omitempty"`
	// Burst is how many deliveries may go out at once before the rate
	// applies. 0 means 5.
	Burst int `yaml:"burst,omitempty"`
}

// SlackChannel is a Slack channel posted to with a bot token
// (chat:write scope). The token comes from exactly one of TokenEnv or
// TokenFile, never from the configuration file itself.
type SlackChannel struct {
	// Channel is the channel name ("#certs") or ID ("C0123456789").
	Channel string `yaml:"channel"`
	// TokenEnv is the environment variable holding the bot token.
	TokenEnv string `yaml:"token_env,omitempty"`
	// TokenFile is a file holding the bot token.
	TokenFile string `yaml:"token_file,omitempty"`
	// APIURL overrides the Web API base URL, e.g. for a proxy. It must end
	// in "/". Empty means https://slack.com/api/.
	APIURL string `yaml:"api_url,omitempty"`
	// Timeout bounds one API request. 0 means 10s.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// PagerDutyChannel is a PagerDuty service reached through the Events API
// v2. The integration's routing key comes from exactly one of
// RoutingKeyEnv or RoutingKeyFile, never from the configuration file or a
// flag.
type PagerDutyChannel struct {
	// RoutingKeyEnv is the environment variable holding the routing key.
	RoutingKeyEnv string `yaml:"routing_key_env,omitempty"`
	// RoutingKeyFile is a file holding the routing key.
	RoutingKeyFile string `yaml:"routing_key_file,omitempty"`
	// URL overrides the enqueue endpoint. Empty means
	// https://events.pagerduty.com/v2/enqueue.
	URL string `yaml:"url,omitempty"`
	// Timeout bounds one request. 0 means 10s.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// AlertmanagerChannel is a Prometheus Alertmanager reached through its v2
// API (POST /api/v2/alerts). Alertmanager forgets an alert whose endsAt has
// passed, so certwatch posts every open alert of the channel again every
// ResendInterval with an endsAt EndsAfter ahead, and a resolution with
// endsAt now.
type AlertmanagerChannel struct {
	// URL is Alertmanager's base URL, e.g. http://alertmanager:9093 (a
	// path prefix, as with --web.route-prefix, is kept).
	URL string `yaml:"url"`
	// ResendInterval is how often the open alerts are posted again.
	// 0 means 1m.
	ResendInterval Duration `yaml:"resend_interval,omitempty"`
	// EndsAfter is how far ahead of each post an open alert's endsAt is:
	// how long Alertmanager keeps it firing when certwatch stops posting
	// (stopped, or cut off). It must exceed ResendInterval; 0 means 4 ×
	// ResendInterval.
	EndsAfter Duration `yaml:"ends_after,omitempty"`
	// Timeout bounds one request. 0 means 10s.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// WebhookChannel is an HTTP endpoint of the operator's own that receives
// one signed JSON body per notification (docs/notifications.md, "Webhook").
type WebhookChannel struct {
	// URL is where bodies are posted. It carries no credential: the
	// signature authenticates certwatch.
	URL string `yaml:"url"`
	// SecretEnv and SecretFile say where the HMAC-SHA256 signing secret
	// is read from (set exactly one). The secret is never sent.
	SecretEnv  string `yaml:"secret_env,omitempty"`
	SecretFile string `yaml:"secret_file,omitempty"`
	// Timeout bounds one request. 0 means 10s.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// Alertmanager channel defaults.
const (
	DefaultAlertmanagerResend = time.Minute
	// DefaultAlertmanagerEndsFactor times the resend interval is the
	// default ends_after.
	DefaultAlertmanagerEndsFactor = 4
)

// Resend returns the resend interval and endsAt horizon of a, defaults
// applied.
func (a AlertmanagerChannel) Resend() (every, endsAfter time.Duration) {
	every = time.Duration(a.ResendInterval)
	if every <= 0 {
		every = DefaultAlertmanagerResend
	}
	endsAfter = time.Duration(a.EndsAfter)
	if endsAfter <= 0 {
		endsAfter = DefaultAlertmanagerEndsFactor * every
	}
	return every, endsAfter
}

// Route sends findings at some tiers to some channels.
type Route struct {
	// Tiers the route applies to: notice, warning, page, critical.
	Tiers []policy.Tier `yaml:"tiers" tier:"alert"`
	// Channels are channel names.
	Channels []string `yaml:"channels"`
	// Digest collects the route's notifications into one message per
	// channel every DigestInterval instead of one message each. Not for
	// PagerDuty or Alertmanager channels.
	Digest bool `yaml:"digest,omitempty"`
	// Match, when not empty, limits the route to findings it selects, and
	// such routes override the routes without a Match.
	Match Match `yaml:"match,omitempty"`
}

// Match selects findings. A finding matches when every non-empty field
// does; within a field, any entry may match.
type Match struct {
	// Zones match a finding with an endpoint name in the zone (the apex or
	// below it).
	Zones []string `yaml:"zones,omitempty"`
	// Names are globs ("*" spans dots) matched against endpoint names, the
	// certificate subject and, for name findings, the name.
	Names []string `yaml:"names,omitempty"`
	// Labels must all be present with these values on the finding.
	Labels map[string]string `yaml:"labels,omitempty"`
}

// Empty reports whether m selects every finding.
func (m Match) Empty() bool {
	return len(m.Zones) == 0 && len(m.Names) == 0 && len(m.Labels) == 0
}

// Storm limits the messages one run produces. When a run has more new
// findings than MaxNewFindings, or more than MaxFailureShare of the
// endpoints fail at once (likely a problem on certwatch's side), each
// channel gets one summary of the most urgent items instead.
type Storm struct {
	// MaxNewFindings is the most new findings announced one by one in a
	// run.
	MaxNewFindings int `yaml:"max_new_findings"`
	// MaxFailureShare is the share of probed endpoints (0 to 1) that may
	// fail in one run before it is treated as an outage. While above it,
	// absent findings are not counted towards resolution either, and
	// `certwatch run` does not ping its heartbeat.
	MaxFailureShare float64 `yaml:"max_failure_share"`
	// Top is how many items a summary lists.
	Top int `yaml:"top"`
}

// Retry tunes delivery: exponential backoff from Initial to Max with full
// jitter, or the delay a service asks for (429 Retry-After). A notification
// is retried until delivered or its payload is refused outright; nothing is
// dropped for taking long. A channel the service refuses as a whole (a bad
// token, a bot not in the channel, a wrong routing key) is held and tried
// again every Max until it is fixed, and reported on the other channels at
// once.
type Retry struct {
	// Initial is the first backoff ceiling.
	Initial Duration `yaml:"initial"`
	// Max caps one backoff, and is how often a channel the service refuses
	// is tried again.
	Max Duration `yaml:"max"`
	// AlertAfter is how long a channel may fail to deliver before it is
	// reported as failing on every other channel.
	AlertAfter Duration `yaml:"alert_after"`
}

// Notify defaults.
const (
	DefaultNotifyState       = "certwatch.db"
	DefaultResolveAfter      = 2
	DefaultDigestInterval    = 24 * time.Hour
	DefaultStormMaxNew       = 20
	DefaultStormFailureShare = 0.5
	DefaultStormTop          = 10
	DefaultRetryInitial      = 2 * time.Second
	DefaultRetryMax          = 5 * time.Minute
	DefaultRetryAlertAfter   = 15 * time.Minute
	DefaultFlushTimeout      = 2 * time.Minute
	DefaultSendTimeout       = 30 * time.Second
	// DefaultChannelTimeout bounds one request to a channel whose timeout
	// is unset.
	DefaultChannelTimeout = 10 * time.Second
)

// DefaultReminders are the reminder intervals per tier: notices weekly (in
// the digest), warnings daily, pages and critical never (PagerDuty
// escalates).
func DefaultReminders() map[string]Duration {
	return map[string]Duration{
		"notice":   Duration(7 * 24 * time.Hour),
		"warning":  Duration(24 * time.Hour),
		"page":     0,
		"critical": 0,
	}
}

// Channel kinds.
const (
	ChannelSlack     = "slack"
	ChannelPagerDuty = "pagerduty"
	ChannelLog       = "log"
	// ChannelAlertmanager posts alerts to a Prometheus Alertmanager.
	ChannelAlertmanager = "alertmanager"
	// ChannelWebhook posts signed JSON to an endpoint of the operator's.
	ChannelWebhook = "webhook"
)

var channelNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// StateIsPostgres reports whether a state setting names a PostgreSQL
// database (postgres:// or postgresql://) rather than a SQLite file.
func StateIsPostgres(state string) bool {
	return strings.HasPrefix(state, "postgres://") || strings.HasPrefix(state, "postgresql://")
}

func (n *Notify) applyDefaults() {
	if n.State == "" {
		n.State = DefaultNotifyState
	}
	if n.Reminders == nil {
		n.Reminders = map[string]Duration{}
	}
	for tier, d := range DefaultReminders() {
		if _, set := n.Reminders[tier]; !set {
			n.Reminders[tier] = d
		}
	}
	if n.ResolveAfter == 0 {
		n.ResolveAfter = DefaultResolveAfter
	}
	if n.FlushTimeout == 0 {
		n.FlushTimeout = Duration(DefaultFlushTimeout)
	}
	if n.SendTimeout == 0 {
		n.SendTimeout = Duration(DefaultSendTimeout)
	}
	if n.DigestInterval == 0 {
		n.DigestInterval = Duration(DefaultDigestInterval)
	}
	if n.SilenceMax == 0 {
		n.SilenceMax = Duration(DefaultSilenceMax)
	}
	if n.Storm.MaxNewFindings == 0 {
		n.Storm.MaxNewFindings = DefaultStormMaxNew
	}
	if n.Storm.MaxFailureShare == 0 {
		n.Storm.MaxFailureShare = DefaultStormFailureShare
	}
	if n.Storm.Top == 0 {
		n.Storm.Top = DefaultStormTop
	}
	if n.Retry.Initial == 0 {
		n.Retry.Initial = Duration(DefaultRetryInitial)
	}
	if n.Retry.Max == 0 {
		n.Retry.Max = Duration(DefaultRetryMax)
	}
	if n.Retry.AlertAfter == 0 {
		n.Retry.AlertAfter = Duration(DefaultRetryAlertAfter)
	}
}

// ReminderTiers returns the reminder intervals by tier. Load has checked
// every name.
func (n Notify) ReminderTiers() map[policy.Tier]time.Duration {
	out := make(map[policy.Tier]time.Duration, len(n.Reminders))
	for name, d := range n.Reminders {
		if t, err := policy.ParseTier(name); err == nil {
			out[t] = time.Duration(d)
		}
	}
	return out
}

// Defaults returns n with every unset value replaced by its default, for
// callers that build a Notify by hand rather than through Load.
func (n Notify) Defaults() Notify {
	n.Reminders = maps.Clone(n.Reminders)
	n.applyDefaults()
	return n
}

// Validate reports every problem in n at once. Load runs it as part of
// Config.Validate.
func (n Notify) Validate() []error { return n.validate() }

func (n *Notify) validate() []error {
	var errs []error
	errs = append(errs, n.stateProblems()...)
	kinds, channelErrs := n.channelProblems()
	errs = append(errs, channelErrs...)
	for i, r := range n.Routes {
		errs = append(errs, r.problems(fmt.Sprintf("routes[%d]", i), kinds)...)
	}
	if len(n.Channels) > 0 && len(n.Routes) == 0 {
		errs = append(errs, notifyf("routes", "routes: channels are configured but no route sends anything to them"))
	}
	errs = append(errs, n.timingProblems()...)
	errs = append(errs, n.Storm.problems()...)
	errs = append(errs, n.Retry.problems()...)
	return errs
}

// notifyf is a problem with the notify setting at path.
func notifyf(path, format string, args ...any) error {
	return fieldf(join("notify", path), "notify: "+format, args...)
}

// stateProblems checks the state: a file path, or a PostgreSQL URL with
// no password in it and at most one way to give the password.
func (n *Notify) stateProblems() []error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, notifyf(path, format, args...)) }
	if strings.TrimSpace(n.State) == "" {
		add("state", "state: a file path is required (e.g. /var/lib/certwatch/state.db)")
	}
	if StateIsPostgres(n.State) {
		if u, err := url.Parse(n.State); err != nil {
			add("state", "state: not a valid PostgreSQL URL")
		} else if _, set := u.User.Password(); set || u.Query().Has("password") {
			add("state", "state: the URL must not carry a password: use state_password_file, state_password_env, PGPASSWORD or PGPASSFILE")
		}
		if n.StatePasswordFile != "" && n.StatePasswordEnv != "" {
			add("state_password_file", "state_password_file and state_password_env: set at most one")
		}
		return errs
	}
	if err := checkStateForm(n.State); err != nil {
		add("state", "%v", err)
	}
	if n.StatePasswordFile != "" || n.StatePasswordEnv != "" {
		add("state_password_file", "state_password_file / state_password_env: only for a PostgreSQL state (state: postgres://...)")
	}
	return errs
}

// channelProblems checks each channel, and that no name is used twice; it
// returns the kind of each validly named channel by name.
func (n *Notify) channelProblems() (kinds map[string]string, errs []error) {
	kinds = map[string]string{}
	for i, c := range n.Channels {
		cp := fmt.Sprintf("channels[%d]", i)
		where := cp
		if !channelNameRe.MatchString(c.Name) {
			errs = append(errs, notifyf(cp, "%s: invalid name %q (want letters, digits, '-', '_' or '.', at most 64)", where, c.Name))
		} else {
			where = "channel " + c.Name
			if _, dup := kinds[c.Name]; dup {
				errs = append(errs, notifyf(cp, "%s: listed twice", where))
			}
			kinds[c.Name] = c.Kind
		}
		errs = append(errs, c.validate("notify."+cp, "notify: "+where)...)
	}
	return kinds, errs
}

// problems checks the route at where: its tiers, its channels (named in
// kinds, and able to take a digest if it sends one) and what it matches.
func (r Route) problems(where string, kinds map[string]string) []error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, notifyf(where+"."+key, format, args...)) }
	if len(r.Tiers) == 0 {
		add("tiers", "%s: tiers: at least one tier is required (notice, warning, page or critical)", where)
	}
	for _, t := range r.Tiers {
		if t < policy.Notice || t > policy.Critical {
			add("tiers", "%s: tiers: unknown tier %q (want notice, warning, page or critical)", where, t)
		}
	}
	if len(r.Channels) == 0 {
		add("channels", "%s: channels: at least one channel is required", where)
	}
	for _, name := range r.Channels {
		kind, ok := kinds[name]
		switch {
		case !ok:
			add("channels", "%s: channels: no channel named %q", where, name)
		case r.Digest && (kind == ChannelPagerDuty || kind == ChannelAlertmanager):
			add("digest", "%s: digest: channel %s is %s, which cannot take a digest", where, name, kind)
		}
	}
	for _, z := range r.Match.Zones {
		if discovery.NormalizeName(z) == "" {
			add("match.zones", "%s: match: zones: empty zone", where)
		}
	}
	if _, err := discovery.NewFilter(r.Match.Names, nil); err != nil {
		add("match.names", "%s: match: names: %v", where, err)
	}
	for k := range r.Match.Labels {
		if k == "" {
			add("match.labels", "%s: match: labels: empty label name", where)
		}
	}
	return errs
}

// timingProblems checks the reminders, resolve_after, flush_timeout,
// send_timeout (against each channel's request timeout), digest_interval,
// the runbook and status URLs, and silence_max.
func (n *Notify) timingProblems() []error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, notifyf(path, format, args...)) }
	for name, d := range n.Reminders {
		if tier, err := policy.ParseTier(name); err != nil || tier < policy.Notice {
			add("reminders", "reminders: unknown tier %q (want notice, warning, page or critical)", name)
		}
		if d < 0 {
			add("reminders."+name, "reminders: %s: must not be negative, got %v", name, d)
		}
	}
	if n.ResolveAfter < 1 {
		add("resolve_after", "resolve_after must be at least 1 run, got %d", n.ResolveAfter)
	}
	if n.FlushTimeout <= 0 || n.FlushTimeout > Duration(time.Hour) {
		add("flush_timeout", "flush_timeout must be above 0 and at most 1h, got %v", n.FlushTimeout)
	}
	if n.SendTimeout <= 0 || n.SendTimeout > Duration(10*time.Minute) {
		add("send_timeout", "send_timeout must be above 0 and at most 10m, got %v", n.SendTimeout)
	} else {
		for i, ch := range n.Channels {
			if t := ch.RequestTimeout(); t > time.Duration(n.SendTimeout) {
				add(fmt.Sprintf("channels[%d].%s.timeout", i, ch.Kind), "channel %s: its request timeout %v is longer than send_timeout %v, which would cut a slow request short: lower the channel's timeout or raise send_timeout", ch.Name, t, n.SendTimeout)
			}
		}
	}
	if n.DigestInterval < Duration(time.Minute) {
		add("digest_interval", "digest_interval must be at least 1m, got %v", n.DigestInterval)
	}
	if n.RunbookURL != "" {
		if err := checkURL(n.RunbookURL); err != nil {
			add("runbook_url", "runbook_url: %v", err)
		}
	}
	if n.StatusURL != "" {
		if err := checkURL(n.StatusURL); err != nil {
			add("status_url", "status_url: %v", err)
		}
	}
	if n.SilenceMax < Duration(time.Hour) {
		add("silence_max", "silence_max must be at least 1h, got %v", n.SilenceMax)
	}
	return errs
}

// problems checks the storm limits.
func (s Storm) problems() []error {
	var errs []error
	if s.MaxNewFindings < 1 {
		errs = append(errs, notifyf("storm.max_new_findings", "storm: max_new_findings must be at least 1, got %d", s.MaxNewFindings))
	}
	if s.MaxFailureShare <= 0 || s.MaxFailureShare > 1 {
		errs = append(errs, notifyf("storm.max_failure_share", "storm: max_failure_share must be above 0 and at most 1, got %g", s.MaxFailureShare))
	}
	if s.Top < 1 || s.Top > 40 {
		errs = append(errs, notifyf("storm.top", "storm: top must be 1 to 40, got %d", s.Top))
	}
	return errs
}

// problems checks the retry backoff.
func (r Retry) problems() []error {
	var errs []error
	if r.Initial <= 0 {
		errs = append(errs, notifyf("retry.initial", "retry: initial must be positive, got %v", r.Initial))
	}
	if r.Max < r.Initial {
		errs = append(errs, notifyf("retry.max", "retry: max (%v) must not be below initial (%v)", r.Max, r.Initial))
	}
	if r.AlertAfter <= 0 {
		errs = append(errs, notifyf("retry.alert_after", "retry: alert_after must be positive, got %v", r.AlertAfter))
	}
	return errs
}

// validate checks the channel at path, named where in messages.
func (c *Channel) validate(path, where string) []error {
	var errs []error
	add := func(key, format string, args ...any) {
		at := path
		if key != "" {
			at += "." + key
		}
		errs = append(errs, fieldf(at, where+": "+format, args...))
	}

	switch c.Kind {
	case ChannelSlack:
		s := c.Slack
		if s == nil {
			add("slack", "slack: required for kind slack (channel and token_env or token_file)")
			break
		}
		if strings.TrimSpace(strings.TrimPrefix(s.Channel, "#")) == "" {
			add("slack.channel", "slack: channel is required (e.g. \"#certs\")")
		}
		if (s.TokenEnv == "") == (s.TokenFile == "") {
			add("slack", "slack: set exactly one of token_env or token_file")
		}
		if s.APIURL != "" {
			if err := checkURL(s.APIURL); err != nil {
				add("slack.api_url", "slack: api_url: %v", err)
			} else if !strings.HasSuffix(s.APIURL, "/") {
				add("slack.api_url", "slack: api_url: must end in \"/\" (e.g. https://slack.com/api/)")
			}
		}
		if s.Timeout < 0 {
			add("slack.timeout", "slack: timeout must not be negative")
		}
	case ChannelPagerDuty:
		p := c.PagerDuty
		if p == nil {
			add("pagerduty", "pagerduty: required for kind pagerduty (routing_key_env or routing_key_file)")
			break
		}
		if (p.RoutingKeyEnv == "") == (p.RoutingKeyFile == "") {
			add("pagerduty", "pagerduty: set exactly one of routing_key_env or routing_key_file")
		}
		if p.URL != "" {
			if err := checkURL(p.URL); err != nil {
				add("pagerduty.url", "pagerduty: url: %v", err)
			}
		}
		if p.Timeout < 0 {
			add("pagerduty.timeout", "pagerduty: timeout must not be negative")
		}
	case ChannelAlertmanager:
		a := c.Alertmanager
		if a == nil {
			add("alertmanager", "alertmanager: required for kind alertmanager (url)")
			break
		}
		if err := checkURL(a.URL); err != nil {
			add("alertmanager.url", "alertmanager: url: %v", err)
		} else if err := noCredential(a.URL); err != nil {
			add("alertmanager.url", "alertmanager: url: %v", err)
		}
		if a.ResendInterval < 0 || a.EndsAfter < 0 || a.Timeout < 0 {
			add("alertmanager", "alertmanager: resend_interval, ends_after and timeout must not be negative")
		} else if every, ends := a.Resend(); ends <= every {
			add("alertmanager.ends_after", "alertmanager: ends_after (%v) must be longer than resend_interval (%v), or open alerts resolve between posts", Duration(ends), Duration(every))
		}
	case ChannelWebhook:
		h := c.Webhook
		if h == nil {
			add("webhook", "webhook: required for kind webhook (url and secret_env or secret_file)")
			break
		}
		if err := checkURL(h.URL); err != nil {
			add("webhook.url", "webhook: url: %v", err)
		} else if err := noCredential(h.URL); err != nil {
			add("webhook.url", "webhook: url: %v", err)
		}
		if (h.SecretEnv == "") == (h.SecretFile == "") {
			add("webhook", "webhook: set exactly one of secret_env or secret_file (the HMAC-SHA256 signing secret)")
		}
		if h.Timeout < 0 {
			add("webhook.timeout", "webhook: timeout must not be negative")
		}
	case ChannelLog:
	default:
		add("", "unknown kind %q (want slack, pagerduty, alertmanager, webhook or log)", c.Kind)
	}
	if c.Alertmanager != nil && c.Kind != ChannelAlertmanager {
		add("alertmanager", "alertmanager: only allowed with kind alertmanager")
	}
	if c.Webhook != nil && c.Kind != ChannelWebhook {
		add("webhook", "webhook: only allowed with kind webhook")
	}
	if c.Slack != nil && c.Kind != ChannelSlack {
		add("slack", "slack: only allowed with kind slack")
	}
	if c.PagerDuty != nil && c.Kind != ChannelPagerDuty {
		add("pagerduty", "pagerduty: only allowed with kind pagerduty")
	}
	if c.RatePerSecond < 0 {
		add("rate_per_second", "rate_per_second must not be negative, got %g", c.RatePerSecond)
	}
	if c.Burst < 0 {
		add("burst", "burst must not be negative, got %d", c.Burst)
	}
	return errs
}

// RequestTimeout bounds one request to the channel: its kind's timeout,
// DefaultChannelTimeout when unset; 0 for a log channel, which makes none.
func (c Channel) RequestTimeout() time.Duration {
	var t Duration
	switch {
	case c.Kind == ChannelSlack && c.Slack != nil:
		t = c.Slack.Timeout
	case c.Kind == ChannelPagerDuty && c.PagerDuty != nil:
		t = c.PagerDuty.Timeout
	case c.Kind == ChannelAlertmanager && c.Alertmanager != nil:
		t = c.Alertmanager.Timeout
	case c.Kind == ChannelWebhook && c.Webhook != nil:
		t = c.Webhook.Timeout
	case c.Kind == ChannelLog:
		return 0
	}
	if t <= 0 {
		return DefaultChannelTimeout
	}
	return time.Duration(t)
}

// Secret reads the channel's credential: the Slack bot token, the
// PagerDuty routing key or the webhook signing secret, from the environment
// variable or file named in the configuration. Log and Alertmanager
// channels have none and return "".
func (c Channel) Secret() (Secret, error) {
	ref, ok := c.secretRef("")
	if !ok {
		return "", nil
	}
	return readSecret(os.Getenv, ref.what, "", ref.file, ref.env)
}

// ChannelNames returns the configured channel names in order.
func (n Notify) ChannelNames() []string {
	names := make([]string, 0, len(n.Channels))
	for _, c := range n.Channels {
		names = append(names, c.Name)
	}
	return names
}

// Channel returns the channel called name.
func (n Notify) Channel(name string) (Channel, bool) {
	i := slices.IndexFunc(n.Channels, func(c Channel) bool { return c.Name == name })
	if i < 0 {
		return Channel{}, false
	}
	return n.Channels[i], true
}

// Warnings are settings that are valid but unsafe, one line each:
// `certwatch check-config` prints them and `certwatch run` logs them. A
// channel whose URL is plain http:// sends its credential (the Slack token
// in every request's form body, the PagerDuty routing key in every event)
// readable and alterable by anyone on the network path; a loopback host (a
// local proxy) is left alone, as it crosses no network. A webhook sends no
// secret (its secret signs the body and stays home), but its plain http://
// URL still gets a warning: the body maps where certificates are weak,
// readable on the path, and a receiver outside the cluster is the rule.
// An Alertmanager URL gets none: it carries no secret, and Alertmanager
// serves plain http beside certwatch as a rule (docs/notifications.md, "Alertmanager").
func (n Notify) Warnings() []string {
	var out []string
	plain := func(where, key, raw, secret string) {
		msg := "the " + secret + " would cross the network unencrypted; use https://"
		if secret == "" {
			msg = "each finding (names, addresses, deadlines) would cross the network unencrypted, readable on the path (the signing secret is never sent, and the signature proves who sent a body, not that nobody else read it); use https://"
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "http" || loopbackHost(u.Hostname()) {
			return
		}
		host := u.Host
		if len(host) > 80 {
			host = host[:80] + "…"
		}
		out = append(out, fmt.Sprintf("notify: channel %s: %s: plain http (http://%s): %s", where, key, host, msg))
	}
	for _, c := range n.Channels {
		switch {
		case c.Kind == ChannelSlack && c.Slack != nil:
			plain(c.Name, "slack: api_url", c.Slack.APIURL, "bot token")
		case c.Kind == ChannelPagerDuty && c.PagerDuty != nil:
			plain(c.Name, "pagerduty: url", c.PagerDuty.URL, "routing key")
		case c.Kind == ChannelWebhook && c.Webhook != nil:
			plain(c.Name, "webhook: url", c.Webhook.URL, "")
		}
	}
	return out
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// noCredential refuses a URL with user information or a query, where a
// credential would sit in the configuration file and in every request
// line: Alertmanager and webhook channels take none that way.
func noCredential(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.User != nil {
		return fmt.Errorf("must not carry user information (a credential in the URL would sit in this file; put a proxy with its own credentials in front)")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("must not carry a query or fragment")
	}
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("invalid url %q (want http:// or https://)", s)
	}
	return nil
}

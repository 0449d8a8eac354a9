package assemble

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/alertmanager"
	"github.com/certwatch/certwatch/notify/pagerduty"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/notify/webhook"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

var (
	_ daemon.Notifier = daemonNotifier{}
	// Slack has no idempotency key: an attempt whose outcome is unknown
	// looks for its message before posting again.
	_ notify.Finder = (*slack.Sender)(nil)
	_ notify.Sender = (*pagerduty.Sender)(nil)
	// Alertmanager forgets an alert not posted again.
	_ notify.Refresher = (*alertmanager.Sender)(nil)
	_ notify.Sender    = (*webhook.Sender)(nil)
)

// Senders builds one sender per configured channel, reading each
// channel's secret from its file or environment variable. The Slack
// senders of one bot token share its rate limits and channel IDs.
func Senders(c config.Notify, client *http.Client, logger *slog.Logger) (map[string]notify.Sender, error) {
	senders := map[string]notify.Sender{}
	var workspace []*slack.Sender
	var errs []error
	for _, ch := range c.Channels {
		s, err := Sender(c, ch, client, logger)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		senders[ch.Name] = s
		if s, ok := s.(*slack.Sender); ok {
			workspace = append(workspace, s)
		}
	}
	// Slack limits most methods per bot token, not per channel.
	slack.Share(workspace...)
	return senders, errors.Join(errs...)
}

// Sender builds the sender of channel ch of c, reading its secret (and
// no other channel's) from its file or environment variable. Each request
// is bounded by the channel's checked timeout (config.Channel.RequestTimeout),
// the one notify.send_timeout is held against.
func Sender(c config.Notify, ch config.Channel, client *http.Client, logger *slog.Logger) (notify.Sender, error) {
	switch ch.Kind {
	case config.ChannelLog:
		return notify.NewLogSender(logger.With("component", "notify")), nil // each record names its channel, nil
	case config.ChannelAlertmanager:
		a := ch.Alertmanager
		every, ends := a.Resend()
		s, err := alertmanager.New(alertmanager.Config{Name: ch.Name, URL: a.URL, ResendInterval: every, EndsAfter: ends, Timeout: ch.RequestTimeout()}, client)
		if err != nil {
			return nil, err
		}
		s.StatusURL, s.RunbookURL = c.StatusURL, c.RunbookURL
		return s, nil
	}
	secret, err := ch.Secret()
	if err != nil {
		return nil, err
	}
	switch ch.Kind {
	case config.ChannelSlack:
		sc := ch.Slack
		s, err := slack.New(slack.Config{Name: ch.Name, Channel: sc.Channel, Token: secret.Reveal(), APIURL: sc.APIURL, Timeout: ch.RequestTimeout()}, client)
		if err != nil {
			return nil, err
		}
		s.RunbookURL = c.RunbookURL
		return s, nil
	case config.ChannelPagerDuty:
		pc := ch.PagerDuty
		s, err := pagerduty.New(pagerduty.Config{Name: ch.Name, RoutingKey: secret.Reveal(), URL: pc.URL, Timeout: ch.RequestTimeout()}, client)
		if err != nil {
			return nil, err
		}
		s.RunbookURL = c.RunbookURL
		return s, nil
	case config.ChannelWebhook:
		wc := ch.Webhook
		s, err := webhook.New(webhook.Config{Name: ch.Name, URL: wc.URL, Secret: secret.Reveal(), Timeout: ch.RequestTimeout()}, client)
		if err != nil {
			return nil, err
		}
		s.StatusURL, s.RunbookURL = c.StatusURL, c.RunbookURL
		return s, nil
	}
	return nil, fmt.Errorf("notify: channel %s: unknown kind %q", ch.Name, ch.Kind)
}

// Notifier builds the notifier of c on store with senders (see Senders):
// its channels, routes and limits, the labels findings carry (Labels) and
// the silences c declares (Silences), and how long one delivery attempt
// may take (notify.send_timeout).
func Notifier(c config.Config, store state.Outbox, senders map[string]notify.Sender, logger *slog.Logger) (*notify.Notifier, error) {
	n, err := notify.New(notifyConfig(c.Notify), store, senders, logger.With("component", "notify"))
	if err != nil {
		return nil, err
	}
	n.Labels = Labels(c)
	n.Silences = Silences(c)
	n.SendTimeout = time.Duration(c.Notify.SendTimeout)
	return n, nil
}

// notifyConfig is what the notifier needs of the checked notify section:
// each channel's rate (its kind's default when unset) and whether it keeps
// incidents open, the routes, reminders, and the delivery and storm limits.
func notifyConfig(n config.Notify) notify.Config {
	out := notify.Config{
		Reminders:      n.ReminderTiers(),
		ResolveAfter:   n.ResolveAfter,
		DigestInterval: time.Duration(n.DigestInterval),
		Storm:          notify.Storm{MaxNewFindings: n.Storm.MaxNewFindings, MaxFailureShare: n.Storm.MaxFailureShare, Top: n.Storm.Top},
		Retry: notify.Retry{Initial: time.Duration(n.Retry.Initial), Max: time.Duration(n.Retry.Max),
			AlertAfter: time.Duration(n.Retry.AlertAfter)},
	}
	for _, ch := range n.Channels {
		c := notify.Channel{Name: ch.Name, Rate: ch.RatePerSecond, Burst: ch.Burst}
		switch ch.Kind {
		case config.ChannelSlack:
			c.Rate = cmp.Or(c.Rate, notify.DefaultSlackRate)
		case config.ChannelPagerDuty:
			c.Rate = cmp.Or(c.Rate, notify.DefaultPagerDutyRate)
			c.KeepsIncidents = true
		case config.ChannelAlertmanager:
			c.Rate = cmp.Or(c.Rate, notify.DefaultHTTPRate)
			c.KeepsIncidents = true
		case config.ChannelWebhook:
			c.Rate = cmp.Or(c.Rate, notify.DefaultHTTPRate)
		}
		out.Channels = append(out.Channels, c)
	}
	for _, r := range n.Routes {
		out.Routes = append(out.Routes, notify.Route{Tiers: r.Tiers, Channels: r.Channels, Digest: r.Digest,
			Zones: r.Match.Zones, Names: r.Match.Names, Labels: r.Match.Labels})
	}
	return out
}

// ChannelStats is the delivery health of n's channels for metrics and the
// status page.
func ChannelStats(n *notify.Notifier) []serve.ChannelStats {
	if n == nil {
		return nil
	}
	var out []serve.ChannelStats
	for _, h := range n.Health() {
		out = append(out, serve.ChannelStats{
			Channel: h.Channel, Delivered: h.Delivered, Retried: h.Retried, Refused: h.Refused,
			Failing: !h.FailingSince.IsZero(),
		})
	}
	return out
}

// Sweep is what notification needs from a report: its own lists, shared.
func Sweep(r *scan.Report) notify.Sweep {
	return notify.Sweep{Findings: r.Findings, Certificates: r.Certificates, Endpoints: r.Endpoints}
}

// daemonNotifier hands the daemon's reports to a notify.Notifier, lets
// the daemon run its outbox dispatcher, and marks the silenced findings of
// the reports it publishes with the silences kept in silences.
type daemonNotifier struct {
	n        *notify.Notifier
	silences state.Silences
}

// Notify applies the report's findings at the time the report was made.
func (r daemonNotifier) Notify(ctx context.Context, rep *scan.Report) error {
	_, err := r.n.Apply(ctx, Sweep(rep), rep.GeneratedAt)
	return err
}

// MarkSilenced marks the report's findings that the silences in force
// when it was made keep from being announced, as Apply decides.
func (r daemonNotifier) MarkSilenced(ctx context.Context, rep *scan.Report) error {
	stored, err := r.silences.Silences(ctx)
	if err != nil {
		return err
	}
	r.n.MarkSilenced(rep.Findings, stored, rep.GeneratedAt)
	return nil
}

func (r daemonNotifier) Run(ctx context.Context) error   { return r.n.Run(ctx) }
func (r daemonNotifier) Flush(ctx context.Context) error { return r.n.Flush(ctx) }

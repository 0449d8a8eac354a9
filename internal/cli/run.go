package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery/networks"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/alertmanager"
	"github.com/certwatch/certwatch/notify/pagerduty"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/notify/webhook"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/serve"
	"github.com/certwatch/certwatch/state"
)

const runUsage = `Usage:
  certwatch run --config FILE [flags]

Run certwatch as a service: discover targets and probe them on the
schedules of the daemon section, announce findings through the channels
and routes of the notify section (state and outbox in notify.state), and
serve on daemon.listen (default 127.0.0.1:9814):

  /               status page: every certificate by deadline, with filters
  /metrics        Prometheus metrics
  /healthz        the process is up
  /readyz         the state store works (its file is the one opened and
                  its latest write committed) and an inventory is loaded
  /api/v1/report  the latest report, as 'certwatch scan --output json'
  /api/v1/silences  the silences in force; adding (POST) and expiring
                  (POST /api/v1/silences/ID/expire) need the bearer token of
                  serve.silence_token_env or _file, and are off without one

Signals:
  SIGTERM, SIGINT  stop: no new run starts, a running one gets
                   daemon.grace_period, then the outbox as long again; exit 0
  SIGHUP           reload --config; an invalid file is logged and the
                   running configuration stays

A SQLite state (notify.state a file) is one process's: a second 'run', or
a 'scan --notify', on the same file exits 1 naming the one that holds it
(the lock file is notify.state + ".lock"); 'certwatch alerts' only reads.

Replicas: with notify.state a postgres:// URL, every process pointed at the
database is a replica. One leads (discovery, evaluation, notifications,
delivery; daemon.leader_lease); all of them probe the shards of each run
(daemon.shard_size). Instances in several accounts share one database as
sites (daemon.site): one alert state, one page per certificate. See
docs/operations.md, "Running more than one".

Logs are JSON on stderr unless stderr is a terminal.
`

// runNotifier hands the daemon's reports to a notify.Notifier, lets the
// daemon run its outbox dispatcher, and marks the silenced findings of the
// reports it publishes with the silences kept in silences.
type runNotifier struct {
	n        *notify.Notifier
	silences state.Silences
}

var (
	_ daemon.Notifier   = runNotifier{}
	_ daemon.Dispatcher = runNotifier{}
	_ daemon.Silencer   = runNotifier{}
	_ daemon.Recorder   = (*serve.Server)(nil)
	_ daemon.Scanner    = (*scan.Pass)(nil)
	_ notify.Sender     = (*slack.Sender)(nil)
	_ notify.Sender     = (*pagerduty.Sender)(nil)
	_ notify.Refresher  = (*alertmanager.Sender)(nil)
	_ notify.Sender     = (*webhook.Sender)(nil)
)

// Notify applies the report's findings at the time the report was made.
func (r runNotifier) Notify(ctx context.Context, rep *scan.Report) error {
	_, err := r.n.Apply(ctx, sweepOf(rep), rep.GeneratedAt)
	return err
}

// MarkSilenced marks the report's findings that the silences in force
// when it was made keep from being announced, as Apply decides.
func (r runNotifier) MarkSilenced(ctx context.Context, rep *scan.Report) error {
	stored, err := r.silences.Silences(ctx)
	if err != nil {
		return err
	}
	r.n.MarkSilenced(rep.Findings, stored, rep.GeneratedAt)
	return nil
}

func (r runNotifier) Run(ctx context.Context) error   { return r.n.Run(ctx) }
func (r runNotifier) Flush(ctx context.Context) error { return r.n.Flush(ctx) }

// sweepOf is what notification needs from a report.
func sweepOf(r *scan.Report) notify.Sweep {
	sw := notify.Sweep{Findings: r.Findings, Certificates: r.Certificates, Endpoints: make([]notify.Served, 0, len(r.Endpoints))}
	for _, ep := range r.Endpoints {
		sw.Endpoints = append(sw.Endpoints, notify.Served{
			Endpoint:    policy.Endpoint{Name: ep.Name, Port: ep.Port, Address: ep.Address, Via: ep.Via},
			Certificate: ep.Certificate,
			Failed:      ep.Certificate == "",
			Unanswered:  ep.Certificate == "" && policy.Unanswered(ep.Failure),
		})
	}
	return sw
}

// newSenders builds one sender per configured channel, reading each
// channel's secret from its file or environment variable. The Slack
// senders of one bot token share its rate limits and channel IDs.
func newSenders(c config.Notify, client *http.Client, logger *slog.Logger) (map[string]notify.Sender, error) {
	senders := map[string]notify.Sender{}
	var workspace []*slack.Sender
	var errs []error
	for _, ch := range c.Channels {
		s, err := newSender(c, ch, client, logger)
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

// newSender builds the sender of channel ch of c, reading its secret (and
// no other channel's) from its file or environment variable.
func newSender(c config.Notify, ch config.Channel, client *http.Client, logger *slog.Logger) (notify.Sender, error) {
	switch ch.Kind {
	case config.ChannelLog:
		return notify.NewLogSender(logger.With("component", "notify")), nil // each record names its channel, nil
	case config.ChannelAlertmanager:
		a := ch.Alertmanager
		every, ends := a.Resend()
		s, err := alertmanager.New(alertmanager.Config{Name: ch.Name, URL: a.URL, ResendInterval: every, EndsAfter: ends, Timeout: time.Duration(a.Timeout)}, client)
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
		s, err := slack.New(slack.Config{Name: ch.Name, Channel: sc.Channel, Token: secret.Reveal(), APIURL: sc.APIURL, Timeout: time.Duration(sc.Timeout)}, client)
		if err != nil {
			return nil, err
		}
		s.RunbookURL = c.RunbookURL
		return s, nil
	case config.ChannelPagerDuty:
		pc := ch.PagerDuty
		s, err := pagerduty.New(pagerduty.Config{Name: ch.Name, RoutingKey: secret.Reveal(), URL: pc.URL, Timeout: time.Duration(pc.Timeout)}, client)
		if err != nil {
			return nil, err
		}
		s.RunbookURL = c.RunbookURL
		return s, nil
	case config.ChannelWebhook:
		wc := ch.Webhook
		s, err := webhook.New(webhook.Config{Name: ch.Name, URL: wc.URL, Secret: secret.Reveal(), Timeout: time.Duration(wc.Timeout)}, client)
		if err != nil {
			return nil, err
		}
		s.StatusURL, s.RunbookURL = c.StatusURL, c.RunbookURL
		return s, nil
	}
	return nil, fmt.Errorf("notify: channel %s: unknown kind %q", ch.Name, ch.Kind)
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

// runParts are what a configuration builds for the daemon; a reload builds
// them afresh.
type runParts struct {
	cfg      daemon.Config
	pass     *scan.Pass
	notifier runNotifier
}

// buildRun builds the parts of c. It reads files and variables and dials
// nothing; a pass without a source is left to the caller (requireSources).
func (e *env) buildRun(ctx context.Context, c config.Config, store state.Store, srv *serve.Server, client *http.Client, logger *slog.Logger) (runParts, error) {
	pass, err := buildPassWithAWS(ctx, c, logger, logger)
	if err != nil {
		return runParts{}, err
	}
	if srv != nil {
		pass.OnObservation = srv.ObserveProbe
	}
	withCTMemory(pass, store)
	if rates, ok := store.(state.Rates); ok {
		// Replicas share each network's rate: N of them probing one
		// network still connect at most its rate together.
		for _, s := range pass.Sources {
			if n, ok := s.(*networks.Source); ok {
				n.ShareRate(rates)
			}
		}
	}
	senders, err := newSenders(c.Notify, client, logger)
	if err != nil {
		return runParts{}, withCode(ExitUsage, err)
	}
	n, err := notify.New(notifyConfig(c.Notify), store, senders, logger.With("component", "notify"))
	if err != nil {
		return runParts{}, withCode(ExitUsage, err)
	}
	n.Labels = findingLabels(c.Zones, c.AWS.Route53Labels, targetLabels(&c))
	n.Silences = configSilences(c)
	d := c.Daemon
	dc := daemon.Config{
		Discovery:        d.Schedules.Discovery,
		Probe:            d.Schedules.Probe,
		Jitter:           time.Duration(d.Jitter),
		SweepTimeout:     time.Duration(d.SweepTimeout),
		GracePeriod:      time.Duration(d.GracePeriod),
		DropThreshold:    d.DropThreshold,
		HeartbeatTimeout: time.Duration(d.Heartbeat.Timeout),
		MaxFailureShare:  c.Notify.Storm.MaxFailureShare,
	}
	if d.Heartbeat.Enabled() {
		u, err := config.ReadSecret("daemon: heartbeat: url", d.Heartbeat.URL, d.Heartbeat.URLFile, d.Heartbeat.URLEnv)
		if err != nil {
			return runParts{}, withCode(ExitUsage, err)
		}
		dc.HeartbeatURL = u.Reveal()
	}
	return runParts{cfg: dc, pass: pass, notifier: runNotifier{n: n, silences: store}}, nil
}

func (e *env) run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	configFile := fs.String("config", "", "the YAML configuration `file` (see config.example.yaml); required, re-read on SIGHUP")
	verbose := fs.Bool("v", false, "log per-run and per-target detail")
	var procs procsFlag
	procs.register(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, runUsage)
			return nil
		}
		return err
	}
	if *configFile == "" {
		return usageError("run: --config is required (see 'certwatch run --help')")
	}
	restore, err := procs.apply(e, fs)
	if err != nil {
		return err
	}
	defer restore()
	// Catch SIGHUP from the start: its default action would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	c, err := config.Load(*configFile)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	// What check-config refuses, before the state is touched.
	if err := e.checkStart(ctx, c); err != nil {
		return withCode(ExitUsage, fmt.Errorf("config %s: %w", *configFile, err))
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := newLogger(e.stderr, level)

	unlock, err := lockState(c, "certwatch run")
	if err != nil {
		return err
	}
	defer unlock()
	store, err := openState(ctx, c)
	if err != nil {
		return err
	}
	defer store.Close()

	var current atomic.Pointer[notify.Notifier]
	notes := &startupNotes{logger: logger}
	notes.channels(c.Notify)
	h := &daemons{client: &http.Client{}, memory: store, history: store, recorder: notes, logger: logger,
		stateCheck: store.Check, stateName: stateName(c.Notify.State)}
	if store.Created() {
		h.emptyState = stateName(c.Notify.State)
	}
	book := newSilenceBook(store, c)
	tok, err := c.Serve.SilenceToken()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	silenceToken := []byte(tok.Reveal())
	srv := serve.New(serve.Options{
		Notes:       notes.list,
		Logger:      logger.With("component", "serve"),
		SeriesLimit: c.Daemon.MetricsSeriesLimit,
		Ready: []serve.Check{
			{Name: "inventory", Check: func(context.Context) error { return h.Ready() }},
		},
		// Read once per serve.DefaultStoreTTL however often /metrics
		// and /readyz are asked: a scrape loop must not load a shared
		// PostgreSQL.
		Outbox:   store,
		State:    store.Check,
		Channels: func() []serve.ChannelStats { return channelStats(current.Load()) },
		Pprof:    c.Daemon.Pprof,
		Version:  version(),

		Silences:     silenceAPI{book},
		SilenceToken: silenceToken,
	})
	h.srv = srv
	client := h.client
	parts, err := e.buildRun(ctx, c, store, srv, client, logger)
	if err != nil {
		return err
	}
	if err := requireSources(parts.pass); err != nil {
		return err
	}
	current.Store(parts.notifier.n)
	h.cfg, h.scanner, h.notifier = parts.cfg, parts.pass, parts.notifier
	// A configuration the daemon refuses fails now, not at the first term.
	if _, err := daemon.New(h.cfg, h.scanner, h.notifier, logger); err != nil {
		return withCode(ExitUsage, err)
	}
	notes.Recorder = srv

	ln, err := net.Listen("tcp", c.Daemon.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (daemon.listen): %w", c.Daemon.Listen, err)
	}
	logger.Info("certwatch running", "version", version(), "config", *configFile, "listen", ln.Addr().String(),
		"state", stateName(c.Notify.State), "discovery", c.Daemon.Schedules.Discovery, "probe", c.Daemon.Schedules.Probe)

	// HTTP stays up until the daemon has stopped, so the status page and
	// metrics cover the shutdown.
	httpCtx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHTTP()
	var wg sync.WaitGroup
	var serveErr error
	wg.Go(func() { serveErr = srv.Serve(httpCtx, ln) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				n, err := e.reload(ctx, *configFile, &c, store, srv, client, h, logger)
				if err != nil {
					logger.Error("config reload rejected: the running configuration stays", "config", *configFile, "err", err)
					continue
				}
				current.Store(n)
				notes.channels(c.Notify)
				book.configure(c)
			}
		}
	})
	if sh, ok := store.(state.Shared); ok {
		err = h.runReplicated(ctx, sh, c.Daemon.Site, time.Duration(c.Daemon.LeaderLease), c.Daemon.ShardSize, time.Duration(c.Daemon.SiteStaleAfter))
	} else {
		err = h.runOnce(ctx)
	}
	stopHTTP()
	wg.Wait()
	if err != nil {
		return err
	}
	if serveErr != nil {
		return serveErr
	}
	logger.Info("certwatch stopped")
	return nil
}

// reload loads path and, when it is valid and its parts can be built,
// hands them to d and returns the new notifier. Settings that only take
// effect at start keep their running values, with a warning.
func (e *env) reload(ctx context.Context, path string, cur *config.Config, store state.Store, srv *serve.Server, client *http.Client, d *daemons, logger *slog.Logger) (*notify.Notifier, error) {
	logger.Info("reloading config", "config", path)
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := e.checkStart(ctx, c); err != nil {
		return nil, err
	}
	keep := func(key string, changed bool) {
		if changed {
			logger.Warn("config reload: this setting takes effect at the next start; the running value stays", "key", key)
		}
	}
	keep("notify.state", c.Notify.State != cur.Notify.State)
	keep("daemon.listen", c.Daemon.Listen != cur.Daemon.Listen)
	keep("daemon.pprof", c.Daemon.Pprof != cur.Daemon.Pprof)
	keep("daemon.metrics_series_limit", c.Daemon.MetricsSeriesLimit != cur.Daemon.MetricsSeriesLimit)
	keep("daemon.leader_lease", c.Daemon.LeaderLease != cur.Daemon.LeaderLease)
	keep("daemon.site", c.Daemon.Site != cur.Daemon.Site)
	keep("daemon.shard_size", c.Daemon.ShardSize != cur.Daemon.ShardSize)
	keep("daemon.site_stale_after", c.Daemon.SiteStaleAfter != cur.Daemon.SiteStaleAfter)
	keep("serve.silence_token_env", c.Serve.SilenceTokenEnv != cur.Serve.SilenceTokenEnv)
	keep("serve.silence_token_file", c.Serve.SilenceTokenFile != cur.Serve.SilenceTokenFile)
	c.Notify.State, c.Daemon.Listen = cur.Notify.State, cur.Daemon.Listen
	c.Daemon.Pprof, c.Daemon.MetricsSeriesLimit = cur.Daemon.Pprof, cur.Daemon.MetricsSeriesLimit
	c.Daemon.LeaderLease, c.Daemon.Site = cur.Daemon.LeaderLease, cur.Daemon.Site
	c.Daemon.ShardSize, c.Daemon.SiteStaleAfter = cur.Daemon.ShardSize, cur.Daemon.SiteStaleAfter
	parts, err := e.buildRun(ctx, c, store, srv, client, logger)
	if err != nil {
		return nil, err
	}
	if err := requireSources(parts.pass); err != nil {
		return nil, err
	}
	if err := d.Reload(parts.cfg, parts.pass, parts.notifier); err != nil {
		return nil, err
	}
	*cur = c
	logger.Info("config reloaded", "config", path, "discovery", c.Daemon.Schedules.Discovery, "probe", c.Daemon.Schedules.Probe)
	return parts.notifier.n, nil
}

// channelStats is the delivery health of n's channels for metrics and the
// status page.
func channelStats(n *notify.Notifier) []serve.ChannelStats {
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

// startupNotes says at start-up, in a log line and as a /readyz note, what
// leaves a running daemon quieter than its operator may think: no
// notification channel (findings only reach the status page and metrics),
// or a first inventory with nothing to probe. It passes every record on to
// Recorder.
type startupNotes struct {
	daemon.Recorder
	logger *slog.Logger

	// mu guards the fields below.
	mu        sync.Mutex
	noChannel bool
	empty     string // why the inventory is empty; "" when it is not
	first     bool   // the first discovery was recorded
}

// channels notes whether n has no channel, and logs it when that is new.
func (s *startupNotes) channels(n config.Notify) {
	none := len(n.Channels) == 0
	s.mu.Lock()
	changed := none != s.noChannel
	s.noChannel = none
	s.mu.Unlock()
	if none && changed {
		s.logger.Warn("no notification channel configured: findings reach only the status page, /metrics and /api/v1/report; add notify.channels and notify.routes to be told")
	}
}

// RecordDiscovery notes an empty inventory, and logs the first one.
func (s *startupNotes) RecordDiscovery(results []scan.SourceResult, inventory int) {
	s.Recorder.RecordDiscovery(results, inventory)
	s.mu.Lock()
	first := !s.first
	s.first = true
	s.empty = ""
	if inventory == 0 {
		names := make([]string, len(results))
		for i, r := range results {
			names[i] = r.Name
		}
		s.empty = fmt.Sprintf("the inventory is empty: %s found nothing to probe", strings.Join(names, ", "))
	}
	empty := s.empty
	s.mu.Unlock()
	if first && empty != "" {
		s.logger.Warn("first inventory is empty: nothing will be probed until discovery finds targets", "sources", len(results), "detail", empty)
	}
}

func (s *startupNotes) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if s.noChannel {
		out = append(out, "no notification channel: findings are not sent anywhere (notify.channels)")
	}
	if s.empty != "" {
		out = append(out, s.empty)
	}
	return out
}

package cli

import (
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

	"github.com/certwatch/certwatch/assemble"
	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/notify"
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
                  its latest write committed) and an inventory is loaded;
                  notes follow (no channel, empty inventory, a failed
                  discovery source) without making it unready
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

Memory: run collects garbage at GOGC=50 (the heap grows to 1.5 times
what is live, not Go's twice), and at GOGC=25 while its inventory holds
50,000 targets or more, unless $GOGC or $GOMEMLIMIT is set; it gives what
a probe run freed back to the system when the run is over.
Under a container memory limit, set GOMEMLIMIT a little below it.

Logs are JSON on stderr unless stderr is a terminal.
`

var _ daemon.Recorder = (*serve.Server)(nil)

// buildRun builds the daemon's parts of c on store (assemble.Run), its
// probes recorded by srv; a setting that cannot be built is a usage error.
// A pass without a source is left to the caller (requireSources).
func buildRun(ctx context.Context, c config.Config, store state.Store, srv *serve.Server, client *http.Client, logger *slog.Logger) (assemble.Daemon, error) {
	parts, err := assemble.Run(ctx, c, store, client, logger)
	if err != nil {
		return assemble.Daemon{}, withCode(ExitUsage, err)
	}
	parts.Pass.OnObservation = srv.ObserveProbe
	return parts, nil
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
	defer e.applyGC(daemonGCPercent)()
	// Catch SIGHUP from the start: its default action would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	c, err := config.Load(*configFile)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	// What check-config refuses, before the state is touched.
	if err := assemble.Check(ctx, c, e.getenv); err != nil {
		return withCode(ExitUsage, fmt.Errorf("config %s: %w", *configFile, err))
	}
	if !c.Daemon.Pprof { // the setting takes effect at the next start
		e.noHeapProfile()
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := newLogger(e.stderr, level)

	unlock, err := assemble.Lock(c, "certwatch run")
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
	gc := &inventoryGC{apply: e.applyGC}
	defer gc.restore()
	notes := &startupNotes{logger: logger, onInventory: gc.size}
	notes.channels(c.Notify)
	h := &assemble.Daemons{HTTPClient: &http.Client{}, Memory: store, History: store, Recorder: notes, Logger: logger,
		StateCheck: store.Check, StateName: assemble.StateName(c.Notify.State),
		// What the work between runs left goes back to the system before
		// the probing takes its own; the probing's freed heap and the code
		// it ran before the judging takes its own; the judging's before the
		// notifier, the run's peak, takes its own; and the notifier's
		// before the status server compresses the report.
		Probing: e.giveBackMemory, Judging: func() { gc.judge(); e.giveBackMemory() }, Notifying: e.giveBackMemory,
		Notified: e.giveBackMemory, AfterProbe: func() { gc.judged(); e.giveBackMemory() }}
	if store.Created() {
		h.EmptyState = assemble.StateName(c.Notify.State)
	}
	book := assemble.NewSilenceBook(store, c)
	srv, err := e.newRunServer(c, store, h, book, notes, gc, &current, logger)
	if err != nil {
		return err
	}
	h.Server = srv
	client := h.HTTPClient
	parts, err := buildRun(ctx, c, store, srv, client, logger)
	if err != nil {
		return err
	}
	if err := requireSources(parts.Pass); err != nil {
		return err
	}
	current.Store(parts.Notify)
	// A configuration the daemon refuses fails now, not at the first term.
	if _, err := daemon.New(parts.Config, parts.Pass, parts.Notifier, logger); err != nil {
		return withCode(ExitUsage, err)
	}
	if err := h.Reload(parts.Config, parts.Pass, parts.Notifier); err != nil { // no daemon runs yet
		return err
	}
	notes.Recorder = srv

	// What a reload is compared with: 100,000 static targets are held
	// by the static source, not here too.
	running := c.Retained()
	return e.serveAndRun(ctx, daemonRun{configFile: *configFile, c: &running, store: store, srv: srv, client: client,
		h: h, book: book, notes: notes, current: &current, hup: hup, logger: logger})
}

// newRunServer makes the daemon's HTTP server: readiness from h, the
// store's outbox and state for /metrics and /readyz, the channels of the
// notifier current holds, and the silence API with its token.
func (e *env) newRunServer(c config.Config, store state.Store, h *assemble.Daemons, book *assemble.SilenceBook, notes *startupNotes, gc *inventoryGC, current *atomic.Pointer[notify.Notifier], logger *slog.Logger) (*serve.Server, error) {
	tok, err := c.Serve.SilenceToken()
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	silenceToken := []byte(tok.Reveal())
	return serve.New(serve.Options{
		Notes:       notes.list,
		Logger:      logger.With("component", "serve"),
		SeriesLimit: c.Daemon.MetricsSeriesLimit,
		// A rendering collects often, and gives back what it took.
		Rendering: func() (done func()) {
			gc.render()
			return func() { gc.rendered(); e.giveBackMemory() }
		},
		Ready: []serve.Check{
			{Name: "inventory", Check: func(context.Context) error { return h.Ready() }},
		},
		// Read once per serve.DefaultStoreTTL however often /metrics
		// and /readyz are asked: a scrape loop must not load a shared
		// PostgreSQL.
		Outbox:   store,
		State:    store.Check,
		Channels: func() []serve.ChannelStats { return assemble.ChannelStats(current.Load()) },
		Pprof:    c.Daemon.Pprof,
		Version:  version(),

		Silences:     assemble.SilenceAPI{Book: book},
		SilenceToken: silenceToken,
	}), nil
}

// daemonRun is what serveAndRun needs of a started `certwatch run`.
type daemonRun struct {
	configFile string
	c          *config.Config
	store      state.Store
	srv        *serve.Server
	client     *http.Client
	h          *assemble.Daemons
	book       *assemble.SilenceBook
	notes      *startupNotes
	current    *atomic.Pointer[notify.Notifier]
	hup        <-chan os.Signal
	logger     *slog.Logger
}

// serveAndRun listens on daemon.listen, serves HTTP until the daemon has
// stopped (so the status page and metrics cover the shutdown), reloads the
// configuration on SIGHUP, and runs the daemon (replicated on a shared
// store) until ctx ends.
func (e *env) serveAndRun(ctx context.Context, r daemonRun) error {
	c, store, srv, client, h, book, notes, current, hup, logger := r.c, r.store, r.srv, r.client, r.h, r.book, r.notes, r.current, r.hup, r.logger
	ln, err := net.Listen("tcp", c.Daemon.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (daemon.listen): %w", c.Daemon.Listen, err)
	}
	logger.Info("certwatch running", "version", version(), "config", r.configFile, "listen", ln.Addr().String(),
		"state", assemble.StateName(c.Notify.State), "discovery", c.Daemon.Schedules.Discovery, "probe", c.Daemon.Schedules.Probe)

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
				n, next, err := e.reload(ctx, r.configFile, c, store, srv, client, h, logger)
				if err != nil {
					logger.Error("config reload rejected: the running configuration stays", "config", r.configFile, "err", err)
					continue
				}
				current.Store(n)
				notes.channels(next.Notify)
				book.Configure(next) // the labels of its static targets too
				*c = next.Retained()
			}
		}
	})
	if sh, ok := store.(state.Shared); ok {
		err = h.RunReplicated(ctx, sh, c.Daemon)
	} else {
		err = h.Run(ctx)
	}
	var fe *config.FieldError
	if errors.As(err, &fe) {
		err = withCode(ExitUsage, err) // a daemon the parts could not make
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
// hands them to d and returns the new notifier and configuration. Settings
// that only take effect at start keep their running values (cur's), with a
// warning.
func (e *env) reload(ctx context.Context, path string, cur *config.Config, store state.Store, srv *serve.Server, client *http.Client, d *assemble.Daemons, logger *slog.Logger) (*notify.Notifier, config.Config, error) {
	logger.Info("reloading config", "config", path)
	c, err := config.Load(path)
	if err != nil {
		return nil, config.Config{}, err
	}
	if err := assemble.Check(ctx, c, e.getenv); err != nil {
		return nil, config.Config{}, err
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
	parts, err := buildRun(ctx, c, store, srv, client, logger)
	if err != nil {
		return nil, config.Config{}, err
	}
	if err := requireSources(parts.Pass); err != nil {
		return nil, config.Config{}, err
	}
	if err := d.Reload(parts.Config, parts.Pass, parts.Notifier); err != nil {
		return nil, config.Config{}, err
	}
	logger.Info("config reloaded", "config", path, "discovery", c.Daemon.Schedules.Discovery, "probe", c.Daemon.Schedules.Probe)
	return parts.Notify, c, nil
}

// startupNotes says at start-up, in a log line and as a /readyz note, what
// leaves a running daemon quieter than its operator may think: no
// notification channel (findings only reach the status page and metrics),
// or a first inventory with nothing to probe; and, as a /readyz note only
// (discovery_degraded and the logs say it otherwise), each source whose
// latest discovery failed. It passes every record on to Recorder.
type startupNotes struct {
	daemon.Recorder
	logger *slog.Logger
	// onInventory, when set, gets the size of each inventory recorded.
	onInventory func(targets int)

	// mu guards the fields below.
	mu        sync.Mutex
	noChannel bool
	empty     string // why the inventory is empty; "" when it is not
	first     bool   // the first discovery was recorded
	// failing are the sources whose latest discovery failed, with why:
	// ready, since their last good targets are still probed, but said.
	failing []string
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
	if s.onInventory != nil {
		s.onInventory(inventory)
	}
	s.mu.Lock()
	first := !s.first
	s.first = true
	s.empty = ""
	s.failing = nil
	for _, r := range results {
		if r.Error != "" {
			s.failing = append(s.failing, fmt.Sprintf("discovery source %s is degraded (its last good targets are still probed; discovery_degraded): %s",
				policy.Printable(r.Name), policy.Printable(strings.Join(strings.Fields(r.Error), " "))))
		}
	}
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
	return append(out, s.failing...)
}

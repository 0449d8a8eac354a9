// Package serve is certwatch's HTTP face while `certwatch run` runs:
// Prometheus metrics on /metrics, liveness on /healthz, readiness on
// /readyz, a status page of every certificate by deadline on /, and the
// latest report as JSON on /api/v1/report (the `scan --output json` shape).
//
// A Server learns what to show from the daemon (it implements
// daemon.Recorder) and from the prober (ObserveProbe, set as the scan
// pass's OnObservation). Everything it serves is rendered from reports,
// which never hold secrets. Metrics use the Server's own registry, never
// Prometheus's global one.
package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/singleflight"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

// DefaultSeriesLimit caps per-certificate and per-endpoint series when
// Options.SeriesLimit is 0.
const DefaultSeriesLimit = 10000

// Check is one readiness condition: nil means ready.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// ChannelStats counts delivery attempts on one channel since start.
type ChannelStats struct {
	Channel string
	// Delivered, Retried and Refused count delivered messages, failed
	// attempts that will be retried, and notifications refused for good.
	Delivered, Retried, Refused uint64
	// Failing is set while the channel's deliveries keep failing.
	Failing bool
}

// Options configure a Server. The zero value serves with defaults and no
// readiness checks.
type Options struct {
	// Logger gets HTTP server errors; nil discards.
	Logger *slog.Logger
	// Now is the clock of the status page ("5 days left"); nil means
	// time.Now.
	Now func() time.Time
	// SeriesLimit caps the series of each per-certificate and per-endpoint
	// metric family; 0 means DefaultSeriesLimit.
	SeriesLimit int
	// Ready are the conditions /readyz checks besides the state store's
	// health (State), at every request, each within 2 seconds: they must
	// be cheap and must not query the store (e.g. the first inventory is
	// loaded).
	Ready []Check
	// Notes, when set, are listed by /readyz after its verdict: what an
	// operator should know that does not make certwatch unready (no
	// notification channel, an empty inventory).
	Notes func() []string
	// Outbox, when set, is read for the outbox metrics.
	Outbox state.Stats
	// State, when set, is the state store's health: /readyz is 503 naming
	// it ("state: ...") while it fails, certwatch_state_up is 0 when it (or
	// reading the Outbox) fails, and the status page says why.
	//
	// State and Outbox are not called at every request: scrapes, probes
	// and page views share one snapshot of both, read again (each call
	// within 2 seconds, one read at a time) once it is StoreTTL old.
	State func(ctx context.Context) error
	// StoreTTL is how old the snapshot of State and Outbox may get before
	// a request reads them again; 0 means DefaultStoreTTL. A store that
	// dies shows on /readyz and /metrics within StoreTTL plus one read.
	StoreTTL time.Duration
	// Channels, when set, is read at every scrape and page view for
	// delivery counts per channel.
	Channels func() []ChannelStats
	// Silences, when set, serves GET /api/v1/silences, and, with
	// SilenceToken set, POST /api/v1/silences and
	// POST /api/v1/silences/{id}/expire to bearers of that token.
	Silences     Silences
	SilenceToken []byte
	// Pprof serves net/http/pprof's handlers under /debug/pprof/.
	Pprof bool
	// TempDir is where the latest report's compressed JSON and its status
	// page rows are kept, in files unlinked as they are created (about 16
	// and 8 MB at 100,000 endpoints); empty means the system's temporary
	// directory ($TMPDIR, else /tmp). Where no file can be written they
	// are kept in memory, with a warning.
	TempDir string
	// Version is shown on the status page and in certwatch_build_info.
	Version string
	// Rendering, when set, is called as each rendering of the status
	// page starts, and the done it returns once the page is sent and the
	// rendering has let go of the rows it read back (15–26 MB at its
	// height, whatever the report's size; mostly garbage), without
	// waiting for it: `certwatch run` collects more often in between,
	// and gives the memory back at done, so that a visit does not leave
	// the daemon's resident set at its height until the runtime returns
	// it.
	Rendering func() (done func())
}

// Server serves metrics, health, the status page and the report API. It is
// safe for concurrent use: the daemon records while handlers read.
type Server struct {
	opts     Options
	logger   *slog.Logger
	registry *prometheus.Registry
	metrics  *metrics
	page     *pageRenderer

	// termMu guards the leadership RecordTerm records.
	termMu  sync.Mutex
	term    state.Term
	termSet bool

	shardCounters *shardCounters

	// mu guards the latest view of the world.
	mu sync.RWMutex
	// report is the latest report, compressed; view what the metrics
	// and the page show of it.
	report    *heldReport
	view      *view
	discovery []scan.SourceResult
	inventory int
	lastRun   map[string]runInfo

	// picks makes renderings of the status page at the same time with
	// the same filter share one reading of the rows, and pickMu makes
	// readings happen one after the other (Server.pickRows): a second or
	// two of CPU each at 100,000 certificates.
	picks  singleflight.Group
	pickMu sync.Mutex

	// storeReads makes concurrent requests share one read of the store.
	storeReads singleflight.Group
	// authFailures counts failed attempts at the silence token.
	authFailures authFailures
	// keptInMemory is set once a report's compressed JSON could not be
	// kept in a file (warned about once).
	keptInMemory atomic.Bool

	// snapMu guards snap, the latest snapshot of the store.
	snapMu sync.Mutex
	snap   storeSnapshot
}

// runInfo is the latest outcome of one job.
type runInfo struct {
	LastSuccess time.Time
	LastRun     time.Time
	LastError   string
}

type endpointKey struct {
	name    string
	port    int
	address string
}

// New returns a Server. It starts nothing; see Serve and Handler.
func New(o Options) *Server {
	if o.SeriesLimit <= 0 {
		o.SeriesLimit = DefaultSeriesLimit
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:     o,
		logger:   logger,
		registry: prometheus.NewRegistry(),
		lastRun:  map[string]runInfo{},
		page:     newPageRenderer(),

		shardCounters: newShardCounters(),
	}
	s.metrics = newMetrics(s)
	s.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		s.metrics,
		newLeaderCollector(s),
		s.shardCounters.shards,
		s.shardCounters.endpoints,
	)
	return s
}

func (s *Server) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// Handler returns the HTTP handler of every endpoint.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /api/v1/report", s.apiReport)
	if s.opts.Silences != nil {
		mux.HandleFunc("GET /api/v1/silences", s.listSilences)
		mux.HandleFunc("POST /api/v1/silences", s.addSilence)
		mux.HandleFunc("POST /api/v1/silences/{id}/expire", s.expireSilence)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Rendering != nil {
			done := s.opts.Rendering()
			// Not waited for: the response ends as the handler returns.
			defer func() { go done() }()
		}
		s.statusPage(w, r)
	})
	mux.Handle("GET /static/", staticHandler())
	if s.opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return securityHeaders(mux)
}

// securityHeaders forbids everything the pages do not need: no external
// resource, no inline script, no framing.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// Serve serves Handler on ln until ctx is done, then shuts down, giving
// requests in flight 5 seconds. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      2 * time.Minute, // a CPU profile takes 30s
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("shut down http on %s: %w", ln.Addr(), err)
	}
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	var failed []string
	if err := s.storeView(r.Context()).stateErr; err != nil {
		failed = append(failed, "state: "+err.Error())
	}
	for _, c := range s.opts.Ready {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		err := c.Check(ctx)
		cancel()
		if err != nil {
			failed = append(failed, c.Name+": "+err.Error())
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var notes []string
	if s.opts.Notes != nil {
		notes = s.opts.Notes()
	}
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready:")
		for _, f := range failed {
			fmt.Fprintln(w, "  "+f)
		}
	} else {
		fmt.Fprintln(w, "ready"+s.role())
	}
	for _, n := range notes {
		fmt.Fprintln(w, "  note: "+n)
	}
}

func (s *Server) apiReport(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	report := s.report
	s.mu.RUnlock()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", "Accept-Encoding")
	if report == nil {
		http.Error(w, "no report yet: the first probe run has not finished", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// As `scan --output json` writes it, kept compressed: a client that
	// accepts gzip gets it as it is held, another decompressed as it is
	// sent (a report of 100,000 endpoints is about 110 MB of JSON).
	gzipped := acceptsGzip(r.Header.Get("Accept-Encoding"))
	if gzipped {
		w.Header().Set("Content-Encoding", "gzip")
	}
	if err := report.writeJSON(w, gzipped); err != nil {
		s.logger.Debug("report not sent in full", "remote", r.RemoteAddr, "err", err)
	}
}

// ObserveProbe records one probe's outcome for the duration histogram (if
// it made a connection). Set it as the scan pass's OnObservation. The
// per-endpoint series are the report's (RecordReport).
func (s *Server) ObserveProbe(o *probes.Observation) {
	result := "ok"
	if o.Failure != probes.FailNone {
		result = string(o.Failure)
	}
	if o.Attempts > 0 {
		// A probe that made no connection (the sweep gave up on the
		// address, a failed lookup, a run cut short) has no latency:
		// observed as 0 s it would make a hung address look fast. It is
		// still counted in certwatch_endpoints by its result.
		s.metrics.probeDuration.WithLabelValues(result).Observe(o.Duration.Seconds())
	}
}

// RecordDiscovery records each source's targets and the inventory size.
func (s *Server) RecordDiscovery(results []scan.SourceResult, inventory int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.discovery = results
	s.inventory = inventory
}

// RecordReport makes r the report shown by the status page, the API and
// the metrics. r must not be modified afterwards.
//
// Until release is called the server holds r as it is, which costs
// nothing while the daemon holds it too (as it notifies, its run's
// largest step), and the previous report's compressed JSON is let go at
// once. release compresses r (about a second at 100,000 endpoints; 17 MB
// kept of a report of about 60 MB) and lets it go: the daemon calls it
// once it is done with r. Before, the report was compressed as it was
// recorded, so that the page's 17 MB were held beside the notifier's work
// at every run's peak. A release after a newer report was recorded, or a
// second one, does nothing.
func (s *Server) RecordReport(r *scan.Report) (release func()) {
	// The summary of the report as published (the daemon adds findings
	// and marks silences after the pass summed it up): what the page, the
	// API and the metrics all render.
	published := *r
	published.Summary = scan.NewSummary(r)
	r = &published
	s.mu.Lock()
	pending := &heldReport{whole: r}
	pending.hint, pending.rowsHint = s.report.sizeHint()
	// The previous report and view are let go before the new view is
	// built (readers wait on s.mu meanwhile; one rendering still holds
	// what it took): two of them at once were the daemon's peak.
	s.report, s.view = pending, nil
	s.view = buildView(r, s.opts.SeriesLimit)
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.keepCompressed(pending) }) }
}

// keepCompressed replaces pending, the report recorded and held as it is,
// with its compressed JSON and page rows (holdReport), unless a newer
// report was recorded meanwhile. Compressed before the lock is taken, so
// that readers do not wait for it.
func (s *Server) keepCompressed(pending *heldReport) {
	s.mu.RLock()
	current := s.report == pending
	s.mu.RUnlock()
	if !current {
		return // a newer report was recorded: pending is let go
	}
	held, err := holdReport(pending.whole, pending.hint, pending.rowsHint, s.opts.TempDir)
	if err != nil {
		s.logger.Error("cannot compress the report to keep it: it is kept as it is", "err", err)
		return
	}
	if err := held.fileError(); err != nil && s.keptInMemory.CompareAndSwap(false, true) {
		s.logger.Warn("cannot keep the report's compressed JSON and page rows in temporary files: they are kept in memory from one run to the next; set TMPDIR to a writable directory",
			"bytes", held.keptSize(), "err", err)
	}
	s.mu.Lock()
	if s.report == pending {
		s.report = held
	}
	s.mu.Unlock()
}

// RecordRun records one run of a daemon job; err nil is success.
func (s *Server) RecordRun(job string, start time.Time, took time.Duration, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, daemon.ErrSkipped):
		result = "skipped"
	case errors.Is(err, daemon.ErrTimeout):
		result = "timeout"
	default:
		result = "error"
	}
	s.metrics.jobRuns.WithLabelValues(job, result).Inc()
	if result == "skipped" {
		return
	}
	s.metrics.jobDuration.WithLabelValues(job).Observe(took.Seconds())
	s.mu.Lock()
	defer s.mu.Unlock()
	ri := s.lastRun[job]
	ri.LastRun = start
	ri.LastError = ""
	if err != nil {
		ri.LastError = err.Error()
	} else {
		ri.LastSuccess = start.Add(took)
	}
	s.lastRun[job] = ri
}

// RecordLastSuccess records when job last succeeded before a restart, so
// that certwatch_last_success_timestamp_seconds is exported from start-up.
// A later success recorded by RecordRun wins.
func (s *Server) RecordLastSuccess(job string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ri := s.lastRun[job]
	if at.After(ri.LastSuccess) {
		ri.LastSuccess = at
	}
	s.lastRun[job] = ri
}

// channels returns the channel stats sorted by name, or nil.
func (s *Server) channels() []ChannelStats {
	if s.opts.Channels == nil {
		return nil
	}
	cs := s.opts.Channels()
	out := make([]ChannelStats, len(cs))
	copy(out, cs)
	for i := range out {
		out[i].Channel = cmp.Or(out[i].Channel, "unnamed")
	}
	return out
}

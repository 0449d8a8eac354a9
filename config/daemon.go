package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Daemon configures `certwatch run`: when each job runs, how long a run may
// take, how a shutdown ends, how certwatch watches itself and where it
// serves metrics and the status page.
type Daemon struct {
	// Listen is the HTTP address of /metrics, /healthz, /readyz, the status
	// page and /api/v1/report. The default binds loopback only; serving
	// beyond it is an explicit choice ("0.0.0.0:9814", "[::]:9814"). Port 0
	// picks a free port, which is logged.
	Listen string `yaml:"listen"`
	// Schedules are cron specs ("*/15 * * * *") or descriptors ("@every 1h",
	// "@daily"), in the process's time zone (UTC in the container image)
	// unless a spec starts with CRON_TZ=.
	Schedules Schedules `yaml:"schedules"`
	// Jitter is the upper bound of the random offset each job gets at start,
	// so that instances restarted together do not probe in lock-step. It
	// must be below half the shortest gap between two runs of a job.
	Jitter Duration `yaml:"jitter"`
	// SweepTimeout bounds one discovery or probe run. 0 means the shortest
	// gap between two runs of the job minus Jitter, so a run ends before the
	// next one is due. A probe run's, set or derived, must be at least
	// probe.timeout × (1 + probe.retries), the time one address that does
	// not answer can take (see ValidateSweep): a run cut short reports the
	// endpoints it did not reach as not probed.
	SweepTimeout Duration `yaml:"sweep_timeout,omitempty"`
	// GracePeriod is how long a running job may go on after SIGTERM before it
	// is cancelled, and then how long the outbox gets to drain.
	GracePeriod Duration `yaml:"grace_period"`
	// DropThreshold raises discovery_degraded when a source returns fewer
	// than this share of the targets of its last good run (0.5: half).
	// 0 disables the check; a source that fails always raises it.
	DropThreshold float64 `yaml:"drop_threshold"`
	// Heartbeat is pinged after every successful probe run, for a
	// dead-man's switch that notices when certwatch stops.
	Heartbeat Heartbeat `yaml:"heartbeat,omitempty"`
	// MetricsSeriesLimit caps the per-certificate and per-endpoint series of
	// /metrics (each family separately); the most urgent certificates and
	// failing endpoints are kept first, and
	// certwatch_metrics_series_dropped says how many were left out.
	MetricsSeriesLimit int `yaml:"metrics_series_limit"`
	// Pprof serves Go's /debug/pprof/ handlers on Listen. Off by default:
	// profiles reveal internals and cost CPU.
	Pprof bool `yaml:"pprof,omitempty"`
	// LeaderLease is how long the leadership of replicas sharing a
	// PostgreSQL state lasts unless renewed (it is renewed every quarter of
	// it): a standby takes over within about this long after the leader
	// dies or stalls. Unused with a SQLite state.
	LeaderLease Duration `yaml:"leader_lease"`
	// Site names the group of replicas this instance belongs to, when
	// instances in several AWS accounts or networks share one PostgreSQL
	// state: each site elects its own leader, discovers its own sources
	// and probes them on its own replicas, while the alert state is shared,
	// so a certificate seen from several sites is one finding with the
	// endpoints of all of them and one page. "" (the default) is the one
	// site of a deployment without sites. Letters, digits, '.', '_' and
	// '-', at most 63. Unused with a SQLite state.
	Site string `yaml:"site,omitempty"`
	// ShardSize is how many targets one shard of a shared probe run holds
	// (PostgreSQL state): the site leader cuts every run into shards that
	// the site's replicas claim, probe and write back, two database round
	// trips per shard. Targets sharing an address always go into one
	// shard, so the fleet keeps probe.per_address to any one address.
	ShardSize int `yaml:"shard_size"`
	// SiteStaleAfter: a site whose latest published run is older than
	// this raises site_stale (its last results are still used, so nothing
	// it knew is resolved). Unused without sites.
	SiteStaleAfter Duration `yaml:"site_stale_after"`
}

// Schedules are the cron specs of the daemon's jobs.
type Schedules struct {
	// Discovery refreshes the inventory from every source (zones, Route 53,
	// ACM, static targets).
	Discovery string `yaml:"discovery"`
	// Probe probes the last good inventory, evaluates it and hands the
	// findings to the notifier. (Digests go out on notify.digest_interval;
	// the outbox dispatcher runs all the time.)
	Probe string `yaml:"probe"`
}

// Heartbeat is a URL pinged (HTTP GET) after every successful probe run,
// e.g. a healthchecks.io check or a PagerDuty heartbeat. The URL usually
// embeds a token, so it is a secret: set exactly one of URLEnv, URLFile or
// (discouraged, the file may be shared) URL.
type Heartbeat struct {
	URL     Secret `yaml:"url,omitempty"`
	URLEnv  string `yaml:"url_env,omitempty"`
	URLFile string `yaml:"url_file,omitempty"`
	// Timeout bounds one ping.
	Timeout Duration `yaml:"timeout,omitempty"`
}

// Enabled reports whether a heartbeat URL is configured.
func (h Heartbeat) Enabled() bool { return h.URL != "" || h.URLEnv != "" || h.URLFile != "" }

// Daemon defaults.
const (
	// DefaultListen is loopback only, on a port of certwatch's own (9115 is
	// blackbox_exporter's).
	DefaultListen             = "127.0.0.1:9814"
	DefaultDiscoverySchedule  = "@every 1h"
	DefaultProbeSchedule      = "*/15 * * * *"
	DefaultJitter             = time.Minute
	DefaultGracePeriod        = 20 * time.Second
	DefaultDropThreshold      = 0.5
	DefaultHeartbeatTimeout   = 10 * time.Second
	DefaultMetricsSeriesLimit = 10000
	DefaultLeaderLease        = 20 * time.Second
	DefaultShardSize          = 100
	DefaultSiteStaleAfter     = time.Hour
)

// The shortest gaps between two runs of a job that a schedule may have.
const (
	MinDiscoveryInterval = time.Minute
	MinProbeInterval     = 5 * time.Second
	MaxGracePeriod       = 10 * time.Minute
)

func (d *Daemon) applyDefaults() {
	if d.Listen == "" {
		d.Listen = DefaultListen
	}
	if d.Schedules.Discovery == "" {
		d.Schedules.Discovery = DefaultDiscoverySchedule
	}
	if d.Schedules.Probe == "" {
		d.Schedules.Probe = DefaultProbeSchedule
	}
	if d.Jitter == 0 {
		d.Jitter = Duration(DefaultJitter)
	}
	if d.GracePeriod == 0 {
		d.GracePeriod = Duration(DefaultGracePeriod)
	}
	if d.LeaderLease == 0 {
		d.LeaderLease = Duration(DefaultLeaderLease)
	}
	if d.ShardSize == 0 {
		d.ShardSize = DefaultShardSize
	}
	if d.SiteStaleAfter == 0 {
		d.SiteStaleAfter = Duration(DefaultSiteStaleAfter)
	}
	if d.DropThreshold == 0 {
		d.DropThreshold = DefaultDropThreshold
	}
	if d.Heartbeat.Timeout == 0 {
		d.Heartbeat.Timeout = Duration(DefaultHeartbeatTimeout)
	}
	if d.MetricsSeriesLimit == 0 {
		d.MetricsSeriesLimit = DefaultMetricsSeriesLimit
	}
}

// ParseSchedule parses a cron spec the way the daemon does: five fields
// (minute hour day-of-month month day-of-week) or a descriptor such as
// "@every 1h" or "@daily", in the local time zone unless the spec starts
// with CRON_TZ=.
func ParseSchedule(spec string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid schedule %q (want e.g. \"*/15 * * * *\" or \"@every 1h\"): %s", spec, cronReason(err))
	}
	return s, nil
}

// cronReason is the cron parser's complaint without the copy of the spec's
// fields it appends ("found 1: [...]"), cut short: the spec is quoted
// already, and a megabyte of it does not belong in an error twice.
func cronReason(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": ["); i >= 0 && strings.HasSuffix(msg, "]") {
		msg = msg[:i]
	}
	return cutTo(msg, 4*maxQuoted)
}

// ShortestGap returns the shortest time between two consecutive runs of s,
// sampled over its next 64 runs from a fixed instant; 0 when it runs at
// most once.
func ShortestGap(s cron.Schedule) time.Duration {
	t := s.Next(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	gap := time.Duration(0)
	for range 64 {
		if t.IsZero() {
			break
		}
		next := s.Next(t)
		if next.IsZero() {
			break
		}
		if d := next.Sub(t); gap == 0 || d < gap {
			gap = d
		}
		t = next
	}
	return gap
}

// Validate reports every problem in d at once. Load runs it as part of
// Config.Validate.
func (d Daemon) Validate() []error { return d.validate() }

func (d *Daemon) validate() []error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, fieldf(join("daemon", path), "daemon: "+format, args...))
	}

	if err := checkListen(d.Listen); err != nil {
		add("listen", "listen: %v", err)
	}
	for _, j := range []struct {
		name, spec string
		min        time.Duration
		why        string
	}{
		{"discovery", d.Schedules.Discovery, MinDiscoveryInterval, "(each run transfers every zone and lists every AWS account)"},
		{"probe", d.Schedules.Probe, MinProbeInterval, "(each run connects to every endpoint)"},
	} {
		s, err := ParseSchedule(j.spec)
		if err != nil {
			add("schedules."+j.name, "schedules: %s: %v", j.name, err)
			continue
		}
		gap := ShortestGap(s)
		if gap == 0 {
			add("schedules."+j.name, "schedules: %s: %q never runs twice", j.name, j.spec)
			continue
		}
		// cron rounds "@every 100ms" (and 0s) up to a second: judge what
		// was written.
		if every, ok := strings.CutPrefix(strings.TrimSpace(j.spec), "@every "); ok {
			if d, err := time.ParseDuration(strings.TrimSpace(every)); err == nil && d < gap {
				gap = d
			}
		}
		if gap < j.min {
			add("schedules."+j.name, "schedules: %s: %q runs every %v, more often than the minimum of %v %s", j.name, j.spec, gap, j.min, j.why)
			continue
		}
		if d.Jitter > 0 && time.Duration(d.Jitter) >= gap/2 {
			add("jitter", "jitter (%v) must be below half the shortest gap between %s runs (%v); lower jitter or run %s less often", d.Jitter, j.name, gap, j.name)
		}
		if d.SweepTimeout > 0 && time.Duration(d.SweepTimeout) > gap {
			add("sweep_timeout", "sweep_timeout (%v) must not exceed the shortest gap between %s runs (%v), or runs would be skipped", d.SweepTimeout, j.name, gap)
		}
	}
	if d.Jitter < 0 {
		add("jitter", "jitter must not be negative, got %v", d.Jitter)
	}
	if d.SweepTimeout < 0 {
		add("sweep_timeout", "sweep_timeout must not be negative, got %v", d.SweepTimeout)
	}
	if d.GracePeriod <= 0 || d.GracePeriod > Duration(MaxGracePeriod) {
		add("grace_period", "grace_period must be above 0 and at most %v, got %v", MaxGracePeriod, d.GracePeriod)
	}
	if d.LeaderLease < Duration(time.Second) || d.LeaderLease > Duration(10*time.Minute) {
		add("leader_lease", "leader_lease must be at least 1s and at most 10m, got %v", d.LeaderLease)
	}
	if d.Site != "" && !validSite(d.Site) {
		add("site", "site %q must be 1 to 63 letters, digits, '.', '_' or '-' (e.g. the AWS account name)", d.Site)
	}
	if d.ShardSize < 1 || d.ShardSize > 100_000 {
		add("shard_size", "shard_size must be 1 to 100000 targets, got %d", d.ShardSize)
	}
	if d.SiteStaleAfter < Duration(time.Minute) {
		add("site_stale_after", "site_stale_after must be at least 1m, got %v", d.SiteStaleAfter)
	}
	if d.DropThreshold < 0 || d.DropThreshold >= 1 {
		add("drop_threshold", "drop_threshold must be at least 0 and below 1, got %g", d.DropThreshold)
	}
	if d.MetricsSeriesLimit < 1 || d.MetricsSeriesLimit > 1_000_000 {
		add("metrics_series_limit", "metrics_series_limit must be 1 to 1000000, got %d", d.MetricsSeriesLimit)
	}
	h := d.Heartbeat
	n := 0
	for _, set := range []bool{h.URL != "", h.URLEnv != "", h.URLFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		add("heartbeat", "heartbeat: set only one of url_env, url_file or url")
	}
	if h.URL != "" {
		// The URL carries a token: say what is wrong without printing it.
		if u, err := url.Parse(h.URL.Reveal()); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add("heartbeat.url", "heartbeat: url: not an http:// or https:// URL")
		}
	}
	if h.Timeout <= 0 {
		add("heartbeat.timeout", "heartbeat: timeout must be positive, got %v", h.Timeout)
	}
	return errs
}

// SweepFloor is the shortest sweep timeout that suits probe settings p:
// the time one address that does not answer can take, probe.timeout for
// each of its 1 + retries attempts. A shorter probe run is cut short, with
// endpoints not probed, whenever a single address does not answer.
func SweepFloor(p Probe) time.Duration {
	return time.Duration(p.Timeout) * time.Duration(1+max(p.Retries, 0))
}

// SweepTimeoutFor is the sweep timeout of a job whose runs are at least gap
// apart, as `certwatch run` applies it: SweepTimeout when set, else gap
// minus Jitter (at least half the gap and 1s).
func (d Daemon) SweepTimeoutFor(gap time.Duration) time.Duration {
	if d.SweepTimeout > 0 {
		return time.Duration(d.SweepTimeout)
	}
	return max(gap-time.Duration(d.Jitter), gap/2, time.Second)
}

// ValidateSweep reports a probe run's sweep timeout, set or derived from
// the probe schedule, that is below SweepFloor(p), saying what to change.
// It needs the probe section, so Validate does not run it; whoever
// validates a whole Config does.
func (d Daemon) ValidateSweep(p Probe) []error {
	floor := SweepFloor(p)
	budget := fmt.Sprintf("one address that does not answer can take %v (probe.timeout %v × %d attempts), so runs would be cut short, leaving endpoints not probed",
		floor, time.Duration(p.Timeout), 1+max(p.Retries, 0))
	if d.SweepTimeout > 0 {
		if time.Duration(d.SweepTimeout) < floor {
			return []error{fieldf("daemon.sweep_timeout", "daemon: sweep_timeout (%v) is too short: %s; raise sweep_timeout to at least %v (and space runs at least that far apart), or lower probe.timeout or probe.retries",
				d.SweepTimeout, budget, floor)}
		}
		return nil
	}
	s, err := ParseSchedule(d.Schedules.Probe)
	if err != nil {
		return nil // Validate reports it
	}
	gap := ShortestGap(s)
	if gap == 0 {
		return nil
	}
	if t := d.SweepTimeoutFor(gap); t < floor {
		return []error{fieldf("daemon", "daemon: probe runs get %v each (no sweep_timeout: the shortest gap between probe runs, %v, minus jitter, %v), which is too short: %s; run probe less often (schedules: probe, e.g. \"@every 1m\"), lower jitter, or lower probe.timeout or probe.retries",
			t, gap, time.Duration(d.Jitter), budget)}
	}
	return nil
}

// checkListen accepts "host:port" with a non-empty host and a port from 0
// (any free port) to 65535.
func checkListen(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("invalid address %q: want HOST:PORT, e.g. 127.0.0.1:9814", s)
	}
	if host == "" {
		return fmt.Errorf("invalid address %q: give the host explicitly (127.0.0.1 for loopback, 0.0.0.0 or [::] for every interface)", s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("invalid address %q: port must be 0 to 65535", s)
	}
	return nil
}

// validSite reports whether s is a usable site name.
func validSite(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

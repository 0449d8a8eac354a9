package assemble

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery/networks"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

var (
	_ daemon.Scanner   = (*scan.Pass)(nil)
	_ daemon.Collector = (*scan.Pass)(nil)
)

// Daemon is what a configuration builds for `certwatch run`; a reload
// builds it afresh.
type Daemon struct {
	Config daemon.Config
	Pass   *scan.Pass
	// Notifier hands the daemon's reports to Notify, marks what its
	// silences keep quiet and delivers its outbox (daemon.Notifier).
	Notifier daemon.Notifier
	// Notify is the notifier inside Notifier, for its channels' health.
	Notify *notify.Notifier
}

// Run builds the daemon's parts of c on store (nil when only checking):
// the pass (the CT source reads on from the positions store keeps, and a
// network shares its rate with the replicas of a shared store), the
// channels and notifier, and the schedules. It reads files and variables
// and dials nothing; a pass without a source is left to the caller.
func Run(ctx context.Context, c config.Config, store state.Store, client *http.Client, logger *slog.Logger) (Daemon, error) {
	pass, err := Pass(ctx, c, logger)
	if err != nil {
		return Daemon{}, err
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
	senders, err := Senders(c.Notify, client, logger)
	if err != nil {
		return Daemon{}, err
	}
	n, err := Notifier(c, store, senders, logger)
	if err != nil {
		return Daemon{}, err
	}
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
			return Daemon{}, err
		}
		dc.HeartbeatURL = u.Reveal()
	}
	return Daemon{Config: dc, Pass: pass, Notifier: daemonNotifier{n: n, silences: store}, Notify: n}, nil
}

// Check reports what `certwatch run` refuses at start in c, beyond what
// config.Load refused: the environment step (variables, secret files, CA
// files, kubeconfigs, the state's directory, read with getenv) and then,
// when that passes, every part run builds from c (sources, prober, rules,
// channels, notifier, schedules) built and dropped. Nothing is written,
// dialled or resolved. check-config and run (at start and on reload) call
// it, so what one passes the other cannot refuse; each problem is at its
// key's line where the file has one. A file without a source passes:
// scan's flags may add them.
func Check(ctx context.Context, c config.Config, getenv func(string) string) error {
	errs := c.EnvironmentProblems(getenv)
	if len(errs) == 0 {
		discard := slog.New(slog.DiscardHandler)
		parts, err := Run(ctx, c, nil, &http.Client{}, discard)
		if err == nil {
			_, err = daemon.New(parts.Config, parts.Pass, parts.Notifier, discard)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return c.Report(errs)
}

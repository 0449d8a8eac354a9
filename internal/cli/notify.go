package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/certwatch/certwatch/assemble"
	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

const alertsUsage = `Usage:
  certwatch alerts --config FILE [flags]

List the alert state kept in the state file (notify.state): every open
alert with its tier, the tier last announced, when it was first raised and
what each channel was told. With --all, resolved alerts too. It only
reads, and works beside a running 'certwatch run'.
`

const notifyUsage = `Usage:
  certwatch notify test --config FILE --channel NAME

Send a test message to one configured channel at once (bypassing the
outbox), to check its token or routing key, channel name and network path.
Exit code 0 when the service accepted it, 1 when not.
`

func (e *env) alerts(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("alerts", flag.ContinueOnError)
	configFile := fs.String("config", "", "config `file` whose notify.state names the state file")
	all := fs.Bool("all", false, "include resolved alerts")
	output := fs.String("output", "table", "`table` or json")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, alertsUsage)
			return nil
		}
		return err
	}
	c, err := loadConfigFlag(*configFile)
	if err != nil {
		return err
	}
	store, err := openState(ctx, c)
	if err != nil {
		return err
	}
	defer store.Close()
	alerts, err := store.Alerts(ctx, *all)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e.stdout, alerts)
	}
	if len(alerts) == 0 {
		fmt.Fprintf(e.stdout, "No alerts in %s.\n", assemble.StateName(c.Notify.State))
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIER\tANNOUNCED\tKIND\tSUBJECT\tDEADLINE\tFIRST RAISED\tSTATE\tCHANNELS")
	for _, a := range alerts {
		st := "open"
		if !a.ResolvedAt.IsZero() {
			st = "resolved " + a.ResolvedAt.UTC().Format(time.DateOnly)
		}
		chans := a.Channels.Names()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Tier, a.Announced, a.Finding.Kind,
			orDash(cmpOr(a.Finding.Subject, a.Finding.Name)), a.Finding.Deadline.UTC().Format("2006-01-02 15:04"),
			a.FirstRaised.UTC().Format("2006-01-02 15:04"), st, orDash(strings.Join(chans, ",")))
	}
	return tw.Flush()
}

func (e *env) notifyCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "test" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(e.stdout, notifyUsage)
			return nil
		}
		fmt.Fprint(e.stderr, notifyUsage)
		return usageError("notify: want 'notify test --channel NAME'")
	}
	fs := flag.NewFlagSet("notify test", flag.ContinueOnError)
	configFile := fs.String("config", "", "config `file` with the notify channels")
	channel := fs.String("channel", "", "`name` of the channel to test (see notify.channels)")
	if err := parseFlags(fs, args[1:]); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, notifyUsage)
			return nil
		}
		return err
	}
	c, err := loadConfigFlag(*configFile)
	if err != nil {
		return err
	}
	if *channel == "" {
		return usageError("notify test: --channel is required (configured: %s)", strings.Join(channelNames(c.Notify), ", "))
	}
	if !containsChannel(c.Notify, *channel) {
		return usageError("notify test: no channel %q in the config (configured: %s)", *channel, strings.Join(channelNames(c.Notify), ", "))
	}
	// Only this channel's secret is read: another channel's missing token
	// must not stop this one from being tested.
	ch, _ := c.Notify.Channel(*channel)
	sender, err := assemble.Sender(c.Notify, ch, &http.Client{}, newLogger(e.stderr, slog.LevelWarn))
	if err != nil {
		return withCode(ExitUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := sender.Send(ctx, notify.TestNotification(*channel, time.Now())); err != nil {
		return fmt.Errorf("notify test %s: %w", *channel, err)
	}
	fmt.Fprintf(e.stdout, "Test message delivered to %s.\n", *channel)
	return nil
}

// notifyReport hands a scan's report to the configured channels and waits
// (bounded) until the outbox is delivered.
func (e *env) notifyReport(ctx context.Context, c config.Config, r *scan.Report, logger *slog.Logger) error {
	if len(c.Notify.Channels) == 0 {
		return usageError("--notify: no channels configured; add notify.channels to the --config file")
	}
	n, closeStore, err := openNotifier(ctx, c, logger)
	if err != nil {
		return err
	}
	defer closeStore()
	rep, err := n.Apply(ctx, assemble.Sweep(r), r.GeneratedAt)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	// How long 'scan --notify' waits for the outbox to drain before it
	// gives up and leaves the rest for the next run.
	wait := time.Duration(c.Notify.FlushTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("outbox not drained within notify.flush_timeout (%v, --notify-timeout); the rest is delivered on the next run", wait))
	defer cancel()
	if err := n.Flush(ctx); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	fmt.Fprintf(e.stderr, "Notified: %d new, %d escalated, %d reminded, %d resolved (%d notification(s) queued; digest items wait for the next digest).\n",
		rep.New, rep.Escalated, rep.Reminded, rep.Resolved, rep.Queued)
	return nil
}

// openNotifier builds the configured senders and a notifier on the state
// file; the caller closes the store with the returned func.
func openNotifier(ctx context.Context, c config.Config, logger *slog.Logger) (*notify.Notifier, func(), error) {
	senders, err := assemble.Senders(c.Notify, &http.Client{}, logger)
	if err != nil {
		return nil, nil, withCode(ExitUsage, err)
	}
	store, err := openState(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if err := refuseSharedState(ctx, store); err != nil {
		store.Close()
		return nil, nil, err
	}
	n, err := assemble.Notifier(c, store, senders, logger)
	if err != nil {
		store.Close()
		return nil, nil, withCode(ExitUsage, err)
	}
	return n, func() { store.Close() }, nil
}

// openState opens the state of c (assemble.Store); a password it cannot
// read is a usage error.
func openState(ctx context.Context, c config.Config) (state.Store, error) {
	store, err := assemble.Store(ctx, c)
	var fe *config.FieldError
	if errors.As(err, &fe) {
		return nil, withCode(ExitUsage, err)
	}
	return store, err
}

func loadConfigFlag(path string) (config.Config, error) {
	if path == "" {
		return config.Config{}, usageError("--config FILE is required: the notify section names the channels and the state file")
	}
	c, err := config.Load(path)
	if err != nil {
		return c, withCode(ExitUsage, err)
	}
	return c, nil
}

func channelNames(n config.Notify) []string {
	var out []string
	for _, ch := range n.Channels {
		out = append(out, ch.Name)
	}
	if len(out) == 0 {
		out = []string{"none"}
	}
	return out
}

func containsChannel(n config.Notify, name string) bool {
	for _, ch := range n.Channels {
		if ch.Name == name {
			return true
		}
	}
	return false
}

// refuseSharedState refuses a PostgreSQL state that `certwatch run`
// instances share (they publish their runs there): their alerts are
// judged on every site's runs together, and a scan's view alone would
// take what it did not probe as fixed and resolve it.
func refuseSharedState(ctx context.Context, store state.Store) error {
	sh, ok := store.(state.Shared)
	if !ok {
		return nil
	}
	sites, err := sh.Sites(ctx)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if len(sites) == 0 {
		return nil
	}
	names := make([]string, len(sites))
	for i, s := range sites {
		names[i] = cmp.Or(s.Site, "default")
	}
	return usageError("--notify: notify.state is shared by certwatch run instances (sites: %s), which judge its alerts on all their runs together; "+
		"a scan's findings alone would resolve what it did not probe. Run the scan without --notify (its report and exit code stay), or point notify.state elsewhere",
		strings.Join(names, ", "))
}

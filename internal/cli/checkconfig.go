package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/daemon"
)

const checkConfigUsage = `Usage:
  certwatch check-config FILE

Validate FILE and print the effective configuration: the file laid over the
defaults. Every problem is reported at once, with its YAML line where it has
one. Tiers print from notice to critical, durations as the file writes them.
Secrets print as <secret>. Settings that are valid but unsafe (a plain
http:// URL for a channel whose requests carry its token or routing key)
print as warnings on stderr.
Exit code 0 when valid, 2 when not.
`

func (e *env) checkConfig(args []string) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, checkConfigUsage)
			return nil
		}
		return err
	}
	if fs.NArg() != 1 {
		return usageError("check-config: want exactly one FILE (see 'certwatch check-config --help')")
	}
	c, err := config.Load(fs.Arg(0))
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if err := e.checkStart(context.Background(), c); err != nil {
		return withCode(ExitUsage, fmt.Errorf("config %s: %w", fs.Arg(0), err))
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("config: %w", err))
	}
	doc, err := config.Effective(c, data)
	if err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	for _, w := range c.Warnings() {
		fmt.Fprintln(e.stderr, "certwatch: warning:", w)
	}
	fmt.Fprintf(e.stdout, "# %s is valid. Effective configuration:\n", fs.Arg(0))
	enc := yaml.NewEncoder(e.stdout)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	return enc.Close()
}

// checkStart reports what `certwatch run` refuses at start in c, beyond
// what config.Load refused: the environment step (variables, secret files,
// CA files, kubeconfigs, the state's directory) and then, when that
// passes, every part run builds from c (sources, prober, rules, channels,
// notifier, schedules) built and dropped. Nothing is written, dialled or
// resolved. check-config and run (at start and on reload) call it, so
// what one passes the other cannot refuse; each problem is at its key's
// line where the file has one. A file without a source passes: scan's
// flags may add them.
func (e *env) checkStart(ctx context.Context, c config.Config) error {
	errs := c.EnvironmentProblems(e.getenv)
	if len(errs) == 0 {
		discard := slog.New(slog.DiscardHandler)
		parts, err := e.buildRun(ctx, c, nil, nil, &http.Client{}, discard)
		if err == nil {
			_, err = daemon.New(parts.cfg, parts.pass, parts.notifier, discard)
		}
		if err != nil {
			errs = append(errs, unwrapExit(err))
		}
	}
	return c.Report(errs)
}

// unwrapExit returns the error an *exitError carries, so that the errors
// joined in it can be reported one by one.
func unwrapExit(err error) error {
	var x *exitError
	if errors.As(err, &x) {
		return x.err
	}
	return err
}

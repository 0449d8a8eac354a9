package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/internal/lab"
)

const demoUsage = `Usage:
  certwatch demo [flags]

Start a local lab on loopback only (127.0.0.0/8 and ::1): an authoritative
DNS server serving the zone internal.example over AXFR, and TLS endpoints
with planted problems (an expired certificate, a shared wildcard about to
expire, an expiring intermediate, a wrong host name, a missing
intermediate, a self-signed certificate, a half-finished rollout, an SRV
service on its own port, a silent port, an expired cross-sign in a bundle).
Then scan it through exactly the code path of 'certwatch scan' and print
the report. Nothing leaves the machine.

With --keep, the lab stays up after the report until Ctrl-C, and the
equivalent 'certwatch scan' command line is printed so you can run it (or
'certwatch inventory') yourself.
`

func (e *env) demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	output := fs.String("output", "table", "report format: `table` or json")
	keep := fs.Bool("keep", false, "keep the lab running after the report, until interrupted")
	verbose := fs.Bool("v", false, "log progress to stderr")
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, demoUsage)
			return nil
		}
		return err
	}
	l, err := lab.Start(time.Now())
	if err != nil {
		return fmt.Errorf("demo: start lab: %w", err)
	}
	defer l.Close()

	c := config.Default()
	c.Zones = []config.Zone{{Name: lab.Zone, Nameserver: config.HostPort(l.DNS)}}
	c.Targets = []config.Target{config.Target(l.Unreachable)}
	c.Ports = []int{l.Port}
	c.CAFiles = []string{l.CAFile}
	c.Probe.Timeout = config.Duration(time.Second)
	c.Output = *output
	if err := c.Validate(); err != nil {
		return withCode(ExitUsage, err)
	}
	cmdline := fmt.Sprintf("certwatch scan --zone %s --nameserver %s --ports %d --ca-file %s --target %s --timeout 1s",
		lab.Zone, l.DNS, l.Port, l.CAFile, l.Unreachable)
	if *output == "table" {
		fmt.Fprintf(e.stdout, "certwatch demo: lab of zone %s served by %s (AXFR), TLS on port %d:\n  %s\n\nScanning as: %s\n\n",
			lab.Zone, l.DNS, l.Port, strings.Join(l.Planted, "\n  "), cmdline)
	}
	level := slog.LevelError // the report itself says what failed
	if *verbose {
		level = slog.LevelDebug
	}
	err = e.runScan(ctx, c, newLogger(e.stderr, level), false)
	if fe := (*findingsError)(nil); errors.As(err, &fe) {
		if *output == "table" {
			fmt.Fprintf(e.stdout, "\n'certwatch scan' would exit 1 here (%v); the demo exits 0.\n", err)
		}
		err = nil
	}
	if err != nil || !*keep {
		return err
	}
	fmt.Fprintf(e.stderr, "\nLab running until Ctrl-C. Try:\n  %s\n  certwatch inventory --zone %s --nameserver %s --ports %d\n", cmdline, lab.Zone, l.DNS, l.Port)
	<-ctx.Done()
	return nil
}

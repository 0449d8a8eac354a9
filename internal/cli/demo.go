package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
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
service on its own port, SMTP behind STARTTLS found through a _submission
SRV record, an IMAP server that offers no STARTTLS, a silent port, an
expired cross-sign in a bundle, and a service no name points to, found by
sweeping its address range), two child zones delegated to their own
name servers: svc.internal.example, followed and scanned as part of the
zone, and partners.internal.example, which refuses transfers (a coverage
gap), and a Certificate Transparency log holding a renewal that was never
deployed and a certificate from a CA that is not the lab's.
Then scan it through exactly the code path of 'certwatch scan' and print
the report. Nothing leaves the machine.

With --keep, the lab stays up after the report until Ctrl-C, and the
equivalent 'certwatch scan' command line is printed so you can run it (or
'certwatch inventory') yourself. A ready 'certwatch run' configuration for
the lab is written next to its CA file, with the command that uses it.
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
	l, err := lab.StartWith(time.Now(), lab.Options{Delegations: true, CT: true})
	if err != nil {
		return fmt.Errorf("demo: start lab: %w", err)
	}
	defer l.Close()

	// The CT log is set in a file, which the printed command lines take
	// too: no flag names a log.
	ctConfig, err := writeCTConfig(l)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	c, err := config.Load(ctConfig)
	if err != nil {
		return fmt.Errorf("demo: the CT configuration for the lab does not load: %w", err)
	}
	c.Zones = []config.Zone{{Name: lab.Zone, Nameserver: config.HostPort(l.DNS)}}
	c.Targets = []config.Target{{Spec: l.Unreachable}}
	noReverse := false // the lab's addresses have no reverse zone: ask no resolver
	c.Networks = []config.Network{{Name: "lab-oob", CIDRs: []string{l.Network}, ReverseDNS: &noReverse}}
	c.Ports = config.PortList{{Number: l.Port}}
	c.CAFiles = []string{l.CAFile}
	c.Files = []config.Files{{Paths: []string{filepath.Join(l.AtRestDir, "**")}}}
	c.Probe.Timeout = config.Duration(time.Second)
	// The lab's zone names loopback addresses, which discovery may not aim
	// probes at unless told to.
	c.Probe.AllowLoopback = true
	c.Coverage.DelegationPort = l.DelegationPort
	c.Output = *output
	if err := c.Validate(); err != nil {
		return withCode(ExitUsage, err)
	}
	cmdline := fmt.Sprintf("certwatch scan --config %s --zone %s --nameserver %s --ports %d --ca-file %s --target %s --file '%s' --network %s --timeout 1s --allow-loopback --delegation-port %d",
		ctConfig, lab.Zone, l.DNS, l.Port, l.CAFile, l.Unreachable, filepath.Join(l.AtRestDir, "**"), l.Network, l.DelegationPort)
	if *output == "table" {
		fmt.Fprintf(e.stdout, "certwatch demo: lab of zone %s served by %s (AXFR), TLS on port %d:\n  %s\n\nScanning as: %s\n\n",
			lab.Zone, l.DNS, l.Port, strings.Join(l.Planted, "\n  "), cmdline)
	}
	level := slog.LevelError // the report itself says what failed
	if *verbose {
		level = slog.LevelDebug
	}
	err = e.runScan(ctx, c, newLogger(e.stderr, level), false, false)
	if fe := (*findingsError)(nil); errors.As(err, &fe) {
		if *output == "table" {
			fmt.Fprintf(e.stdout, "\n'certwatch scan' would exit 1 here (%v); the demo exits 0.\n", err)
		}
		err = nil
	}
	if err != nil || !*keep {
		return err
	}
	runConfig, listen, err := writeRunConfig(l)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	// inventory probes nothing: it takes the flags that say where to
	// discover, the delegation port and loopback among them, or it would
	// not follow the lab's delegated zones.
	inventory := fmt.Sprintf("certwatch inventory --zone %s --nameserver %s --ports %d --target %s --network %s --allow-loopback --delegation-port %d",
		lab.Zone, l.DNS, l.Port, l.Unreachable, l.Network, l.DelegationPort)
	fmt.Fprintf(e.stderr, "\nLab running until Ctrl-C. Try:\n  %s\n  %s\n  %s\n"+
		"or run the daemon against it (status page on http://%s/, findings logged):\n  certwatch run --config %s\n",
		cmdline, inventory, strings.Replace(cmdline, "certwatch scan", "certwatch coverage", 1), listen, runConfig)
	<-ctx.Done()
	return nil
}

// ctSection is the ct: section of a configuration for the lab's CT log.
func ctSection(l *lab.Lab) string {
	return fmt.Sprintf(`ct:
  logs:
    - url: %s
      origin: %s
      key: %s
  domains: [%s]
  expected_issuers: [%q]
`, l.CT.URL, l.CT.Origin, l.CT.Key, lab.Zone, strings.Join(l.CT.ExpectedIssuers, `", "`))
}

// writeCTConfig writes the configuration of the lab's CT log next to its
// CA file (removed with the lab), and returns its path.
func writeCTConfig(l *lab.Lab) (string, error) {
	path := filepath.Join(filepath.Dir(l.CAFile), "ct.yaml")
	text := "# The Certificate Transparency log of the lab of 'certwatch demo'.\n" + ctSection(l)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", fmt.Errorf("write the CT configuration: %w", err)
	}
	return path, nil
}

// writeRunConfig writes a `certwatch run` configuration for the lab next
// to its CA file (removed with the lab), checks that it loads, and returns
// its path and the address it serves HTTP on.
func writeRunConfig(l *lab.Lab) (path, listen string, err error) {
	// A free port now, so the status page's address can be printed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", fmt.Errorf("find a free port for the daemon: %w", err)
	}
	listen = ln.Addr().String()
	ln.Close()
	dir := filepath.Dir(l.CAFile)
	path = filepath.Join(dir, "certwatch-run.yaml")
	text := fmt.Sprintf(`# certwatch run configuration for the lab of 'certwatch demo --keep'.
zones:
  - name: %s
    nameserver: %s
targets: [%q]
files:
  - paths: [%q]
networks:
  - name: lab-oob
    cidrs: [%q]
    reverse_dns: false
ports: [%d]
ca_files: [%q]
probe:
  timeout: 1s
  allow_loopback: true # the lab's zone names loopback addresses
coverage:
  delegation_port: %d
%snotify:
  state: %q
  channels:
    - name: log        # one log line per notification, on stderr
      kind: log
  routes:
    - tiers: [notice, warning, page, critical]
      channels: [log]
daemon:
  listen: %s
  schedules:
    discovery: "@every 5m"
    probe: "@every 1m"
  jitter: 5s
`, lab.Zone, l.DNS, l.Unreachable, filepath.Join(l.AtRestDir, "**"), l.Network, l.Port, l.CAFile, l.DelegationPort, ctSection(l), filepath.Join(dir, "state.db"), listen)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", "", fmt.Errorf("write the run configuration: %w", err)
	}
	if _, err := config.Load(path); err != nil {
		return "", "", fmt.Errorf("the run configuration for the lab does not load: %w", err)
	}
	return path, listen, nil
}

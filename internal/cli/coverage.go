package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

const coverageUsage = `Usage:
  certwatch coverage [flags]

Say what certwatch watches, and what it does not. Run the scan 'certwatch
scan' runs, with the same flags and --config, and print: per source, the
targets and names it gave, the endpoints probed and the certificates found;
the DNS zones read whole (configured zones, delegations followed, Route 53
zones); the certificates held at rest by kind of location (file, keystore,
secret, configmap, webhook, ...); and every coverage gap with its reason
and fix (a delegated zone that refused its transfer, names on certificates
under a zone no source watches, a certificate in use that no probed
endpoint serves, a cert-manager Certificate whose Secret was not read, names
under ct.domains that only a CT log shows, with the log entry). With
--output json, the coverage object of the scan's JSON report.

Exit codes: 0 no coverage gap at or above --fail-on (default page; gaps
are warnings and notices unless policy: says otherwise); 1 gaps at or
above it; 2 usage or config error, or every discovery source failed.
`

func (e *env) coverage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("coverage", flag.ContinueOnError)
	var f scanFlags
	f.register(fs, false)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			printUsage(e.stdout, fs, coverageUsage)
			return nil
		}
		return err
	}
	if f.notify {
		return usageError("--notify: coverage only reports; use 'certwatch scan --notify' to send findings")
	}
	c, err := f.effectiveConfig(fs, e.getenv)
	if err != nil {
		return err
	}
	level := slog.LevelError
	if f.verbose {
		level = slog.LevelDebug
	}
	restore, err := f.procs.apply(e, fs)
	if err != nil {
		return err
	}
	defer restore()
	return e.runCoverage(ctx, c, newLogger(e.stderr, level))
}

func (e *env) runCoverage(ctx context.Context, c config.Config, logger *slog.Logger) error {
	pass, err := newPass(ctx, c, logger)
	if err != nil {
		return err
	}
	report, err := pass.Run(ctx)
	if errors.Is(err, scan.ErrNoSource) {
		return withCode(ExitUsage, err)
	}
	if report == nil {
		return err
	}
	cov := report.Coverage
	if cov == nil {
		cov = &scan.Coverage{}
	}
	sum := scan.SummaryOf(report)
	if c.Output == "json" {
		if werr := writeJSON(e.stdout, coverageReport{Coverage: *cov, Summary: sum}); werr != nil {
			return fmt.Errorf("write coverage: %w", werr)
		}
	} else if werr := writeCoverage(e.stdout, cov, sum, columnsFrom(e.getenv)); werr != nil {
		return fmt.Errorf("write coverage: %w", werr)
	}
	if err != nil {
		return err
	}
	failOn := c.FailOn
	n := 0
	for _, g := range cov.Gaps {
		if failOn != policy.None && g.Tier >= failOn {
			n++
		}
	}
	if n > 0 {
		return &exitError{code: ExitFindings, err: fmt.Errorf("%d coverage gap(s) at or above %s", n, failOn)}
	}
	return nil
}

// coverageReport is the JSON shape of `certwatch coverage --output json`:
// the coverage, and the summary of the report it comes from.
type coverageReport struct {
	scan.Coverage
	Summary scan.Summary `json:"summary"`
}

// writeCoverage writes the coverage as tables of sources, zones and
// certificates held at rest, then every gap, then one summary line that
// renders the report's summary: the counts `certwatch scan` gives.
func writeCoverage(w io.Writer, c *scan.Coverage, sum scan.Summary, width int) error {
	src := table{rows: [][]string{{"SOURCE", "TARGETS", "NAMES", "ENDPOINTS", "CERTIFICATES", "ERROR"}}, steps: []step{shrink(5), shrink(0)}}
	names := 0
	for _, s := range c.Sources {
		src.rows = append(src.rows, []string{policy.Printable(s.Name), strconv.Itoa(s.Targets), strconv.Itoa(s.Names), strconv.Itoa(s.Endpoints), strconv.Itoa(s.Certificates), orDash(policy.Printable(s.Error))})
		names += s.Names
	}
	if err := src.write(w, width); err != nil {
		return err
	}
	fmt.Fprintln(w)
	followed := 0
	if len(c.Zones) > 0 {
		zt := table{rows: [][]string{{"ZONE", "VIA", "FROM", "TARGETS", "NAME SERVERS"}}, steps: []step{shrink(4), shrink(0)}}
		for _, z := range c.Zones {
			if z.Via == "delegation" {
				followed++
			}
			zt.rows = append(zt.rows, []string{z.Zone, z.Via, orDash(cmpOr(z.Parent, z.Source)), strconv.Itoa(z.Targets), orDash(strings.Join(z.Nameservers, ", "))})
		}
		if err := zt.write(w, width); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if len(c.AtRest) > 0 {
		at := table{rows: [][]string{{"HELD AT REST", "CERTIFICATES", "LOCATIONS", "SERVED"}}}
		for _, a := range c.AtRest {
			at.rows = append(at.rows, []string{policy.Printable(a.Kind), strconv.Itoa(a.Certificates), strconv.Itoa(a.Locations), strconv.Itoa(a.Served)})
		}
		if err := at.write(w, width); err != nil {
			return err
		}
		fmt.Fprintf(w, "%d certificate(s) held at rest; one held in two kinds of place counts under each.\n\n", sum.Certificates.AtRest)
	}
	if len(c.Gaps) > 0 {
		fmt.Fprintf(w, "Not watched (%d):\n", len(c.Gaps))
		for i, g := range c.Gaps {
			fmt.Fprintf(w, "%d. %s %s %s\n", i+1, g.Tier, g.Reason, policy.Printable(g.Zone))
			if g.Parent != "" {
				fmt.Fprintf(w, "   delegated by %s to %s\n", g.Parent, cmpOr(strings.Join(g.Nameservers, ", "), "-"))
			}
			if len(g.Names) > 0 {
				fmt.Fprintf(w, "   names: %s\n", policy.Printable(strings.Join(g.Names, ", ")))
			}
			if len(g.Certificates) > 0 {
				fmt.Fprintf(w, "   certificates: %s\n", policy.Printable(shortCerts(g.Certificates)))
			}
			fmt.Fprintf(w, "   %s\n   fix: %s\n", policy.Printable(g.Detail), g.Fix)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Watching %d zone(s) (%d followed from delegations) through %d source(s): %d name(s), %d endpoint(s) probed, %s; %s.\n",
		len(c.Zones), followed, sum.Sources, names, sum.Endpoints.Total, sum.CertificatesText(), sum.GapsText())
	return nil
}

// shortCerts shortens the fingerprints among certs (ARNs stay whole).
func shortCerts(certs []string) string {
	out := make([]string, len(certs))
	for i, c := range certs {
		if len(c) == 64 && !strings.Contains(c, ":") {
			c = "sha256 " + c[:16] + "…"
		}
		out[i] = c
	}
	return strings.Join(out, ", ")
}

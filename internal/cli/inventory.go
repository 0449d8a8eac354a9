package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

func (e *env) runInventory(ctx context.Context, c config.Config, logger *slog.Logger) error {
	aws, err := newAWSSources(ctx, c, logger)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	pass, err := newPass(c, logger, aws...)
	if err != nil {
		return err
	}
	targets, sources, err := pass.Discover(ctx)
	if errors.Is(err, scan.ErrNoSource) {
		return withCode(ExitUsage, err) // it names every source and why it failed
	}
	now := time.Now()
	acmCerts := pass.Probe(ctx, nil, now).ACM // renewal state only: nothing is probed
	if werr := writeInventory(e.stdout, targets, sources, acmCerts, now, c.Output); werr != nil {
		return fmt.Errorf("write inventory: %w", werr)
	}
	return err
}

// inventoryReport is the JSON shape of `certwatch inventory --output json`.
type inventoryReport struct {
	Targets []discovery.Target      `json:"targets"`
	Sources []scan.SourceResult     `json:"sources"`
	ACM     []policy.ACMCertificate `json:"acm,omitempty"`
}

func writeInventory(w io.Writer, targets []discovery.Target, sources []scan.SourceResult, acm []policy.ACMCertificate, now time.Time, format string) error {
	if format == "json" {
		if targets == nil {
			targets = []discovery.Target{}
		}
		return writeJSON(w, inventoryReport{Targets: targets, Sources: sources, ACM: acm})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tADDRESSES\tSOURCES\tNOTE")
	for _, t := range targets {
		addrs := "resolve " + t.ResolveName()
		if t.Skip != "" {
			addrs = "-"
		} else if len(t.Addresses) > 0 {
			s := make([]string, len(t.Addresses))
			for i, a := range t.Addresses {
				s[i] = a.String()
			}
			addrs = strings.Join(s, ",")
		}
		note := t.Skip
		if note == "" && t.Explicit {
			note = "explicit"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Key(), addrs, strings.Join(t.Sources, ","), orDash(note))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(acm) > 0 {
		fmt.Fprintln(w)
		if err := writeACM(w, acm, now, false); err != nil {
			return err
		}
	}
	for _, s := range sources {
		certs := ""
		if s.Certificates > 0 {
			certs = fmt.Sprintf(", %d certificate(s)", s.Certificates)
		}
		if s.Error != "" {
			fmt.Fprintf(w, "Source %s failed: %s\n", s.Name, s.Error)
		} else {
			fmt.Fprintf(w, "Source %s: %d target(s)%s\n", s.Name, s.Targets, certs)
		}
	}
	return nil
}

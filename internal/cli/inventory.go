package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

func (e *env) runInventory(ctx context.Context, c config.Config, logger *slog.Logger) error {
	pass, err := newPass(ctx, c, logger)
	if err != nil {
		return err
	}
	if len(pass.Sources) == 1 {
		if zs, ok := pass.Sources[0].(*dnszone.Source); ok {
			return e.zoneInventory(ctx, zs, c.Output, logger)
		}
	}
	targets, sources, err := pass.Discover(ctx)
	if errors.Is(err, scan.ErrNoSource) {
		return withCode(ExitUsage, err) // it names every source and why it failed
	}
	now := time.Now()
	// Renewal state, IAM server certificates and the resources using each
	// certificate only: nothing is probed.
	r := pass.Probe(ctx, nil, now)
	if werr := writeInventory(e.stdout, targets, sources, r.ACM, r.IAM, now, c.Output); werr != nil {
		return fmt.Errorf("write inventory: %w", werr)
	}
	return err
}

// zoneInventory is the inventory of a single zone, the one source: the
// same output as runInventory's, but the targets are written one at a time
// as the transferred zone's index yields them, never all held at once, so
// that a zone of millions of names needs a fraction of the memory.
func (e *env) zoneInventory(ctx context.Context, zs *dnszone.Source, format string, logger *slog.Logger) error {
	// Stream, as a scan of the zone alone: with the child zones its
	// delegations lead to.
	all, n, _, err := zs.Stream(ctx)
	if err != nil {
		// As scan.Pass.Discover words a failure of every source.
		logger.Warn("source failed", "source", zs.Name(), "err", err)
		return withCode(ExitUsage, fmt.Errorf("%w: %w", scan.ErrNoSource, err))
	}
	sources := []scan.SourceResult{{Name: zs.Name(), Targets: n}}
	if format == "json" {
		err = writeInventoryJSON(e.stdout, all, sources, nil, nil)
	} else {
		err = writeInventoryTable(e.stdout, all, sources)
	}
	if err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	return nil
}

// inventoryReport is the JSON shape of `certwatch inventory --output json`.
type inventoryReport struct {
	Targets []discovery.Target      `json:"targets"`
	Sources []scan.SourceResult     `json:"sources"`
	ACM     []policy.ACMCertificate `json:"acm,omitempty"`
	IAM     []policy.IAMCertificate `json:"iam,omitempty"`
}

func writeInventory(w io.Writer, targets []discovery.Target, sources []scan.SourceResult, acm []policy.ACMCertificate, iam []policy.IAMCertificate, now time.Time, format string) error {
	if format == "json" {
		if targets == nil {
			targets = []discovery.Target{}
		}
		return writeInventoryJSON(w, slices.Values(targets), sources, acm, iam)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tPROTOCOL\tADDRESSES\tSOURCES\tNOTE")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Key(), t.Protocol, addrs, strings.Join(t.Sources, ","), orDash(note))
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
	if len(iam) > 0 {
		if len(acm) == 0 {
			fmt.Fprintln(w)
		}
		if err := writeIAM(w, iam, now, false); err != nil {
			return err
		}
	}
	for _, s := range sources {
		writeSourceLine(w, s)
	}
	return nil
}

// writeSourceLine writes the inventory table's line about source s.
func writeSourceLine(w io.Writer, s scan.SourceResult) {
	certs := ""
	if s.Certificates > 0 {
		certs = fmt.Sprintf(", %d certificate(s)", s.Certificates)
	}
	if s.Error != "" {
		fmt.Fprintf(w, "Source %s failed: %s\n", policy.Printable(s.Name), policy.Printable(s.Error))
	} else {
		fmt.Fprintf(w, "Source %s: %d target(s)%s\n", s.Name, s.Targets, certs)
	}
}

// writeInventoryJSON writes the inventoryReport of targets, sources, acm
// and iam byte for byte as writeJSON does, but takes the targets one at a
// time.
func writeInventoryJSON(w io.Writer, targets iter.Seq[discovery.Target], sources []scan.SourceResult, acm []policy.ACMCertificate, iam []policy.IAMCertificate) error {
	o := jsonstream.NewObject(w)
	jsonstream.Array(o, "targets", targets)
	o.Field("sources", sources)
	if len(acm) > 0 {
		o.Field("acm", acm)
	}
	if len(iam) > 0 {
		o.Field("iam", iam)
	}
	return o.Close()
}

// writeInventoryTable writes the table writeInventory writes for targets
// without ACM certificates, taking the targets one at a time: a first pass
// measures the columns, a second writes the rows. Its cells must be free of
// tabs, newlines and tabwriter escapes, as a zone's names and ports are
// (miekg/dns escapes every byte outside printable ASCII), for it pads as
// text/tabwriter does: each of the first three columns to its widest cell
// in runes, plus two spaces.
func writeInventoryTable(w io.Writer, targets iter.Seq[discovery.Target], sources []scan.SourceResult) error {
	header := [5]string{"TARGET", "PROTOCOL", "ADDRESSES", "SOURCES", "NOTE"}
	var widths [4]int
	for i := range widths {
		widths[i] = utf8.RuneCountInString(header[i])
	}
	var row []byte
	var ends [5]int
	for t := range targets {
		row, ends = appendInventoryRow(row[:0], t)
		start := 0
		for i := range widths {
			widths[i] = max(widths[i], utf8.RuneCount(row[start:ends[i]]))
			start = ends[i]
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	pad := func(cell []byte, i int) {
		line = append(line, cell...)
		for range widths[i] + 2 - utf8.RuneCount(cell) {
			line = append(line, ' ')
		}
	}
	for i, h := range header {
		if i < len(widths) {
			pad([]byte(h), i)
		} else {
			line = append(line, h...)
		}
	}
	line = append(line, '\n')
	for t := range targets {
		row, ends = appendInventoryRow(row[:0], t)
		start := 0
		for i := range widths {
			pad(row[start:ends[i]], i)
			start = ends[i]
		}
		line = append(line, row[start:ends[4]]...)
		line = append(line, '\n')
		if len(line) >= 32<<10 {
			if _, err := bw.Write(line); err != nil {
				return err
			}
			line = line[:0]
		}
	}
	if _, err := bw.Write(line); err != nil {
		return err
	}
	for _, s := range sources {
		writeSourceLine(bw, s)
	}
	return bw.Flush()
}

// appendInventoryRow appends the five cells of t's row in the inventory
// table to dst, and returns where each ends.
func appendInventoryRow(dst []byte, t discovery.Target) ([]byte, [5]int) {
	var ends [5]int
	if strings.IndexByte(t.Name, ':') >= 0 { // as t.Key, net.JoinHostPort
		dst = append(dst, '[')
		dst = append(dst, t.Name...)
		dst = append(dst, ']')
	} else {
		dst = append(dst, t.Name...)
	}
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, int64(t.Port), 10)
	ends[0] = len(dst)
	dst, _ = t.Protocol.AppendText(dst)
	ends[1] = len(dst)
	switch {
	case t.Skip != "":
		dst = append(dst, '-')
	case len(t.Addresses) > 0:
		for i, a := range t.Addresses {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = a.AppendTo(dst)
		}
	default:
		dst = append(dst, "resolve "...)
		dst = append(dst, t.ResolveName()...)
	}
	ends[2] = len(dst)
	for i, s := range t.Sources {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, s...)
	}
	ends[3] = len(dst)
	note := t.Skip
	if note == "" && t.Explicit {
		note = "explicit"
	}
	dst = append(dst, orDash(note)...)
	ends[4] = len(dst)
	return dst, ends
}

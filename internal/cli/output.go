package cli

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/internal/jsonstream"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// writeReport writes r as JSON or as a table that fits in width terminal
// cells (0: any width).
func writeReport(w io.Writer, r *scan.Report, format string, color bool, width int) error {
	if format == "json" {
		return writeJSON(w, r)
	}
	return writeTableWidth(w, r, color, width)
}

// writeJSON writes v as indented JSON, streaming the long lists of a struct
// (a report's endpoints, an inventory's targets) one element at a time; see
// jsonstream.Write.
func writeJSON(w io.Writer, v any) error {
	return jsonstream.Write(w, v)
}

// tierColor codes are all the same length, so the table's columns stay
// aligned when coloured.
var tierColor = map[policy.Tier]string{
	policy.Critical: "\x1b[01;31m",
	policy.Page:     "\x1b[00;31m",
	policy.Warning:  "\x1b[00;33m",
	policy.Notice:   "\x1b[00;36m",
	policy.Info:     "\x1b[00;02m",
}

func writeTable(w io.Writer, r *scan.Report, color bool) error {
	return writeTableWidth(w, r, color, 0)
}

// writeTableWidth writes the table of findings, their details and the
// summary. With a width, the table's SUBJECT and WHERE columns shrink and
// detail lines wrap to fit it; columns are aligned in terminal cells.
func writeTableWidth(w io.Writer, r *scan.Report, color bool, width int) error {
	if width <= 0 {
		return layoutTable(w, r, color, 0)
	}
	// The table fits by itself; every other line is wrapped.
	var buf bytes.Buffer
	err := layoutTable(&buf, r, color, width)
	if _, werr := io.WriteString(w, wrapLines(buf.String(), width)); err == nil {
		err = werr
	}
	return err
}

func layoutTable(w io.Writer, r *scan.Report, color bool, width int) error {
	now := r.GeneratedAt
	paint := func(t policy.Tier, s string) string {
		if !color || tierColor[t] == "" {
			return s
		}
		return tierColor[t] + s + "\x1b[0m"
	}
	if len(r.Findings) > 0 {
		// On a narrow terminal SUBJECT keeps the room: DEADLINE loses its
		// time of day; WHERE and the endpoint count, in each finding's
		// details too, go; then DEADLINE, whose LEFT says as much; KIND,
		// a machine name to grep for, is cut last.
		tb := table{rows: [][]string{{"TIER", "DEADLINE", "LEFT", "KIND", "SUBJECT", "ENDPOINTS", "WHERE"}},
			short: map[int][]string{1: {"DEADLINE"}},
			steps: []step{shorten(1), shrink(6), drop(6), drop(5), shrinkTo(4, 24), drop(1), shrinkTo(4, 12), shrink(3), shrink(4)}}
		for _, f := range r.Findings {
			tb.rows = append(tb.rows, []string{
				paint(f.Tier, f.Tier.String()),
				f.Deadline.UTC().Format("2006-01-02 15:04"),
				left(f.Deadline.Time(), now),
				string(f.Kind), policy.Printable(orDash(f.Subject)), strconv.Itoa(len(f.Endpoints)), policy.Printable(firstNames(f, 3))})
			tb.short[1] = append(tb.short[1], f.Deadline.UTC().Format(time.DateOnly))
		}
		if err := tb.write(w, width); err != nil {
			return err
		}
		fmt.Fprintln(w)
		certs := make(map[string]*policy.Certificate, len(r.Certificates))
		for i := range r.Certificates {
			certs[r.Certificates[i].SHA256] = &r.Certificates[i]
		}
		for i, f := range r.Findings {
			fmt.Fprintf(w, "%d. %s %s", i+1, paint(f.Tier, f.Tier.String()), f.Kind)
			if f.Subject != "" {
				fmt.Fprintf(w, " %q", f.Subject)
			}
			if f.Certificate != "" {
				fmt.Fprintf(w, " (sha256 %s…)", f.Certificate[:min(16, len(f.Certificate))])
			}
			fmt.Fprintf(w, "\n   %s\n   id: %s\n", policy.Printable(f.Message), policy.Printable(f.ID()))
			if n := len(f.Endpoints); n > 0 {
				fmt.Fprintf(w, "   served by %d endpoint(s): %s\n", n, policy.Printable(endpointList(f.Endpoints, 8)))
			}
			refs := f.Refs()
			if n := len(refs.Locations); n > 0 {
				fmt.Fprintf(w, "   held at rest in %d place(s): %s\n", n, policy.Printable(atrest.Where(refs.Locations, 8)))
			}
			if c := certs[f.Certificate]; c != nil && (f.Kind == policy.RenewalMissed || f.Kind == policy.Expiring) {
				if s := cadence(c); s != "" {
					fmt.Fprintf(w, "   renewal: %s\n", s)
				}
			}
			if len(refs.ACM) > 0 {
				fmt.Fprintf(w, "   ACM: %s\n", acmRefs(refs.ACM))
			}
			for _, ref := range refs.IAM {
				fmt.Fprintf(w, "   IAM: %s (server certificate %s, renewed by hand)\n", ref.ARN, ref.Name)
			}
		}
		fmt.Fprintln(w)
	}
	if err := writeACM(w, r.ACM, now, true); err != nil {
		return err
	}
	if err := writeIAM(w, r.IAM, now, true); err != nil {
		return err
	}
	if err := writeNetworks(w, r.Networks, now, width); err != nil {
		return err
	}
	writeSummary(w, r)
	return nil
}

func writeSummary(w io.Writer, r *scan.Report) {
	s := scan.SummaryOf(r)
	fmt.Fprintf(w, "Scanned %d target(s): %d endpoint(s), %d with TLS; %s; %s; %s.\n",
		s.Targets, s.Endpoints.Total, s.Endpoints.TLS, s.CertificatesText(), s.TiersText(), s.GapsText())
	if n := s.Endpoints.Total - s.Endpoints.TLS; n > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(s.Endpoints.Failures)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, s.Endpoints.Failures[k]))
		}
		fmt.Fprintf(w, "No certificate from %d endpoint(s) (%s); see --output json for each.\n", n, strings.Join(parts, ", "))
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "Not probed: %d target(s) (e.g. %s: %s).\n", len(r.Skipped), policy.Printable(r.Skipped[0].Key()), r.Skipped[0].Skip)
	}
	if r.AddressesSkipped > 0 {
		i := slices.IndexFunc(r.Endpoints, func(ep scan.Endpoint) bool { return ep.Fault().Failure == string(probes.FailAddressSkipped) })
		fmt.Fprintf(w, "Not dialled: %d address(es) discovery named (e.g. %s).\n", r.AddressesSkipped, policy.Printable(r.Endpoints[i].Fault().Error))
	}
	writeSourceErrors(w, r.Sources)
}

func writeSourceErrors(w io.Writer, sources []scan.SourceResult) {
	for _, s := range sources {
		if s.Error != "" {
			fmt.Fprintf(w, "Source %s failed: %s\n", policy.Printable(s.Name), policy.Printable(s.Error))
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// left says how long from now until t: "12d", "-3d", "5h", "now". Days
// are exact for every date a certificate can carry (t.Sub saturates at
// about 292 years).
//
// Days are calendar days (policy.DaysUntil), agreeing with the date
// beside them, when two or more apart.
func left(t, now time.Time) string {
	if n := policy.DaysUntil(t, now); n >= 2 || n <= -2 {
		return fmt.Sprintf("%dd", n)
	}
	switch d := t.Sub(now); {
	case d <= -time.Hour || d >= time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return "now"
}

func firstNames(f policy.Finding, n int) string {
	var names []string
	seen := map[string]bool{}
	for _, ep := range f.Endpoints {
		k := net.JoinHostPort(ep.Name, strconv.Itoa(ep.Port))
		if !seen[k] {
			seen[k] = true
			names = append(names, k)
		}
	}
	if at := f.Refs().Locations; len(names) == 0 && len(at) > 0 {
		return atrest.Where(at, 1)
	}
	if len(names) == 0 {
		return f.Name
	}
	if len(names) > n {
		return strings.Join(names[:n], ", ") + fmt.Sprintf(" +%d", len(names)-n)
	}
	return strings.Join(names, ", ")
}

func endpointList(eps []policy.Endpoint, n int) string {
	parts := make([]string, 0, n)
	for i, ep := range eps {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(eps)-n))
			break
		}
		parts = append(parts, ep.String())
	}
	return strings.Join(parts, ", ")
}

// cadence says when c is normally renewed and when it last changed (the
// name history of certwatch run): "expected by 2030-01-05; last changed
// 2029-10-07". Empty when neither is known.
func cadence(c *policy.Certificate) string {
	var parts []string
	if !c.ExpectedRenewal.IsZero() {
		parts = append(parts, "expected by "+c.ExpectedRenewal.UTC().Format(time.DateOnly))
	}
	switch h := c.History(); {
	case !h.LastChanged.IsZero():
		parts = append(parts, "last changed "+h.LastChanged.UTC().Format(time.DateOnly))
	case !h.FirstSeen.IsZero():
		parts = append(parts, "unchanged since "+h.FirstSeen.UTC().Format(time.DateOnly))
	}
	return strings.Join(parts, "; ")
}

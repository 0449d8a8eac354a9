package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// writeNetworks writes a table of the address ranges swept (addresses
// tried, ports that answered, TLS endpoints, certificates) and lists the
// certificates found only by address, within width cells.
func writeNetworks(w io.Writer, nets []scan.NetworkReport, now time.Time, width int) error {
	if len(nets) == 0 {
		return nil
	}
	tb := table{rows: [][]string{{"NETWORK", "CIDRS", "PORTS", "TRIED", "ANSWERED", "TLS", "CERTIFICATES", "ADDRESS-ONLY"}}, steps: []step{shrink(1), shrink(0), drop(2), drop(1)}}
	for _, n := range nets {
		tb.rows = append(tb.rows, []string{policy.Printable(n.Name), strings.Join(n.CIDRs, ","), strings.Join(n.Ports, ","),
			strconv.Itoa(n.Addresses), strconv.Itoa(len(n.Answered)), strconv.Itoa(n.TLSEndpoints),
			strconv.Itoa(len(n.Certificates)), strconv.Itoa(n.AddressOnly)})
	}
	if err := tb.write(w, width); err != nil {
		return err
	}
	for _, n := range nets {
		for _, c := range n.Certificates {
			if !c.AddressOnly {
				continue
			}
			known := ""
			if len(c.Names) > 0 {
				known = " (reverse zone: " + strings.Join(c.Names, ", ") + ")"
			}
			fmt.Fprintf(w, "Address only in %s: %q at %s%s, no DNS name leads there; expires %s (%s).\n",
				policy.Printable(n.Name), policy.Printable(c.Subject), policy.Printable(strings.Join(c.Endpoints, ", ")),
				policy.Printable(known), c.NotAfter.UTC().Format("2006-01-02"), left(c.NotAfter, now))
		}
		if n.GivenUp > 0 {
			fmt.Fprintf(w, "Network %s: %d address(es) given up on after consecutive timeouts.\n", policy.Printable(n.Name), n.GivenUp)
		}
		if n.ReverseNote != "" {
			fmt.Fprintf(w, "Network %s: %s.\n", policy.Printable(n.Name), policy.Printable(n.ReverseNote))
		}
		if n.CutShort {
			fmt.Fprintf(w, "Network %s: the sweep was cut short; the addresses after the %d tried were not swept.\n", policy.Printable(n.Name), n.Addresses)
		}
	}
	fmt.Fprintln(w)
	return nil
}

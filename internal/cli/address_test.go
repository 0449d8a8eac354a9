package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/scan"
)

// TestScanDiscoveredSpecialAddresses scans a zone whose records aim at
// certwatch's own host and link: unspecified, loopback (also IPv4-mapped),
// link-local (a cloud metadata address), multicast and broadcast. A TLS
// service bound only to loopback stands in for what such a record would
// reach. None of them is dialled without --allow-loopback; each is an
// address_skipped endpoint and an info finding that name the record, the
// address and why, counted in the report and its table. With
// --allow-loopback only the loopback records are probed. A --target on
// loopback is the operator's own and is probed either way.
func TestScanDiscoveredSpecialAddresses(t *testing.T) {
	t.Parallel()
	const zone = "hostile.example"
	records := map[string]string{
		"zero":   "A 0.0.0.0",
		"any":    "AAAA ::",
		"mapped": "AAAA ::ffff:127.0.0.1",
		"local":  "A 127.0.0.1",
		"meta":   "A 169.254.169.254",
		"mcast":  "A 224.0.0.1",
		"bcast":  "A 255.255.255.255",
	}
	var text strings.Builder
	for name, rr := range records {
		fmt.Fprintf(&text, "%s IN %s\n", name, rr)
	}
	dns, err := dnstest.Start(dnstest.Zone{Name: zone, Text: text.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })

	now := time.Now()
	ca := certtest.MustCA("Address Test Root", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"*." + zone}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 6, 0)})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	// serve starts the loopback-only service each case reads on its own.
	serve := func(t *testing.T) *certtest.Server {
		s, err := certtest.Serve("127.0.0.1:0", leaf.TLSCertificate())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	args := func(s *certtest.Server, extra ...string) []string {
		return append([]string{"scan", "--zone", zone, "--nameserver", dns.Addr(), "--ports", fmt.Sprint(s.Addr().Port()),
			"--ca-file", caFile, "--timeout", "2s"}, extra...)
	}
	report := func(t *testing.T, stdout string) scan.Report {
		t.Helper()
		var r scan.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("report: %v\n%s", err, stdout)
		}
		return r
	}
	skipped := func(r scan.Report) map[string]string {
		out := map[string]string{}
		for _, ep := range r.Endpoints {
			if ep.Fault().Failure == "address_skipped" {
				out[strings.TrimSuffix(ep.Name, "."+zone)] = ep.Fault().Error
			}
		}
		return out
	}

	t.Run("not allowed", func(t *testing.T) {
		t.Parallel()
		s := serve(t)
		target := s.Addr().String()
		stdout, stderr, code := run(t, args(s, "--target", target, "--output", "json")...)
		if code != cli.ExitOK {
			t.Fatalf("exit code %d, want 0 (an info finding); stderr:\n%s", code, stderr)
		}
		r := report(t, stdout)
		got := skipped(r)
		if r.AddressesSkipped != len(records) || len(got) != len(records) {
			t.Errorf("addresses_skipped = %d, endpoints %v; want all %d records", r.AddressesSkipped, got, len(records))
		}
		for name, rr := range records {
			addr := strings.Fields(rr)[1]
			if msg := got[name]; !strings.Contains(msg, "not dialled: "+addr+" for "+name+"."+zone) || !strings.Contains(msg, "dnszone:"+zone) {
				t.Errorf("%s: error %q; want it to name the address %s, the record and its zone", name, msg, addr)
			}
		}
		if !strings.Contains(got["local"], "loopback") || !strings.Contains(got["mapped"], "IPv4-mapped 127.0.0.1") || !strings.Contains(got["meta"], "link-local") {
			t.Errorf("reasons: local %q, mapped %q, meta %q; want loopback, IPv4-mapped loopback, link-local", got["local"], got["mapped"], got["meta"])
		}
		findings := 0
		for _, f := range r.Findings {
			if f.Kind == "address_skipped" && f.Tier.String() == "info" && strings.HasSuffix(f.Name, "."+zone+":"+fmt.Sprint(s.Addr().Port())) {
				findings++
			}
		}
		if findings != len(records) {
			t.Errorf("%d address_skipped info findings, want one per record (%d): %+v", findings, len(records), r.Findings)
		}
		if names := s.ServerNames(); !slices.Equal(names, []string{""}) {
			t.Errorf("the loopback service saw handshakes with SNI %q; want only the --target (no SNI)", names)
		}

		stdout, _, _ = run(t, args(serve(t), "--output", "table", "--target", target)...)
		if !strings.Contains(stdout, "Not dialled: 7 address(es) discovery named") || !strings.Contains(stdout, "address_skipped") {
			t.Errorf("table does not count and name the skipped addresses:\n%s", stdout)
		}
	})

	t.Run("allowed", func(t *testing.T) {
		t.Parallel()
		s := serve(t)
		stdout, stderr, code := run(t, args(s, "--allow-loopback", "--output", "json")...)
		if code != cli.ExitOK {
			t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr)
		}
		r := report(t, stdout)
		got := skipped(r)
		if r.AddressesSkipped != 5 || got["local"] != "" || got["mapped"] != "" {
			t.Errorf("addresses_skipped = %d, %v; want the 5 that are not loopback", r.AddressesSkipped, got)
		}
		names := s.ServerNames()
		slices.Sort(names)
		if want := []string{"local." + zone, "mapped." + zone}; !slices.Equal(names, want) {
			t.Errorf("the loopback service saw SNI %q, want %q", names, want)
		}
	})

	t.Run("nothing dialled", func(t *testing.T) {
		t.Parallel()
		_, stderr, code := run(t, args(serve(t))...)
		if code != cli.ExitUnverified || !strings.Contains(stderr, "7 address_skipped") || !strings.Contains(stderr, "every address discovery named is one certwatch does not dial") {
			t.Errorf("exit code %d, stderr %q; want %d saying nothing was dialled and why", code, stderr, cli.ExitUnverified)
		}
	})
}

package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// TestScanBrokenTransfer scans zones whose transfer is not one complete
// version of the zone. Alone, such a zone fails the scan with exit 2 and
// one line naming the zone, the server and what was wrong; beside a source
// that works, it is a discovery_failed finding at page (exit 1).
func TestScanBrokenTransfer(t *testing.T) {
	t.Parallel()
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	soa := func(zone string, serial int) dns.RR {
		return rr(fmt.Sprintf("%s 3600 IN SOA ns1.%[1]s hostmaster.%[1]s %d 3600 600 86400 300", zone, serial))
	}
	www := func(zone string) dns.RR { return rr("www." + zone + " 3600 IN A 127.0.0.1") }
	api := func(zone string) dns.RR { return rr("api." + zone + " 3600 IN A 127.0.0.1") }
	srv, err := dnstest.Start(
		dnstest.Zone{Name: "serial.example", Transfer: []dns.RR{soa("serial.example.", 7), www("serial.example."), soa("serial.example.", 8)}},
		dnstest.Zone{Name: "other.example", Transfer: []dns.RR{soa("elsewhere.example.", 7), www("other.example."), soa("other.example.", 7)}},
		dnstest.Zone{Name: "midstream.example", Transfer: []dns.RR{
			soa("midstream.example.", 7), www("midstream.example."), soa("midstream.example.", 7), api("midstream.example."), soa("midstream.example.", 7),
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	// A healthy static target beside the zone.
	now := time.Now()
	ca := certtest.MustCA("Transfer Test Root", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 6, 0)})
	tlsSrv, err := certtest.Serve("127.0.0.1:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tlsSrv.Close() })
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		zone string
		want string
	}{
		{"serial.example", "closing SOA serial 8 differs from the opening serial 7"},
		{"other.example", `transfer opens with the SOA of "elsewhere.example.", not of other.example.`},
		{"midstream.example", "SOA in mid-stream after 2 records, and more records after it"},
	}
	for _, tt := range tests {
		t.Run(tt.zone, func(t *testing.T) {
			t.Parallel()
			line := "certwatch: every discovery source failed: zone " + tt.zone + ": AXFR from " + srv.Addr() + ": " + tt.want
			_, stderr, code := run(t, "scan", "--zone", tt.zone, "--nameserver", srv.Addr())
			if code != cli.ExitUsage || !strings.HasPrefix(stderr, line) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("zone alone: exit code %d, stderr %q\nwant %d and one line starting %q", code, stderr, cli.ExitUsage, line)
			}

			stdout, stderr, code := run(t, "scan", "--zone", tt.zone, "--nameserver", srv.Addr(),
				"--target", tlsSrv.Addr().String(), "--ca-file", caFile, "--output", "json", "--allow-loopback")
			if code != cli.ExitFindings {
				t.Fatalf("zone beside a working target: exit code %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
			}
			var r scan.Report
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatalf("decode report: %v\n%s", err, stdout)
			}
			if len(r.Findings) != 1 || r.Findings[0].Kind != policy.DiscoveryFailed || r.Findings[0].Name != "dnszone:"+tt.zone ||
				!strings.Contains(r.Findings[0].Message, tt.want) {
				t.Errorf("findings = %+v\nwant one discovery_failed for dnszone:%s saying %q", r.Findings, tt.zone, tt.want)
			}
		})
	}
}

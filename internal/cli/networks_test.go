package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
)

// TestScanNetwork sweeps a loopback range with --network: the service no
// name points to is found, named by the reverse zone through --resolver,
// listed as address only, and its certificate, expiring in 3 days, pages.
func TestScanNetwork(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := certtest.MustCA("Network Root", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{CommonName: "bmc", NotBefore: now.AddDate(0, -11, 0), NotAfter: now.AddDate(0, 0, 3)})
	s, err := certtest.Serve("127.31.8.2:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	dns, err := dnstest.Start(dnstest.Zone{Name: "8.31.127.in-addr.arpa", Text: "2 PTR bmc-2.oob.example.\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"scan", "--network", fmt.Sprintf("127.31.8.0/29,%d", s.Addr().Port()), "--resolver", dns.Addr(), "--ca-file", caFile, "--timeout", "1s"}

	stdout, stderr, code := run(t, append(args, "--output", "json")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r struct {
		Findings []struct{ Kind, Tier, Subject string }
		Networks []struct {
			Name      string
			Addresses int `json:"addresses_tried"`
			Answered  []struct {
				ReverseNames []string `json:"reverse_names"`
			}
			TLSEndpoints int `json:"tls_endpoints"`
			AddressOnly  int `json:"address_only"`
			Certificates []struct {
				Subject     string
				Names       []string
				AddressOnly bool `json:"address_only"`
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Networks) != 1 {
		t.Fatalf("networks = %+v, want one", r.Networks)
	}
	n := r.Networks[0]
	if n.Name != "127.31.8.0/29" || n.Addresses != 6 || n.TLSEndpoints != 1 || n.AddressOnly != 1 ||
		len(n.Certificates) != 1 || !n.Certificates[0].AddressOnly || !slices.Equal(n.Certificates[0].Names, []string{"bmc-2.oob.example"}) {
		t.Errorf("network = %+v, want 127.31.8.0/29: 6 addresses tried (network and broadcast never), one TLS endpoint serving an address-only certificate named bmc-2.oob.example", n)
	}
	paged := slices.ContainsFunc(r.Findings, func(f struct{ Kind, Tier, Subject string }) bool {
		return f.Kind == "expiring" && f.Tier == "page" && f.Subject == "bmc"
	})
	if !paged {
		t.Errorf("findings = %+v, want the address-only certificate expiring (page)", r.Findings)
	}

	stdout, _, _ = run(t, args...)
	for _, want := range []string{"NETWORK        CIDRS          PORTS", fmt.Sprintf("Address only in 127.31.8.0/29: \"bmc\" at 127.31.8.2:%d (reverse zone: bmc-2.oob.example), no DNS name leads there", s.Addr().Port())} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestScanNetworkTooLarge: a /8 is refused before anything is dialled,
// saying what to do.
func TestScanNetworkTooLarge(t *testing.T) {
	t.Parallel()
	_, stderr, code := run(t, "scan", "--network", "10.0.0.0/8,443")
	if code != cli.ExitUsage || !strings.Contains(stderr, "10.0.0.0/8 addresses × 1 port(s) is more than 1048576 connections, above max_size 65536: split it into the ranges that hold services: certwatch refuses to sweep it whole") {
		t.Errorf("exit %d, stderr %q; want 2 and the range refused", code, stderr)
	}
}

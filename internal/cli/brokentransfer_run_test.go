package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/internal/lab"
)

// TestRunBrokenTransferKeepsInventory: `certwatch run` learns the lab's
// zone, then restarts against a server whose transfer of the zone closes
// with another serial than it opened with (RFC 5936 §2.2). The transfer is
// not read as a smaller zone: discovery_degraded names the zone, the
// server and what was wrong, and the last good inventory is still probed,
// so the expired certificate stays reported.
func TestRunBrokenTransferKeepsInventory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts certwatch as a process")
	}
	t.Parallel()
	bin := buildBinary(t)
	l := startLab(t)
	hb := newHeartbeats(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, selfMonConfig(l, l.DNS, state))
	p1 := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
	p1.waitLog(t, "a probe run applied", 1, msg("findings applied"))
	if err := p1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p1.waitExit(t)

	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	soa := func(serial int) dns.RR {
		return rr(fmt.Sprintf("%s. 3600 IN SOA ns1.%[1]s. hostmaster.%[1]s. %d 3600 600 86400 300", lab.Zone, serial))
	}
	broken, err := dnstest.Start(dnstest.Zone{Name: lab.Zone, Transfer: []dns.RR{soa(7), rr("www." + lab.Zone + ". 3600 IN A 127.0.0.2"), soa(8)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broken.Close() })
	writeConfig(t, cfg, selfMonConfig(l, broken.Addr(), state))
	p2 := startRun(t, bin, cfg, "CW_HB_URL="+hb.url)
	base := "http://" + p2.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p2.waitLog(t, "a probe run applied", 1, msg("findings applied"))
	r := getReport(t, base)
	if findingCert(r, "expired", "expired.internal.example") == "" {
		t.Errorf("with the zone's transfer broken, the expired certificate is not reported: %+v", r.Findings)
	}
	var degraded string
	for _, f := range r.Findings {
		if f.Kind == "discovery_degraded" {
			degraded = f.Message
		}
	}
	for _, want := range []string{"zone " + lab.Zone, "AXFR from " + broken.Addr(), "closing SOA serial 8 differs from the opening serial 7", "last good inventory"} {
		if !strings.Contains(degraded, want) {
			t.Errorf("discovery_degraded %q lacks %q", degraded, want)
		}
	}
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p2.waitExit(t)
}

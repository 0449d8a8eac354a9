package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/cttest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// fillCT logs n certificates for a name outside the watched domains, so
// that reading them takes more than one data tile.
func (e *ctEstate) fillCT(t *testing.T, n int64) {
	t.Helper()
	now := time.Now()
	other := e.issuing.MustLeaf(certtest.LeafOptions{DNSNames: []string{"www.other.example.org"}, NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)})
	filler := cttest.Entry{Cert: other.Cert.Raw, Chain: [][]byte{e.issuing.Cert.Raw, e.root.Cert.Raw}, Timestamp: now}
	if err := e.log.AppendFunc(n, func(int64) cttest.Entry { return filler }); err != nil {
		t.Fatal(err)
	}
}

// shortCTTimeout makes the configuration at path wait 3s for the log:
// a hung tile is given up on soon, and a tile that answers is not, even
// on a loaded machine (at 1s, the first tile's answer missed it there).
func shortCTTimeout(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "  timeout: 5s\n", "  timeout: 3s\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A log that stops answering halfway through a scan's read (its second
// data tile hangs past ct.timeout, or it answers 500) is the CT source's
// failure: the exit code says a finding pages, stderr names the log and
// says what to do, and the zone's names are probed all the same.
func TestScanCTLogThatStopsMidRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(*cttest.Log)
		says  string
	}{
		{"hangs", func(l *cttest.Log) { l.HangDataTile(1) }, "timeout"},
		{"fails", func(l *cttest.Log) { l.SetFault(cttest.Fail500) }, "500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := startCTEstate(t)
			e.fillCT(t, 300)
			cfg := e.config(t, "")
			shortCTTimeout(t, cfg)
			tc.fault(e.log)
			stdout, stderr, code := run(t, "scan", "--config", cfg, "--output", "json")
			if code != cli.ExitFindings {
				t.Fatalf("exit %d, want %d (the source's failure pages); stderr:\n%s", code, cli.ExitFindings, stderr)
			}
			for _, want := range []string{e.log.URL, tc.says, "check that the log is up", "ct.logs"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr)
				}
			}
			r := ctReport(t, stdout)
			failed := findingsOf(r, policy.DiscoveryFailed)
			if len(failed) != 1 || failed[0].Name != "ct" || !strings.Contains(failed[0].Message, e.log.URL) {
				t.Errorf("discovery failures %+v; want the ct source's, naming the log", failed)
			}
			probed := map[string]bool{}
			for _, ep := range r.Endpoints {
				if ep.Fault().Failure == "" {
					probed[ep.Name] = true
				}
			}
			if !probed["www."+ctZone] || !probed["shop."+ctZone] {
				t.Errorf("probed %v; want the zone's www and shop probed all the same", probed)
			}
		})
	}
}

// certwatch run with a log that stops answering halfway through a read:
// the report shows the CT source degraded (discovery_degraded naming the
// log and what to do), the findings from earlier reads of the log stay,
// and once the log answers again the next read resumes from the stored
// position, where the failed read stopped, not from the start.
func TestRunCTLogThatStopsMidRead(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a second probe run, a minute after the first")
	}
	t.Parallel()
	bin := buildBinary(t)
	e := startCTEstate(t)
	cfg := e.config(t, fmt.Sprintf(`notify:
  state: %q
daemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1h"
    probe: "@every 1m"
  jitter: 10ms
  grace_period: 5s
`, filepath.Join(e.dir, "state.db")))
	shortCTTimeout(t, cfg)
	ctFindings := func(r scan.Report) (gaps, issuers int) {
		for _, f := range r.Findings {
			switch {
			case f.Kind == policy.CoverageGap && strings.HasPrefix(f.Name, "ct:"):
				gaps++
			case f.Kind == policy.UnexpectedIssuer:
				issuers++
			}
		}
		return gaps, issuers
	}

	p := startRun(t, bin, cfg)
	base := "http://" + p.waitLog(t, "start line", 1, msg("certwatch running"))["listen"].(string)
	p.waitLog(t, "the first probe run", 1, msg("findings applied"))
	if gaps, issuers := ctFindings(report(t, base)); gaps != 1 || issuers != 1 {
		t.Fatalf("first report: %d CT coverage gaps and %d unexpected issuers, want 1 and 1", gaps, issuers)
	}

	// More is logged, and the log stops answering in the middle of it.
	size0 := e.log.Size()
	e.fillCT(t, 300)
	later := e.issuing.MustLeaf(certtest.LeafOptions{DNSNames: []string{"later." + ctZone}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour)})
	if err := e.log.Append(cttest.Entry{Cert: later.Cert.Raw, Chain: [][]byte{e.issuing.Cert.Raw, e.root.Cert.Raw}}); err != nil {
		t.Fatal(err)
	}
	e.log.HangDataTile(1)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil { // rediscover now
		t.Fatal(err)
	}
	p.waitLog(t, "the probe run after the failed read", 2, msg("findings applied"))
	r := report(t, base)
	var degraded []policy.Finding
	for _, f := range findingsOf(r, policy.DiscoveryDegraded) {
		if f.Name == "ct" {
			degraded = append(degraded, f)
		}
	}
	if len(degraded) != 1 || !strings.Contains(degraded[0].Message, e.log.URL) || !strings.Contains(degraded[0].Message, "resumes at entry 256") ||
		!strings.Contains(degraded[0].Message, "ct.timeout") {
		t.Errorf("discovery_degraded of ct: %+v; want one naming the log, where the next read resumes (256) and what to do", degraded)
	}
	if gaps, issuers := ctFindings(r); gaps != 1 || issuers != 1 {
		t.Errorf("after the failed read: %d CT coverage gaps and %d unexpected issuers, want the 1 and 1 found before, kept", gaps, issuers)
	}

	// The log answers again: the next read starts where the failed one
	// stopped.
	e.log.SetFault(cttest.Healthy)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "the read after the log came back", 2, msg("ct log read"))
	reads := p.matching(msg("ct log read"))
	if len(reads) != 2 {
		t.Fatalf("%d successful reads, want the first and the one after the log came back", len(reads))
	}
	read := reads[1]
	if read["from"] != float64(256) || read["next"] != float64(e.log.Size()) || read["watched"] != float64(1) {
		t.Errorf("read after the log came back %v, want from 256 (where the failed read stopped, %d entries after the %d read first) to %d, with later.%s", read, 256-size0, size0, e.log.Size(), ctZone)
	}
}

package cli_test

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
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
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// ctZone is the zone of the CT estate.
const ctZone = "ct.example"

// ctEstate is a zone on a loopback name server, a TLS server for its
// names, and a Static CT log holding their certificates and more.
type ctEstate struct {
	dns     *dnstest.Server
	log     *cttest.Log
	port    int
	caFile  string
	dir     string
	stale   string // fingerprint of the old certificate www still serves
	healthy string // fingerprint of the certificate shop serves, logged
	root    *certtest.CA
	issuing *certtest.CA
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// startCTEstate starts it: www serves an old certificate although its
// renewal was logged 3 days ago (precertificate and certificate); shop
// serves a certificate logged 10 days ago (precertificate and
// certificate), and a CA nobody expects logged one for shop an hour ago;
// new.ct.example is on a certificate logged yesterday and in no zone.
func startCTEstate(t *testing.T) *ctEstate {
	t.Helper()
	now := time.Now()
	day := 24 * time.Hour
	e := &ctEstate{dir: t.TempDir()}
	e.root = certtest.MustCA("CT Lab Root", now.Add(-5*365*day), now.Add(10*365*day))
	e.issuing = e.root.MustIntermediate("CT Lab Issuing CA", now.Add(-365*day), now.Add(3*365*day))
	rogueRoot := certtest.MustCA("Rogue Root", now.Add(-365*day), now.Add(3650*day))
	rogue := rogueRoot.MustIntermediate("Rogue Issuing CA", now.Add(-365*day), now.Add(3*365*day))
	leaf := func(ca *certtest.CA, from, to time.Duration, names ...string) *certtest.Leaf {
		return ca.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.Add(from), NotAfter: now.Add(to)})
	}
	old := leaf(e.issuing, -80*day, 60*day, "www."+ctZone)
	renewal := leaf(e.issuing, -3*day, 87*day, "www."+ctZone)
	shop := leaf(e.issuing, -10*day, 80*day, "shop."+ctZone)
	rogueShop := leaf(rogue, -time.Hour, 90*day, "shop."+ctZone)
	newName := leaf(e.issuing, -day, 89*day, "new."+ctZone)
	e.stale, e.healthy = sha256Hex(old.Cert.Raw), sha256Hex(shop.Cert.Raw)

	srv, err := certtest.ServeSNI("127.0.0.1:0", map[string]tls.Certificate{"www." + ctZone: old.FullChain(), "shop." + ctZone: shop.FullChain()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	e.port = int(srv.Addr().Port())
	if e.dns, err = dnstest.Start(dnstest.Zone{Name: ctZone, Text: "www A 127.0.0.1\nshop A 127.0.0.1\n"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.dns.Close() })
	e.caFile = filepath.Join(e.dir, "root.pem")
	if err := os.WriteFile(e.caFile, e.root.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}

	e.log = cttest.Start(t)
	chain := func(ca *certtest.CA, root *certtest.CA) [][]byte { return [][]byte{ca.Cert.Raw, root.Cert.Raw} }
	entry := func(l *certtest.Leaf, ca, root *certtest.CA, at time.Time) cttest.Entry {
		return cttest.Entry{Cert: l.Cert.Raw, Chain: chain(ca, root), Timestamp: at}
	}
	precert := func(l *certtest.Leaf, ca, root *certtest.CA, at time.Time) cttest.Entry {
		der, err := cttest.Precert(ca, l.Cert)
		if err != nil {
			t.Fatal(err)
		}
		return cttest.Entry{Cert: der, Precert: true, Chain: chain(ca, root), Timestamp: at}
	}
	if err := e.log.Append(
		precert(shop, e.issuing, e.root, now.Add(-10*day)), entry(shop, e.issuing, e.root, now.Add(-10*day)),
		precert(renewal, e.issuing, e.root, now.Add(-3*day)), entry(renewal, e.issuing, e.root, now.Add(-3*day)),
		entry(newName, e.issuing, e.root, now.Add(-day)),
		precert(rogueShop, rogue, rogueRoot, now.Add(-time.Hour)),
	); err != nil {
		t.Fatal(err)
	}
	return e
}

// config writes a configuration watching the zone in CT, with extra YAML
// appended, and returns its path.
func (e *ctEstate) config(t *testing.T, extra string) string {
	t.Helper()
	cfg := fmt.Sprintf(`zones:
  - name: %s
    nameserver: %s
resolver: %s
ports: [%d]
ca_files: [%q]
probe:
  timeout: 2s
  retries: 0
  allow_loopback: true
ct:
  logs:
    - url: %s
      origin: %s
      key: %s
  expected_issuers: ["CT Lab Issuing CA"]
  start: 1000
  probe_names: true
  timeout: 5s
%s`, ctZone, e.dns.Addr(), e.dns.Addr(), e.port, e.caFile, e.log.URL, e.log.Origin, e.log.PublicKey(), extra)
	path := filepath.Join(e.dir, "certwatch.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func ctReport(t *testing.T, stdout string) scan.Report {
	t.Helper()
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("decode JSON report: %v\n%s", err, stdout)
	}
	return r
}

func findingsOf(r scan.Report, kind policy.Kind) []policy.Finding {
	var out []policy.Finding
	for _, f := range r.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

// certwatch scan reconciles what the CT log shows with what the zone's
// endpoints serve: the renewal logged 3 days ago and deployed nowhere
// makes www a stale deployment naming the log entry (once, for the
// precertificate and the certificate are one issuance); the certificate of
// the unexpected CA is unexpected_issuer; the name only CT shows is a
// coverage gap naming it and the log entry, and is probed; shop's logged
// and deployed certificate raises nothing.
func TestScanReconcilesCertificateTransparency(t *testing.T) {
	t.Parallel()
	e := startCTEstate(t)
	stdout, stderr, code := run(t, "scan", "--config", e.config(t, ""), "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d, want %d (unexpected_issuer pages); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	r := ctReport(t, stdout)
	where := e.log.Origin + " at index 2 on "

	stale := findingsOf(r, policy.StaleDeployment)
	if len(stale) != 1 || stale[0].Certificate != e.stale || !strings.Contains(stale[0].Message, where) ||
		!strings.Contains(stale[0].Message, "issued 3 days ago") || len(stale[0].Refs().CTLogged) != 2 || stale[0].Refs().CTLogged[0].Index != 2 ||
		len(stale[0].Endpoints) != 1 || stale[0].Endpoints[0].Name != "www."+ctZone {
		t.Errorf("stale deployments %+v; want one about www's old certificate naming the renewal's log entries (%s…)", stale, where)
	}

	unexpected := findingsOf(r, policy.UnexpectedIssuer)
	if len(unexpected) != 1 || unexpected[0].Tier != policy.Page || !strings.Contains(unexpected[0].Message, "Rogue Issuing CA") ||
		!strings.Contains(unexpected[0].Message, e.log.Origin+" at index 5") || unexpected[0].Subject != "shop."+ctZone {
		t.Errorf("unexpected issuers %+v; want one page about the rogue CA's certificate for shop, naming its log entry", unexpected)
	}

	var gaps []policy.Finding
	for _, f := range findingsOf(r, policy.CoverageGap) {
		if strings.HasPrefix(f.Name, "ct:") {
			gaps = append(gaps, f)
		}
	}
	if len(gaps) != 1 || gaps[0].Subject != "new."+ctZone || !strings.Contains(gaps[0].Message, e.log.Origin+" at index 4") {
		t.Errorf("CT coverage gaps %+v; want one naming new.%s and its log entry", gaps, ctZone)
	}
	probed := false
	for _, ep := range r.Endpoints {
		probed = probed || ep.Name == "new."+ctZone
	}
	if !probed {
		t.Errorf("new.%s, which only CT shows, was not probed with ct.probe_names", ctZone)
	}

	for _, f := range r.Findings {
		if f.Certificate == e.healthy {
			t.Errorf("finding about shop's logged and deployed certificate: %+v", f)
		}
	}
	if len(r.Findings) != 3 {
		t.Errorf("%d findings, want the three above:\n%s", len(r.Findings), stdout)
	}
}

// A log whose checkpoint does not verify with the configured key is the
// CT source's failure, loud: discovery_failed naming the log, exit 1.
func TestScanCTCheckpointThatDoesNotVerifyIsLoud(t *testing.T) {
	t.Parallel()
	e := startCTEstate(t)
	e.log.SetFault(cttest.BadSignature)
	stdout, stderr, code := run(t, "scan", "--config", e.config(t, ""), "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	r := ctReport(t, stdout)
	failed := findingsOf(r, policy.DiscoveryFailed)
	if len(failed) != 1 || failed[0].Name != "ct" || failed[0].Tier != policy.Page || !strings.Contains(failed[0].Message, e.log.URL) ||
		!strings.Contains(failed[0].Message, "does not verify") {
		t.Errorf("discovery failures %+v; want the ct source's, naming the log and saying its data does not verify", failed)
	}
	if len(findingsOf(r, policy.StaleDeployment))+len(findingsOf(r, policy.UnexpectedIssuer)) > 0 {
		t.Errorf("findings from a log that does not verify:\n%s", stdout)
	}
}

// certwatch run keeps each log's position in the state: after a restart it
// reads only what was logged since (no tile it read before is fetched
// again), and still knows the certificates it saw before.
func TestRunResumesCTLogsFromTheSavedPosition(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	e := startCTEstate(t)
	now := time.Now()
	other := e.issuing.MustLeaf(certtest.LeafOptions{DNSNames: []string{"www.other.example.org"}, NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)})
	filler := cttest.Entry{Cert: other.Cert.Raw, Chain: [][]byte{e.issuing.Cert.Raw, e.root.Cert.Raw}, Timestamp: now}
	if err := e.log.AppendFunc(300, func(int64) cttest.Entry { return filler }); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t, fmt.Sprintf(`notify:
  state: %q
daemon:
  listen: 127.0.0.1:0
  schedules:
    discovery: "@every 1h"
    probe: "@every 1h"
  jitter: 10ms
  grace_period: 5s
`, filepath.Join(e.dir, "state.db")))
	ctRead := func(l map[string]any) bool { return l["msg"] == "ct log read" }

	p := startRun(t, bin, cfg)
	first := p.waitLog(t, "the first read of the log", 1, ctRead)
	if first["from"] != float64(-1) || first["next"] != float64(e.log.Size()) {
		t.Fatalf("first read %v, want from the end (-1, start entries back) to %d", first, e.log.Size())
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.waitExit(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}

	later := e.issuing.MustLeaf(certtest.LeafOptions{DNSNames: []string{"later." + ctZone}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90 * 24 * time.Hour)})
	if err := e.log.Append(cttest.Entry{Cert: later.Cert.Raw, Chain: [][]byte{e.issuing.Cert.Raw, e.root.Cert.Raw}}); err != nil {
		t.Fatal(err)
	}
	before := len(e.log.Requests())
	p = startRun(t, bin, cfg)
	restored := p.waitLog(t, "the positions restored", 1, msg("ct positions restored from the state"))
	if restored["certificates"] != float64(4) {
		t.Errorf("restored %v, want the 4 issuances seen before the restart", restored)
	}
	second := p.waitLog(t, "the read after the restart", 1, ctRead)
	if second["from"] != first["next"] || second["entries"] != float64(1) || second["watched"] != float64(1) {
		t.Errorf("read after the restart %v, want from %v, the one entry logged since", second, first["next"])
	}
	for _, r := range e.log.Requests()[before:] {
		if strings.HasPrefix(r, "tile/data/000") {
			t.Errorf("after the restart the log was read again from its start: %s", r)
		}
	}
}

package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/internal/starttlstest"
	"github.com/certwatch/certwatch/policy"
)

// TestScanZoneStartTLS scans, through cli.Run, a real zone transfer of a
// zone whose mail exchangers (MX, probed with SMTP on 25), SRV services
// (_submission, _imap, _ldap, _pop3) and a well-known port (5432, with
// --ports) speak STARTTLS, and checks that expiry, name and trust problems
// behind the dialogues are found as on 443, each once; that healthy ones
// raise nothing; and that a server without STARTTLS is an endpoint error
// for a zone name and an unreachable finding for a --target.
func TestScanZoneStartTLS(t *testing.T) {
	now := time.Now()
	day := 24 * time.Hour
	const zone = "mx.example"
	name := func(l string) string { return l + "." + zone }
	root := certtest.MustCA("Mail Root", now.Add(-365*day), now.Add(5*365*day))
	other := certtest.MustCA("Someone Else's Root", now.Add(-365*day), now.Add(5*365*day))
	leaf := func(ca *certtest.CA, notAfter time.Time, names ...string) *certtest.Leaf {
		return ca.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.Add(-300 * day), NotAfter: notAfter})
	}

	serve := func(addr string, proto discovery.Protocol, l *certtest.Leaf, refuse bool) *starttlstest.Server {
		t.Helper()
		s, err := starttlstest.Serve(addr, proto, starttlstest.Options{Cert: l.FullChain(), Refuse: refuse})
		if errors.Is(err, syscall.EACCES) {
			t.Skipf("binding %s needs privileges (the MX targets are probed on port 25): %v", addr, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	port := func(s *starttlstest.Server) int { return int(s.Addr().Port()) }
	mx1 := serve("127.0.31.1:25", discovery.SMTP, leaf(root, now.Add(5*day), name("mx1")), false)
	mx2 := serve("127.0.31.2:25", discovery.SMTP, leaf(root, now.Add(200*day), name("mx2")), false)
	sub := serve("127.0.31.3:0", discovery.SMTP, leaf(root, now.Add(200*day), "smtp.elsewhere.example"), false)
	imap := serve("127.0.31.4:0", discovery.IMAP, leaf(other, now.Add(200*day), name("imap")), false)
	ldap := serve("127.0.31.5:0", discovery.LDAP, leaf(root, now.Add(200*day), name("ldap")), false)
	db := serve("127.0.31.6:5432", discovery.Postgres, leaf(root, now.Add(-2*day), name("db")), false)
	pop := serve("127.0.31.7:0", discovery.POP3, leaf(root, now.Add(200*day), name("pop")), true)
	// XMPP is probed under its domain, which its certificate names.
	xmpp := serve("127.0.31.8:0", discovery.XMPPClient, leaf(root, now.Add(200*day), zone), false)

	dns, err := dnstest.Start(dnstest.Zone{Name: zone, Text: fmt.Sprintf(`
@ SOA ns hostmaster 1 3600 600 86400 300
@ NS ns
ns A 127.0.0.1
@ MX 10 mx1
@ MX 20 mx2
mx1 A 127.0.31.1
mx2 A 127.0.31.2
_submission._tcp SRV 0 0 %d smtp
smtp A 127.0.31.3
_imap._tcp SRV 0 0 %d imap
imap A 127.0.31.4
_ldap._tcp SRV 0 0 %d ldap
ldap A 127.0.31.5
db A 127.0.31.6
_pop3._tcp SRV 0 0 %d pop
pop A 127.0.31.7
_xmpp-client._tcp SRV 0 0 %d chat
chat A 127.0.31.8
`, port(sub), port(imap), port(ldap), port(pop), port(xmpp))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	caFile := filepath.Join(t.TempDir(), "root.pem")
	if err := os.WriteFile(caFile, root.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	// A configured target without STARTTLS (the zone's own pop name,
	// given by hand too), as the mapping form of targets. Every name also
	// serves nothing on 443, so more than half the endpoints are refused:
	// the failure share that would call this run an outage is raised.
	cfg := filepath.Join(t.TempDir(), "certwatch.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
zones: [{name: %s, nameserver: "%s"}]
probe: {allow_loopback: true}
ports: [443, 5432]
ca_files: [%s]
targets:
  - {address: "%s:%d", protocol: pop3}
notify:
  storm: {max_failure_share: 0.95}
`, zone, dns.Addr(), caFile, name("pop"), port(pop)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A generous timeout: every server here answers at once, and a loaded
	// host that took longer than the timeout would retry, which the count
	// of one connection per probe below would read as a bug.
	stdout, stderr, code := run(t, "scan", "--config", cfg, "--timeout", "30s", "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit code %d, want %d; stderr:\n%s\n%s", code, cli.ExitFindings, stderr, stdout)
	}
	var r struct {
		Endpoints []struct {
			Name     string             `json:"name"`
			Port     int                `json:"port"`
			Protocol discovery.Protocol `json:"protocol"`
			Cert     string             `json:"certificate"`
			Failure  string             `json:"failure"`
			Error    string             `json:"error"`
		} `json:"endpoints"`
		Findings []policy.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("decode report: %v\n%s", err, stdout)
	}

	type want struct {
		kind     policy.Kind
		tier     policy.Tier
		endpoint string
		contains string
	}
	wants := []want{
		{policy.Expiring, policy.Page, name("mx1") + ":25", "leaf certificate \"mx1.mx.example\" expires in"},
		{policy.RenewalMissed, policy.Warning, name("mx1") + ":25", ""},
		{policy.HostnameMismatch, policy.Page, fmt.Sprintf("%s:%d", name("smtp"), port(sub)), "not for " + name("smtp")},
		{policy.ChainUntrusted, policy.Page, fmt.Sprintf("%s:%d", name("imap"), port(imap)), "does not verify"},
		{policy.Expired, policy.Critical, name("db") + ":5432", "expired 2 days ago"},
		{policy.Unreachable, policy.Warning, fmt.Sprintf("%s:%d", name("pop"), port(pop)), "no_starttls: starttls (pop3) with 127.0.31.7"},
	}
	var got []want
	for _, f := range r.Findings {
		for _, ep := range f.Endpoints {
			w := want{f.Kind, f.Tier, net.JoinHostPort(ep.Name, fmt.Sprint(ep.Port)), ""}
			for _, x := range wants {
				if x.kind == w.kind && x.endpoint == w.endpoint && strings.Contains(f.Message, x.contains) {
					w.contains = x.contains
				}
			}
			got = append(got, w)
		}
	}
	sortWants := func(ws []want) {
		slices.SortFunc(ws, func(a, b want) int { return strings.Compare(a.endpoint+string(a.kind), b.endpoint+string(b.kind)) })
	}
	sortWants(got)
	sortWants(wants)
	if !slices.Equal(got, wants) {
		t.Errorf("findings (kind, tier, endpoint, matched text):\n got  %v\n want %v\nreport:\n%s", got, wants, stdout)
	}

	// Every STARTTLS endpoint was reached through its dialogue and says
	// which; the zone's pop name is an endpoint error, not a finding.
	type seen struct {
		proto   discovery.Protocol
		cert    bool
		failure string
	}
	eps := map[string]seen{}
	for _, ep := range r.Endpoints {
		eps[net.JoinHostPort(ep.Name, fmt.Sprint(ep.Port))] = seen{ep.Protocol, ep.Cert != "", ep.Failure}
	}
	for key, w := range map[string]seen{
		name("mx1") + ":25":                            {discovery.SMTP, true, ""},
		name("mx2") + ":25":                            {discovery.SMTP, true, ""},
		fmt.Sprintf("%s:%d", name("smtp"), port(sub)):  {discovery.SMTP, true, ""},
		fmt.Sprintf("%s:%d", name("imap"), port(imap)): {discovery.IMAP, true, ""},
		fmt.Sprintf("%s:%d", name("ldap"), port(ldap)): {discovery.LDAP, true, ""},
		name("db") + ":5432":                           {discovery.Postgres, true, ""},
		fmt.Sprintf("%s:%d", zone, port(xmpp)):         {discovery.XMPPClient, true, ""},
		name("db") + ":443":                            {discovery.TLS, false, "refused"},
		fmt.Sprintf("%s:%d", name("pop"), port(pop)):   {discovery.POP3, false, "no_starttls"},
	} {
		if eps[key] != w {
			t.Errorf("endpoint %s: %+v, want %+v", key, eps[key], w)
		}
	}
	// One connection per STARTTLS probe.
	for _, s := range []*starttlstest.Server{mx1, mx2, sub, imap, ldap, db, xmpp} {
		if s.Accepted() != 1 || s.Upgraded() != 1 {
			t.Errorf("server %s accepted %d connections and upgraded %d, want 1 and 1", s.Addr(), s.Accepted(), s.Upgraded())
		}
	}

	if got := xmpp.Received(); len(got) != 1 || !strings.Contains(got[0], "to='"+zone+"'") {
		t.Errorf("the XMPP server received %q, want a stream to %s", got, zone)
	}

	// inventory lists the protocol of every target.
	stdout, stderr, code = run(t, "inventory", "--zone", zone, "--nameserver", dns.Addr(), "--ports", "443,5432")
	if code != 0 {
		t.Fatalf("inventory: exit code %d; stderr:\n%s", code, stderr)
	}
	for _, row := range [][]string{
		{name("mx1") + ":25", "smtp", "127.0.31.1"},
		{name("db") + ":5432", "postgres", "127.0.31.6"},
		{name("db") + ":443", "tls", "127.0.31.6"},
		{fmt.Sprintf("%s:%d", name("ldap"), port(ldap)), "ldap", "127.0.31.5"},
	} {
		if !slices.ContainsFunc(strings.Split(stdout, "\n"), func(l string) bool { return slices.Equal(strings.Fields(l)[:min(3, len(strings.Fields(l)))], row) }) {
			t.Errorf("inventory lacks the row %q:\n%s", row, stdout)
		}
	}
}

// TestProtocolFlags: --target HOST:PORT/PROTOCOL and --ports PORT/PROTOCOL
// set the protocol inventory shows; an unknown protocol is a usage error.
func TestProtocolFlags(t *testing.T) {
	stdout, stderr, code := run(t, "inventory", "--target", "db.example:6432/postgres", "--target", "mx.example",
		"--target", "directory.example/ldap", "--ports", "443,2525/smtp", "--output", "json")
	if code != 0 {
		t.Fatalf("inventory: exit code %d; stderr:\n%s", code, stderr)
	}
	var inv struct {
		Targets []struct {
			Name     string `json:"name"`
			Port     int    `json:"port"`
			Protocol string `json:"protocol"`
		} `json:"targets"`
	}
	if err := json.Unmarshal([]byte(stdout), &inv); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range inv.Targets {
		got = append(got, fmt.Sprintf("%s:%d/%s", tg.Name, tg.Port, tg.Protocol))
	}
	want := []string{"db.example:6432/postgres", "directory.example:389/ldap", "mx.example:443/tls", "mx.example:2525/smtp"}
	if !slices.Equal(got, want) {
		t.Errorf("inventory targets %v, want %v", got, want)
	}
	for _, args := range [][]string{
		{"inventory", "--target", "mx.example", "--ports", "443,2525/smpt"},
		{"scan", "--target", "db.example:6432/oracle"},
	} {
		_, stderr, code := run(t, args...)
		if code != cli.ExitUsage || !strings.Contains(stderr, "unknown protocol") || !strings.Contains(stderr, "postgres") {
			t.Errorf("%v: exit code %d, stderr %q; want a usage error naming the known protocols", args, code, stderr)
		}
	}
}

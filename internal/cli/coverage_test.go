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

	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/internal/knottest"
	"github.com/certwatch/certwatch/internal/kubetest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestScanFollowsDelegations: corp.example on knot delegates
// svc.corp.example to a server on 127.0.3.2 and closed.corp.example to
// one on 127.0.3.3 that refuses transfers. The scan of corp.example alone
// finds the wildcard certificate of the child, about to expire, as one
// finding listing both of its endpoints, and says the refused child is
// not watched: a coverage_gap naming the zone, its name server and the fix.
// The certificate also names a host under partner.example, which no source
// watches: a notice for that zone, as the SOA lookup through the resolver
// finds it (not the name's parent, apps.partner.example).
func TestScanFollowsDelegations(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := certtest.MustCA("Delegation Test Root", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	wildcard := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"*.svc.corp.example", "portal.apps.partner.example"}, NotBefore: now.AddDate(0, -3, 0), NotAfter: now.Add(3 * 24 * time.Hour)})
	a, err := certtest.Serve("127.0.3.21:0", wildcard.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	tlsPort := fmt.Sprint(a.Addr().Port())
	b, err := certtest.Serve(net.JoinHostPort("127.0.3.22", tlsPort), wildcard.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	// ns1 is on an address nothing listens on: probed on the TLS port, on
	// 127.0.0.1 it met another test's listener that happened to have the
	// same port (1 run in 10 under -race).
	k := knottest.Start(t, knottest.Zone{Name: "corp.example", Transfer: knottest.TransferLoopback, Text: `
@          SOA  ns1 hostmaster 1 3600 600 86400 300
@          NS   ns1
ns1        A    127.0.3.20
svc        NS   ns.svc
ns.svc     A    127.0.3.2
closed     NS   ns.closed
ns.closed  A    127.0.3.3
`})
	child, err := dnstest.StartAt("127.0.3.2:0", dnstest.Zone{Name: "svc.corp.example", Text: "a A 127.0.3.21\nb A 127.0.3.22\n"},
		dnstest.Zone{Name: "partner.example"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Close() })
	_, dnsPort, _ := net.SplitHostPort(child.Addr())
	closed, err := dnstest.StartAt(net.JoinHostPort("127.0.3.3", dnsPort), dnstest.Zone{Name: "closed.corp.example", RefuseTransfer: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closed.Close() })

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, fmt.Sprintf(`zones:
  - name: corp.example
    nameserver: %s
ports: [%s]
ca_files: [%q]
probe: {timeout: 2s, allow_loopback: true}
resolver: %s
coverage: {delegation_port: %s}
`, k.Addr, tlsPort, caFile, child.Addr(), dnsPort))

	stdout, stderr, code := run(t, "scan", "--config", cfg, "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	var expiring, gap, names *policy.Finding
	for i, f := range r.Findings {
		switch {
		case f.Kind == policy.Expiring && f.Subject == "*.svc.corp.example":
			expiring = &r.Findings[i]
		case f.Kind == policy.CoverageGap && f.Tier == policy.Notice:
			names = &r.Findings[i]
		case f.Kind == policy.CoverageGap:
			if gap != nil {
				t.Errorf("second coverage gap: %+v", f)
			}
			gap = &r.Findings[i]
		}
	}
	if expiring == nil || expiring.Tier != policy.Page || len(expiring.Endpoints) != 2 ||
		expiring.Endpoints[0].Name != "a.svc.corp.example" || expiring.Endpoints[1].Name != "b.svc.corp.example" {
		t.Errorf("expiring wildcard of the followed child = %+v, want one page finding with a.svc and b.svc", expiring)
	}
	if gap == nil || gap.Tier != policy.Warning || gap.Name != "closed.corp.example" ||
		!strings.Contains(gap.Message, "ns.closed.corp.example") || !strings.Contains(gap.Message, "allow transfers from this host, or add the zone with its own nameserver/tsig") {
		t.Errorf("refused child = %+v, want a warning coverage_gap naming closed.corp.example, its name server and the fix", gap)
	}
	if names == nil || names.Name != "partner.example" || !strings.Contains(names.Message, "portal.apps.partner.example") || len(names.Endpoints) != 2 {
		t.Errorf("name outside every zone = %+v, want a notice for partner.example listing the name and the certificate's endpoints", names)
	}
	if len(r.Sources) != 1 || r.Sources[0].Error != "" {
		t.Errorf("sources = %+v, want corp.example without error: a refused child is a gap, not a failed source", r.Sources)
	}
	checkCoverage(t, r.Coverage)

	// certwatch coverage: the same object alone, and as a table.
	stdout, stderr, code = run(t, "coverage", "--config", cfg, "--output", "json")
	if code != 0 {
		t.Fatalf("coverage --output json: exit code %d, want 0 (gaps are below page); stderr:\n%s", code, stderr)
	}
	var cov scan.Coverage
	if err := json.Unmarshal([]byte(stdout), &cov); err != nil {
		t.Fatalf("coverage: %v\n%s", err, stdout)
	}
	checkCoverage(t, &cov)
	stdout, _, code = run(t, "coverage", "--config", cfg)
	for _, want := range []string{
		"dnszone:corp.example",
		"svc.corp.example  delegation  corp.example",
		"warning delegation_refused closed.corp.example",
		"notice unmonitored_zone partner.example",
		"fix: allow transfers from this host, or add the zone with its own nameserver/tsig",
		"Watching 2 zone(s) (1 followed from delegations) through 1 source(s): 3 name(s), 3 endpoint(s) probed, 1 certificate(s) (1 served, 0 held at rest, 0 both); 2 coverage gap(s): 1 delegation_refused, 1 unmonitored_zone.",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("coverage table lacks %q:\n%s", want, stdout)
		}
	}
	if code != 0 {
		t.Errorf("coverage: exit code %d, want 0", code)
	}
	if _, _, code := run(t, "coverage", "--config", cfg, "--fail-on", "warning"); code != cli.ExitFindings {
		t.Errorf("coverage --fail-on warning: exit code %d, want %d for the refused delegation", code, cli.ExitFindings)
	}
}

// TestScanFollowsRoute53Delegations: a scan of Route 53 alone, whose
// example.com delegates team.example.com to knot (transfers), closed to
// knot (refuses) and shop to the hosted zone of that name. The followed
// child's expiring certificate is found; the refused child is a warning
// coverage_gap naming the zone, its name server and the fix; shop is
// covered by its hosted zone: listed with its parent, no gap.
func TestScanFollowsRoute53Delegations(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Route 53 Delegation Root", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"app.team.example.com"}, NotBefore: now.AddDate(0, -3, 0), NotAfter: now.Add(3 * 24 * time.Hour)})
	ln, err := certtest.Serve("127.0.5.1:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// The child's own record for its name server is not where knot
	// listens (127.0.0.1, given as glue in the hosted zone): probed, that
	// address's port could be another test's listener.
	soa := "@ SOA ns hostmaster 1 3600 600 86400 300\n@ NS ns\nns A 127.0.5.9\n"
	k := knottest.Start(t,
		knottest.Zone{Name: "team.example.com", Transfer: knottest.TransferLoopback, Text: soa + "app A 127.0.5.1\n"},
		knottest.Zone{Name: "closed.example.com", Text: soa + "secret A 127.0.5.2\n"})
	_, dnsPort, _ := net.SplitHostPort(k.Addr)

	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	srv.Route53.AddZone(
		awstest.Zone{Name: "example.com", Records: []awstest.RecordSet{
			{Name: "team.example.com", Type: "NS", TTL: 300, Values: []string{"ns.team.example.com."}},
			{Name: "ns.team.example.com", Type: "A", TTL: 300, Values: []string{"127.0.0.1"}},
			{Name: "closed.example.com", Type: "NS", TTL: 300, Values: []string{"ns.closed.example.com."}},
			{Name: "ns.closed.example.com", Type: "A", TTL: 300, Values: []string{"127.0.0.1"}},
			{Name: "shop.example.com", Type: "NS", TTL: 300, Values: []string{"ns-1.awsdns-01.org.", "ns-2.awsdns-02.co.uk."}},
		}},
		awstest.Zone{Name: "shop.example.com"})

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, fmt.Sprintf(`aws: {route53: true}
ports: [%d]
ca_files: [%q]
probe: {timeout: 2s, allow_loopback: true}
coverage: {delegation_port: %s}
`, ln.Addr().Port(), caFile, dnsPort))

	stdout, stderr, code := run(t, "scan", "--config", cfg, "--output", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	var expiring, gap *policy.Finding
	for i, f := range r.Findings {
		switch f.Kind {
		case policy.Expiring:
			expiring = &r.Findings[i]
		case policy.CoverageGap:
			if gap != nil {
				t.Errorf("second coverage gap: %+v", f)
			}
			gap = &r.Findings[i]
		}
	}
	if expiring == nil || expiring.Tier != policy.Page || len(expiring.Endpoints) != 1 || expiring.Endpoints[0].Name != "app.team.example.com" {
		t.Errorf("expiring certificate of the followed child = %+v, want a page finding on app.team.example.com", expiring)
	}
	if gap == nil || gap.Tier != policy.Warning || gap.Name != "closed.example.com" ||
		!strings.Contains(gap.Message, "ns.closed.example.com") || !strings.Contains(gap.Message, "allow transfers from this host, or add the zone with its own nameserver/tsig") {
		t.Errorf("refused child = %+v, want a warning coverage_gap naming closed.example.com, its name server and the fix", gap)
	}
	if r.Coverage == nil {
		t.Fatal("no coverage object")
	}
	var zones []string
	for _, z := range r.Coverage.Zones {
		zones = append(zones, strings.Join([]string{z.Zone, z.Via, z.Parent}, " "))
	}
	want := "example.com route53 , shop.example.com route53 example.com, team.example.com delegation example.com"
	if got := strings.Join(zones, ", "); got != want {
		t.Errorf("coverage zones = %q, want %q", got, want)
	}
	if r.Coverage.GapsByReason["delegation_refused"] != 1 || len(r.Coverage.Gaps) != 1 {
		t.Errorf("coverage gaps = %+v, want closed.example.com alone", r.Coverage.Gaps)
	}
}

// TestScanTransferredDelegationToRoute53: p.example, transferred from
// knot (zones:), delegates cloud.p.example to Route 53's name servers.
// When Route 53 is read in the same scan and holds cloud.p.example as a
// public hosted zone, the child is covered: no coverage gap, the coverage
// lists it via route53 with its parent, and its name is probed as the
// hosted zone's. Without that hosted zone, the child is the
// delegation_refused gap saying to read it from Route 53.
func TestScanTransferredDelegationToRoute53(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Transferred Route 53 Delegation Root", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.cloud.p.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)})
	// 127.0.54.0/24 is this test's alone: nothing else listens there.
	ln, err := certtest.Serve("127.0.54.1:0", leaf.TLSCertificate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// The parent's only names are delegations: nothing of its own is
	// probed (allow_empty).
	k := knottest.Start(t, knottest.Zone{Name: "p.example", Transfer: knottest.TransferLoopback, Text: `
@      SOA  ns.elsewhere.example. hostmaster 1 3600 600 86400 300
@      NS   ns.elsewhere.example.
cloud  NS   ns-1.awsdns-01.org.
cloud  NS   ns-2.awsdns-02.co.uk.
`})

	awstest.Isolate(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, fmt.Sprintf(`zones:
  - name: p.example
    nameserver: %s
    allow_empty: true
aws: {route53: true}
ports: [%d]
ca_files: [%q]
probe: {timeout: 2s, allow_loopback: true}
`, k.Addr, ln.Addr().Port(), caFile))

	scanWith := func(t *testing.T, zones ...awstest.Zone) (scan.Report, int) {
		t.Helper()
		srv := awstest.NewServer()
		t.Cleanup(srv.Close)
		t.Setenv("AWS_ENDPOINT_URL", srv.URL)
		srv.Route53.AddZone(zones...)
		stdout, stderr, code := run(t, "scan", "--config", cfg, "--output", "json", "--fail-on", "warning")
		var r scan.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("report: %v\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if r.Coverage == nil {
			t.Fatal("no coverage object")
		}
		return r, code
	}

	t.Run("covered by the hosted zone", func(t *testing.T) {
		r, code := scanWith(t, awstest.Zone{Name: "cloud.p.example", Records: []awstest.RecordSet{
			{Name: "api.cloud.p.example", Type: "A", TTL: 300, Values: []string{"127.0.54.1"}}}})
		if code != 0 {
			t.Errorf("exit code %d, want 0: findings %+v", code, r.Findings)
		}
		for _, f := range r.Findings {
			if f.Kind == policy.CoverageGap {
				t.Errorf("coverage gap %+v, want none", f)
			}
		}
		if len(r.Coverage.Gaps) != 0 {
			t.Errorf("coverage gaps = %+v, want none", r.Coverage.Gaps)
		}
		var zones []string
		for _, z := range r.Coverage.Zones {
			zones = append(zones, strings.Join([]string{z.Zone, z.Via, z.Parent, z.Source}, " "))
		}
		want := "cloud.p.example route53 p.example route53, p.example transfer  dnszone:p.example"
		if got := strings.Join(zones, ", "); got != want {
			t.Errorf("coverage zones = %q, want %q", got, want)
		}
		if len(r.Certificates) != 1 || len(r.Endpoints) != 1 || r.Endpoints[0].Name != "api.cloud.p.example" {
			t.Errorf("endpoints = %+v, want api.cloud.p.example alone, serving its certificate", r.Endpoints)
		}
	})

	t.Run("no hosted zone", func(t *testing.T) {
		r, code := scanWith(t)
		if code != cli.ExitFindings {
			t.Errorf("exit code %d, want %d for the warning gap", code, cli.ExitFindings)
		}
		if len(r.Coverage.Gaps) != 1 {
			t.Fatalf("coverage gaps = %+v, want cloud.p.example", r.Coverage.Gaps)
		}
		g := r.Coverage.Gaps[0]
		if g.Reason != "delegation_refused" || g.Zone != "cloud.p.example" || g.Parent != "p.example" ||
			!strings.Contains(g.Detail, "no public hosted zone cloud.p.example was read in this run") || !strings.HasPrefix(g.Fix, "read it from Route 53 instead") {
			t.Errorf("gap = %+v, want cloud.p.example refused, no hosted zone read", g)
		}
	})
}

// checkCoverage checks the coverage of TestScanFollowsDelegations: the
// zone and its followed child, the source's counts, and the two gaps.
func checkCoverage(t *testing.T, c *scan.Coverage) {
	t.Helper()
	if c == nil {
		t.Fatal("no coverage object")
	}
	var zones []string
	for _, z := range c.Zones {
		zones = append(zones, z.Zone+" "+z.Via)
	}
	if strings.Join(zones, ", ") != "corp.example transfer, svc.corp.example delegation" {
		t.Errorf("coverage zones = %v", zones)
	}
	if len(c.Sources) != 1 || c.Sources[0].Names != 3 || c.Sources[0].Endpoints != 3 || c.Sources[0].Certificates != 1 {
		t.Errorf("coverage sources = %+v, want dnszone:corp.example with 3 names (a.svc, b.svc, ns1), 3 endpoints, 1 certificate", c.Sources)
	}
	if c.GapsByReason["delegation_refused"] != 1 || c.GapsByReason["unmonitored_zone"] != 1 || len(c.Gaps) != 2 {
		t.Errorf("coverage gaps = %+v", c.Gaps)
	}
}

// TestDemoCoverage: the demo's lab delegates svc.internal.example, which
// the scan follows (its expiring wildcard is found), and
// partners.internal.example, which refuses transfers: a coverage gap.
func TestDemoCoverage(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := run(t, "demo", "--output", "json")
	if code != 0 {
		t.Fatalf("demo: exit code %d; stderr:\n%s", code, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report: %v", err)
	}
	var followed, refused bool
	for _, f := range r.Findings {
		followed = followed || f.Kind == policy.Expiring && f.Subject == "*.svc.internal.example"
		refused = refused || f.Kind == policy.CoverageGap && f.Name == "partners.internal.example"
	}
	if !followed || !refused {
		t.Errorf("demo findings: followed child's wildcard found %v, refused child a gap %v", followed, refused)
	}
	if r.Coverage == nil || r.Coverage.GapsByReason["delegation_refused"] != 1 || len(r.Coverage.Zones) != 2 {
		t.Errorf("demo coverage = %+v, want 2 zones (one followed) and the refused delegation", r.Coverage)
	}
}

// TestCoverageAtRest: certwatch coverage of a zone, a directory and a
// cluster counts what is held at rest by kind of location, in JSON and in
// its table; the certificate held at rest for a name under a zone no
// source watches is a coverage gap for the zone the SOA lookup finds (not
// the name's parent), naming where it is held; and a cert-manager
// Certificate whose Secret is not there is a gap of its own.
func TestCoverageAtRest(t *testing.T) {
	t.Parallel()
	now := time.Now()
	root := certtest.MustCA("Rest Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	leaf := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"api.team.other.example"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)})
	dns, err := dnstest.Start(dnstest.Zone{Name: "corp.example", Text: "@ SOA ns1 hostmaster 1 3600 600 86400 300\n@ NS ns1\nns1 A 127.0.0.1\n"},
		dnstest.Zone{Name: "other.example"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	kube := kubetest.New(t)
	kube.Add(
		kubetest.Secret("payments", "api-tls", "kubernetes.io/tls", map[string][]byte{"tls.crt": certtest.PEM(leaf.Cert)}, nil),
		kubetest.ConfigMap("payments", "kube-root-ca.crt", map[string]string{"ca.crt": string(root.PEM())}, nil, nil),
		kubetest.CertManagerCRD(),
		kubetest.Certificate("payments", "api", "api-tls", nil, kubetest.CertManagerStatus{Ready: true, RenewalTime: now.AddDate(0, 4, 0)}),
		kubetest.Certificate("payments", "hidden", "hidden-tls", nil, kubetest.CertManagerStatus{Ready: true, RenewalTime: now.AddDate(0, 4, 0)}),
	)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "api.pem"), certtest.PEM(leaf.Cert, root.Cert), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	writeConfig(t, cfg, fmt.Sprintf(`zones:
  - name: corp.example
    nameserver: %s
resolver: %s
files:
  - paths: [%q]
kubernetes:
  - kubeconfig: %s
    context: prod
`, dns.Addr(), dns.Addr(), filepath.Join(dir, "*.pem"), kube.Kubeconfig(t, dir, "prod")))

	stdout, stderr, code := run(t, "coverage", "--config", cfg, "--output", "json")
	if code != 0 {
		t.Fatalf("coverage: exit code %d, want 0 (gaps below page); stderr:\n%s", code, stderr)
	}
	var cov scan.Coverage
	if err := json.Unmarshal([]byte(stdout), &cov); err != nil {
		t.Fatalf("coverage: %v\n%s", err, stdout)
	}
	var kinds []string
	for _, a := range cov.AtRest {
		kinds = append(kinds, fmt.Sprintf("%s %d/%d", a.Kind, a.Certificates, a.Locations))
	}
	// The leaf in the file (#1), its Secret and cert-manager's Certificate;
	// the root in the file (#2) and the ConfigMap.
	if want := "certificate 1/1, configmap 1/1, file 2/2, secret 1/1"; strings.Join(kinds, ", ") != want {
		t.Errorf("at rest by kind = %q, want %q", strings.Join(kinds, ", "), want)
	}
	gaps := map[string]policy.Gap{}
	for _, g := range cov.Gaps {
		gaps[string(g.Reason)+" "+g.Zone] = g
	}
	if g, ok := gaps["unmonitored_zone other.example"]; !ok || len(g.Certificates) != 1 || g.Certificates[0] != probes.Fingerprint(leaf.Cert) || g.Tier != policy.Notice {
		t.Errorf("gaps = %+v, want a notice for other.example (the SOA lookup's zone) listing the leaf held at rest", cov.Gaps)
	}
	if g, ok := gaps["secret_not_read certificate payments/hidden"]; !ok || g.Tier != policy.Warning || !strings.Contains(g.Detail, "secret payments/hidden-tls") {
		t.Errorf("gaps = %+v, want a warning for certificate payments/hidden, whose Secret is missing", cov.Gaps)
	}
	if len(cov.Gaps) != 2 {
		t.Errorf("%d gaps, want 2: %+v", len(cov.Gaps), cov.Gaps)
	}

	stdout, _, _ = run(t, "coverage", "--config", cfg)
	for _, want := range []string{
		"HELD AT REST  CERTIFICATES  LOCATIONS  SERVED",
		"secret        1             1          0",
		"notice unmonitored_zone other.example",
		"warning secret_not_read certificate payments/hidden",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("coverage table lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, _ = run(t, "scan", "--config", cfg, "--output", "json")
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout)
	}
	var other *policy.Finding
	for i, f := range r.Findings {
		if f.Kind == policy.CoverageGap && f.Name == "other.example" {
			other = &r.Findings[i]
		}
	}
	if other == nil {
		t.Fatalf("scan report has no coverage_gap for other.example:\n%s", stdout)
	}
	if !strings.Contains(other.Message, `"api.team.other.example" (held at rest in `) || !strings.Contains(other.Message, "api.pem") {
		t.Errorf("coverage_gap of other.example does not say where the certificate is held: %s", other.Message)
	}
}

package cli_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/cli"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

const (
	awsZone   = "corp.example"
	albARN    = "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/1"
	acmTarget = "_98d4ae8d6a2b4c1e.mhbtsbpdnt.acm-validations.aws"
)

// awsEstate is an AWS account in the fakes: a public and a private Route 53
// zone whose names point at TLS listeners on loopback, and ACM certificates
// in eu-west-1, some of them the very certificates the listeners serve.
type awsEstate struct {
	srv    *awstest.Server
	port   int
	caFile string
	config string // the configuration file args names (writeConfig)
	zoneID string
	arn    map[string]string // by short name
	fp     map[string]string // served certificate fingerprint, by short name
	old    map[string]string // fingerprint of an older certificate also served, by short name
	pem    map[string]string // fingerprint of the PEM ACM gives, by short name
	iam    map[string]string // IAM server certificate ARNs, by name
	lb     map[string]string // load balancer ARNs and DNS names, by name and name+"/dns"
	dns    string            // a DNS server answering for the AWS resources' names
	vpcDNS string            // the private zone's VPC resolver
}

// acmSerial renders a serial number as ACM shows it: colon-separated
// octets.
func acmSerial(l *certtest.Leaf) string {
	var parts []string
	for _, b := range l.Cert.SerialNumber.Bytes() {
		parts = append(parts, fmt.Sprintf("%02x", b))
	}
	return strings.Join(parts, ":")
}

func startAWSEstate(t *testing.T) *awsEstate {
	t.Helper()
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)

	now := time.Now()
	days := func(d int) time.Time { return now.Add(time.Duration(d) * 24 * time.Hour) }
	root := certtest.MustCA("Corp Root CA", days(-1000), days(3000))
	issuing := root.MustIntermediate("Corp Issuing CA", days(-500), days(1000))
	leaf := func(notAfter time.Time, names ...string) *certtest.Leaf {
		return issuing.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: notAfter.Add(-395 * 24 * time.Hour), NotAfter: notAfter})
	}
	name := func(n string) string { return n + "." + awsZone }

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	e := &awsEstate{srv: srv, port: port, arn: map[string]string{}, fp: map[string]string{}, old: map[string]string{}}
	e.config = filepath.Join(t.TempDir(), "certwatch.yaml")
	e.writeConfig(t, "")
	e.caFile = filepath.Join(t.TempDir(), "root.pem")
	if err := os.WriteFile(e.caFile, root.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}

	// What the listeners serve.
	served := map[string]*certtest.Leaf{
		"www":    leaf(days(45), name("www")),
		"api":    leaf(days(20), name("api")),
		"login":  leaf(days(50), name("login")),
		"legacy": leaf(days(10), name("legacy")),
		"shop":   leaf(days(5), name("shop")), // renewed in ACM, not rolled out
		"db":     leaf(days(200), "db.internal."+awsZone),
	}
	addr := map[string]string{"www": "127.0.0.41", "api": "127.0.0.42", "login": "127.0.0.43", "legacy": "127.0.0.44", "shop": "127.0.0.45", "db": "127.0.0.46"}
	var public, private []awstest.RecordSet
	// blog's second address still serves the certificate before its
	// reimport into ACM, with 60 days left; mix's addresses serve two
	// certificates ACM knows nothing of.
	blogOld := leaf(days(60), name("blog"))
	blogNew := issuing.MustLeaf(certtest.LeafOptions{DNSNames: []string{name("blog")}, NotBefore: days(-1), NotAfter: days(400)})
	mixA, mixB := leaf(days(100), name("mix")), leaf(days(200), name("mix"))
	for _, x := range []struct {
		addr string
		l    *certtest.Leaf
	}{{"127.0.0.47", blogNew}, {"127.0.0.48", blogOld}, {"127.0.0.49", mixA}, {"127.0.0.50", mixB}} {
		s, err := certtest.Serve(net.JoinHostPort(x.addr, fmt.Sprint(port)), x.l.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
	}
	e.fp["blog"], e.old["blog"] = probes.Fingerprint(blogNew.Cert), probes.Fingerprint(blogOld.Cert)
	public = append(public,
		awstest.RecordSet{Name: name("blog"), Type: "A", TTL: 60, Values: []string{"127.0.0.47", "127.0.0.48"}},
		awstest.RecordSet{Name: name("mix"), Type: "A", TTL: 60, Values: []string{"127.0.0.49", "127.0.0.50"}},
	)
	for short, l := range served {
		s, err := certtest.Serve(net.JoinHostPort(addr[short], fmt.Sprint(port)), l.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		e.fp[short] = probes.Fingerprint(l.Cert)
		rs := awstest.RecordSet{Name: l.Cert.DNSNames[0], Type: "A", TTL: 60, Values: []string{addr[short]}}
		if short == "db" {
			private = append(private, rs)
		} else {
			public = append(public, rs)
		}
	}

	validation := func(n, status string) []awstest.DomainValidation {
		return []awstest.DomainValidation{{
			DomainName: name(n), ValidationDomain: name(n), ValidationStatus: status, ValidationMethod: "DNS",
			Record: &awstest.ResourceRecord{Name: "_3639ac514e785e898d2646601fa951d5." + name(n) + ".", Type: "CNAME", Value: acmTarget + "."},
		}}
	}
	// The validation records in the zone: www's is right, docs' points to
	// an old value, login's is missing.
	public = append(public,
		awstest.RecordSet{Name: "_3639ac514e785e898d2646601fa951d5." + name("www"), Type: "CNAME", TTL: 300, Values: []string{acmTarget + "."}},
		awstest.RecordSet{Name: "_3639ac514e785e898d2646601fa951d5." + name("docs"), Type: "CNAME", TTL: 300, Values: []string{"_0000.old.acm-validations.aws."}},
	)
	// cache, in the private zone, is a CNAME to a name only that zone's
	// VPC resolver answers (aws.route53_resolvers).
	cacheLeaf := leaf(days(9), "cache.internal."+awsZone)
	private = append(private, awstest.RecordSet{Name: "cache.internal." + awsZone, Type: "CNAME", TTL: 60, Values: []string{"cache-1.vpc-0abc.example."}})
	cacheSrv, err := certtest.Serve(net.JoinHostPort("127.0.0.55", fmt.Sprint(port)), cacheLeaf.FullChain())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cacheSrv.Close() })
	vpcNS, err := dnstest.Start(dnstest.Zone{Name: "vpc-0abc.example", Text: "cache-1 A 127.0.0.55\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vpcNS.Close() })
	e.vpcDNS = vpcNS.Addr()
	public = append(public,
		awstest.RecordSet{Name: name("portal"), Type: "A", Alias: &awstest.Alias{DNSName: "dualstack.web-1.eu-west-1.elb.amazonaws.com.", HostedZoneID: "Z32O12XQLNTSW2"}},
		awstest.RecordSet{Name: name("portal2"), Type: "A", TTL: 60, Values: []string{"127.0.0.53"}},
	)
	ids := srv.Route53.AddZone(
		awstest.Zone{Name: awsZone, Records: public},
		awstest.Zone{Name: "internal." + awsZone, Private: true, VPCs: []awstest.VPC{{ID: "vpc-0abc", Region: "eu-west-1"}}, Records: private},
	)
	e.zoneID = ids[0]

	linked := func(short string) awstest.Certificate {
		l := served[short]
		return awstest.Certificate{Region: "eu-west-1", DomainName: l.Cert.DNSNames[0], Serial: acmSerial(l),
			NotBefore: l.Cert.NotBefore, NotAfter: l.Cert.NotAfter, InUseBy: []string{albARN}, RenewalEligibility: "ELIGIBLE"}
	}
	other := func(n string, notAfter time.Time, serial string) awstest.Certificate {
		return awstest.Certificate{Region: "eu-west-1", DomainName: name(n), Serial: serial,
			NotBefore: notAfter.Add(-395 * 24 * time.Hour), NotAfter: notAfter, InUseBy: []string{albARN}, RenewalEligibility: "ELIGIBLE"}
	}
	www := linked("www")
	www.Validations = validation("www", "SUCCESS")
	www.Renewal = &awstest.Renewal{Status: "PENDING_AUTO_RENEWAL", UpdatedAt: now, Validations: validation("www", "SUCCESS")}
	api := linked("api")
	api.Renewal = &awstest.Renewal{Status: "PENDING_AUTO_RENEWAL", UpdatedAt: days(-30)}
	login := linked("login")
	login.Validations = validation("login", "SUCCESS")
	login.Renewal = &awstest.Renewal{Status: "PENDING_VALIDATION", UpdatedAt: days(-10), Validations: validation("login", "PENDING_VALIDATION")}
	legacy := linked("legacy")
	legacy.Type, legacy.RenewalEligibility, legacy.InUseBy = "IMPORTED", "INELIGIBLE", nil
	shop := other("shop", days(300), "0a:0b:0c:0d")
	shop.NotBefore = days(-30)
	shop.Renewal = &awstest.Renewal{Status: "SUCCESS", UpdatedAt: days(-30)}
	docs := other("docs", days(90), "0d:0c")
	docs.Validations = validation("docs", "SUCCESS")
	payLeaf := leaf(days(6), name("pay"))
	pay := other("pay", days(6), acmSerial(payLeaf))
	pay.NotBefore, pay.NotAfter = payLeaf.Cert.NotBefore, payLeaf.Cert.NotAfter
	pay.PEM = string(certtest.PEM(payLeaf.Cert, issuing.Cert))
	e.pem = map[string]string{"pay": probes.Fingerprint(payLeaf.Cert)}
	pay.Renewal = &awstest.Renewal{Status: "FAILED", Reason: "CAA_ERROR", UpdatedAt: days(-20)}
	spare := other("spare", days(10), "1a")
	spare.InUseBy, spare.RenewalEligibility = nil, "INELIGIBLE"
	gone := other("gone", days(-3), "1b")
	gone.Status, gone.InUseBy, gone.RenewalEligibility = "EXPIRED", nil, "INELIGIBLE"

	// blog was reimported into its ARN: ACM holds the new certificate.
	blog := awstest.Certificate{Region: "eu-west-1", DomainName: name("blog"), Serial: acmSerial(blogNew), Type: "IMPORTED",
		NotBefore: blogNew.Cert.NotBefore, NotAfter: blogNew.Cert.NotAfter, InUseBy: []string{albARN}, RenewalEligibility: "INELIGIBLE",
		ImportedAt: days(-1)}
	// fresh was requested two days ago and waits for a validation record
	// nobody created; idle is issued, unused and its record is missing.
	fresh := awstest.Certificate{Region: "eu-west-1", DomainName: name("fresh"), Status: "PENDING_VALIDATION", CreatedAt: days(-2),
		Validations: validation("fresh", "PENDING_VALIDATION")}
	idle := other("idle", days(200), "1c")
	idle.InUseBy, idle.RenewalEligibility, idle.Validations = nil, "INELIGIBLE", validation("idle", "SUCCESS")

	// lbonly is served only by the ALB "web", whose DNS name no hosted zone
	// points to; portal is imported and in use by that ALB, which serves
	// it to portal.corp.example (an alias to the ALB), while
	// portal2.corp.example serves a copy directly.
	lbOnly := leaf(days(25), "lbonly.example.net")
	portalLeaf := leaf(days(12), name("portal"), name("portal2"))
	const webARN = "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/50dc6c495c0c9188"
	lbonly := awstest.Certificate{Region: "eu-west-1", DomainName: "lbonly.example.net", ARN: "arn:aws:acm:eu-west-1:111111111111:certificate/lbonly", InUseBy: []string{webARN}, Serial: acmSerial(lbOnly), Type: "IMPORTED",
		NotBefore: lbOnly.Cert.NotBefore, NotAfter: lbOnly.Cert.NotAfter, RenewalEligibility: "INELIGIBLE"}
	portal := awstest.Certificate{Region: "eu-west-1", DomainName: name("portal"), ARN: "arn:aws:acm:eu-west-1:111111111111:certificate/portal", InUseBy: []string{webARN}, SubjectAlternativeNames: []string{name("portal"), name("portal2")},
		Serial: acmSerial(portalLeaf), Type: "IMPORTED", NotBefore: portalLeaf.Cert.NotBefore, NotAfter: portalLeaf.Cert.NotAfter, RenewalEligibility: "INELIGIBLE"}

	order := []string{"www", "api", "login", "legacy", "shop", "docs", "pay", "spare", "gone", "blog", "fresh", "idle", "lbonly", "portal"}
	arns := srv.ACM.Add(www, api, login, legacy, shop, docs, pay, spare, gone, blog, fresh, idle, lbonly, portal)
	for i, short := range order {
		e.arn[short] = arns[i]
	}

	// IAM server certificates: edge, used by the classic ELB "old" and a
	// CloudFront distribution; orphan, used by nothing.
	edgeLeaf := leaf(days(12), name("static"), "old-lb.example.net")
	orphanLeaf := leaf(days(20), "orphan.example.net")
	e.iam = map[string]string{}
	for i, a := range srv.IAM.Add(
		awstest.ServerCertificate{Name: "edge-2025", ID: "ASCAEDGE", Body: string(certtest.PEM(edgeLeaf.Cert)), UploadDate: days(-300), Expiration: edgeLeaf.Cert.NotAfter},
		awstest.ServerCertificate{Name: "orphan", Body: string(certtest.PEM(orphanLeaf.Cert)), UploadDate: days(-300), Expiration: orphanLeaf.Cert.NotAfter},
	) {
		e.iam[[]string{"edge-2025", "orphan"}[i]] = a
	}
	e.fp["edge"], e.pem["orphan"] = probes.Fingerprint(edgeLeaf.Cert), probes.Fingerprint(orphanLeaf.Cert)
	e.fp["lbonly"], e.fp["portal"] = probes.Fingerprint(lbOnly.Cert), probes.Fingerprint(portalLeaf.Cert)

	e.lb = map[string]string{}
	lbARNs := srv.ELB.Add(
		awstest.LoadBalancer{Region: "eu-west-1", Name: "web", ARN: webARN, Listeners: []awstest.LBListener{
			{Port: port, Protocol: "HTTPS", Certificates: []string{e.arn["lbonly"], e.arn["portal"]}}}},
		awstest.LoadBalancer{Region: "eu-west-1", Name: "old", Type: "classic", Listeners: []awstest.LBListener{
			{Port: port, Protocol: "HTTPS", Certificates: []string{e.iam["edge-2025"]}}}},
	)
	e.lb["web"], e.lb["web/dns"], e.lb["old/dns"] = lbARNs[0], "web-1.eu-west-1.elb.amazonaws.com", "old-2.eu-west-1.elb.amazonaws.com"
	cdn := srv.CloudFront.Add(awstest.Distribution{ID: "E2CDN", Aliases: []string{name("static")}, IAMCertificateID: "ASCAEDGE"})
	e.lb["cdn"] = cdn[0]
	srv.APIGateway.Add(awstest.DomainName{Region: "eu-west-1", Name: name("api"), RegionalCertificateARN: e.arn["api"]})
	for _, x := range []struct {
		addr  string
		certs map[string]tls.Certificate
	}{
		{"127.0.0.52", map[string]tls.Certificate{"": lbOnly.FullChain(), name("portal"): portalLeaf.FullChain()}},
		{"127.0.0.53", map[string]tls.Certificate{"": portalLeaf.FullChain()}},
		{"127.0.0.54", map[string]tls.Certificate{"": edgeLeaf.FullChain()}},
	} {
		s, err := certtest.ServeSNI(net.JoinHostPort(x.addr, fmt.Sprint(port)), x.certs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
	}
	// The AWS resources' own names resolve through a DNS server of the
	// test's: the load balancers' and the distribution's.
	ns, err := dnstest.Start(
		dnstest.Zone{Name: "eu-west-1.elb.amazonaws.com", Text: "web-1 A 127.0.0.52\ndualstack.web-1 A 127.0.0.52\nold-2 A 127.0.0.54\n"},
		dnstest.Zone{Name: "static." + awsZone, Text: "@ A 127.0.0.54\n"}, // the distribution's alias, at another DNS provider
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	e.dns = ns.Addr()
	return e
}

// awsFakeRates lifts the per-region API rates (4 and 5 requests a second
// by default, below AWS's quotas) for the fakes, which have none: the
// estate's 14 ACM certificates would otherwise take 5 s of every scan.
const awsFakeRates = "aws:\n  acm_rate_limit: 500\n  route53_rate_limit: 500\n"

// writeConfig writes the configuration file e.args names: the fakes'
// rates, then extra.
func (e *awsEstate) writeConfig(t *testing.T, extra string) {
	t.Helper()
	if err := os.WriteFile(e.config, []byte(awsFakeRates+extra), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (e *awsEstate) args(cmd string, extra ...string) []string {
	args := []string{cmd, "--config", e.config, "--route53", "--acm", "--region", "eu-west-1", "--ports", fmt.Sprint(e.port)}
	if cmd == "scan" {
		args = append(args, "--resolver", e.dns, "--allow-loopback")
	}
	return append(args, extra...)
}

// TestScanAWS is the end-to-end scan of an AWS estate: the real CLI lists
// the Route 53 zones (public and private) and the ACM inventory through the
// real SDK against the wire-protocol fakes, probes every name on loopback,
// links each served certificate to its ACM certificate by serial, and
// reports every renewal-aware finding with what to do.
func TestScanAWS(t *testing.T) {
	e := startAWSEstate(t)
	stdout, stderr, code := run(t, e.args("scan", "--ca-file", e.caFile, "--timeout", "2s", "--output", "json")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d (findings at page); stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("decode JSON report: %v\n%s", err, stdout)
	}
	for _, s := range r.Sources {
		if s.Error != "" {
			t.Errorf("source %s failed: %s", s.Name, s.Error)
		}
	}

	// Every Route 53 name was probed, the private zone's included.
	probed := map[string]string{}
	for _, ep := range r.Endpoints {
		probed[strings.TrimSuffix(ep.Name, "."+awsZone)] = ep.Certificate
	}
	for _, short := range []string{"www", "api", "login", "legacy", "shop", "db.internal"} {
		if probed[short] == "" {
			t.Errorf("%s.%s: not probed or no certificate; endpoints %+v", short, awsZone, r.Endpoints)
		}
	}

	// The ACM section lists every certificate with its renewal state, and
	// the served ones with the endpoints serving them.
	states := map[string]policy.RenewalState{
		"www": policy.AutoRenews, "api": policy.RenewalStateOverdue, "login": policy.RenewalStateFailed,
		"legacy": policy.RenewalManual, "shop": policy.AutoRenews, "docs": policy.RenewalAtRisk,
		"pay": policy.RenewalStateFailed, "spare": policy.RenewalIneligible, "gone": policy.RenewalExpired,
		"blog": policy.RenewalManual, "fresh": policy.RenewalNotIssued, "idle": policy.RenewalIneligible,
		"lbonly": policy.RenewalManual, "portal": policy.RenewalManual,
	}
	// IAM server certificates: edge is used by the classic ELB and the
	// distribution and served by both; orphan by nothing.
	iamWants := []struct {
		name, contains string
		tier           policy.Tier
		endpoints      string
	}{
		{"edge-2025", "used by elb arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/old (old-2.eu-west-1.elb.amazonaws.com, port " + fmt.Sprint(e.port) + "), cloudfront " + e.lb["cdn"] + " (de2cdn.cloudfront.net, port 443)",
			policy.Warning, "old-2.eu-west-1.elb.amazonaws.com,static"},
		{"orphan", "not used by any listener certwatch sees", policy.Notice, ""},
	}
	for _, w := range iamWants {
		i := slices.IndexFunc(r.Findings, func(f policy.Finding) bool { return len(f.Refs().IAM) == 1 && f.Refs().IAM[0].ARN == e.iam[w.name] })
		if i < 0 {
			t.Errorf("no finding about IAM server certificate %s", w.name)
			continue
		}
		f := r.Findings[i]
		var eps []string
		for _, ep := range f.Endpoints {
			eps = append(eps, strings.TrimSuffix(ep.Name, "."+awsZone))
		}
		if f.Kind != policy.Expiring || f.Tier != w.tier || strings.Join(eps, ",") != w.endpoints || !strings.Contains(f.Message, w.contains) ||
			!strings.Contains(f.Message, "manual renewal required") || !strings.Contains(f.Message, "aws iam upload-server-certificate") {
			t.Errorf("IAM %s: %s %s on %v: %s\nwant expiring %s on %q, mentioning %q and the manual renewal", w.name, f.Tier, f.Kind, eps, f.Message, w.tier, w.endpoints, w.contains)
		}
		if w.name == "orphan" && (f.Certificate != e.pem["orphan"] || f.Name != e.iam["orphan"]) {
			t.Errorf("orphan's finding: certificate %q name %q, want the PEM's fingerprint and the ARN", f.Certificate, f.Name)
		}
	}
	if len(r.IAM) != 2 || r.IAM[0].Name != "edge-2025" || len(r.IAM[0].Consumers) != 2 || r.IAM[0].SHA256 != e.fp["edge"] {
		t.Errorf("IAM section = %+v, want edge-2025 (two consumers, linked) and orphan", r.IAM)
	}
	// Each certificate lists its consumers by ARN and DNS name, with the
	// names pointing at them.
	for short, want := range map[string]string{"portal": "elbv2 " + e.lb["web"] + " web-1.eu-west-1.elb.amazonaws.com [portal." + awsZone + "]",
		"api": "apigateway arn:aws:apigateway:eu-west-1::/domainnames/api." + awsZone + " d-0000000001.execute-api.eu-west-1.amazonaws.com [api." + awsZone + "]"} {
		i := slices.IndexFunc(r.ACM, func(c policy.ACMCertificate) bool { return c.ARN == e.arn[short] })
		var got []string
		for _, k := range r.ACM[i].Consumers {
			got = append(got, fmt.Sprintf("%s %s %s %v", k.Kind, k.ARN, k.DNSName, k.Names))
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s's consumers = %q, want %q", short, got, want)
		}
	}

	if len(r.ACM) != len(states) {
		t.Errorf("ACM section has %d certificates, want %d", len(r.ACM), len(states))
	}
	for short, want := range states {
		i := slices.IndexFunc(r.ACM, func(c policy.ACMCertificate) bool { return c.ARN == e.arn[short] })
		if i < 0 {
			t.Errorf("ACM section lacks %s (%s)", short, e.arn[short])
			continue
		}
		c := r.ACM[i]
		if c.Renewal != want {
			t.Errorf("%s: renewal = %q, want %q", short, c.Renewal, want)
		}
		if fp := e.fp[short]; short != "shop" && short != "portal" && short != "lbonly" && fp != "" && (c.SHA256 != fp || len(c.Endpoints) != 1 || c.Endpoints[0].Name != short+"."+awsZone) {
			t.Errorf("%s: linked to %q on %+v, want the served certificate %q on %s.%s", short, c.SHA256, c.Endpoints, fp, short, awsZone)
		}
	}

	type want struct {
		kind     policy.Kind
		tier     policy.Tier
		endpoint string // short name, "" for none
		acm      string // short name of the linked ACM certificate, "" for none
		contains []string
	}
	wants := []want{
		{policy.RenewalOverdue, policy.Warning, "api", "api", []string{"should have renewed", "PENDING_AUTO_RENEWAL", "in use by " + albARN}},
		{policy.RenewalFailed, policy.Warning, "login", "login", []string{
			"waits for domain validation of login." + awsZone,
			fmt.Sprintf("create this record in Route 53 zone %s (%s): name _3639ac514e785e898d2646601fa951d5.login.%s, type CNAME, value %s", awsZone, e.zoneID, awsZone, acmTarget)}},
		{policy.Expiring, policy.Warning, "legacy", "legacy", []string{"imported", "manual renewal required", "reimport", "--certificate-arn " + e.arn["legacy"],
			// The endpoint serves it outside ACM: a reimport never reaches it.
			fmt.Sprintf("ACM lists no resource using it, so legacy.%s:%d (127.0.0.44) serves a copy installed by hand: deploy the renewed certificate there", awsZone, e.port)}},
		{policy.StaleDeployment, policy.Page, "shop", "", []string{
			fmt.Sprintf("shop.%s:%d (127.0.0.45) still serves \"shop.%s\"", awsZone, e.port, awsZone), "expires in 5 days (", e.arn["shop"], "the rollout did not"}},
		// Stale with 60 days left: ACM holds the reimported certificate.
		{policy.StaleDeployment, policy.Warning, "blog", "", []string{
			fmt.Sprintf("blog.%s:%d (127.0.0.48) still serves \"blog.%s\"", awsZone, e.port, awsZone), "expires in 60 days (",
			"ACM holds a renewed certificate for the same names", e.arn["blog"], "install the same certificate"}},
		{policy.InconsistentDeployment, policy.Warning, "mix,mix", "", []string{"127.0.0.49 serves \"mix." + awsZone + "\"", "127.0.0.50 serves"}},
		{policy.ValidationRecordMissing, policy.Warning, "", "fresh", []string{"waits for DNS validation, but it will never be issued",
			fmt.Sprintf("Create this record in Route 53 zone %s (%s): name _3639ac514e785e898d2646601fa951d5.fresh.%s, type CNAME, value %s", awsZone, e.zoneID, awsZone, acmTarget)}},
		{policy.ValidationRecordMissing, policy.Notice, "", "idle", []string{"not in use, so not yet eligible", "The day it is used, its renewal will fail",
			fmt.Sprintf("Create this record in Route 53 zone %s (%s): name _3639ac514e785e898d2646601fa951d5.idle.%s, type CNAME, value %s", awsZone, e.zoneID, awsZone, acmTarget)}},
		{policy.ValidationRecordMissing, policy.Notice, "", "docs", []string{
			fmt.Sprintf("Change CNAME _3639ac514e785e898d2646601fa951d5.docs.%s in Route 53 zone %s (%s) from _0000.old.acm-validations.aws to %s", awsZone, awsZone, e.zoneID, acmTarget)}},
		{policy.RenewalFailed, policy.Page, "", "pay", []string{"its renewal failed (CAA_ERROR)", "CAA record allowing amazon.com",
			"expires in 6 days (" + time.Now().AddDate(0, 0, 6).UTC().Format(time.DateOnly) + ")"}},
		{policy.Expiring, policy.Notice, "", "spare", []string{"not in use, so ACM will not renew it"}},
		{policy.Expired, policy.Info, "", "gone", []string{"not in use", "delete it"}},
		// portal: imported, served through the ALB ACM lists (portal, an
		// alias to it) and directly (portal2), which a reimport misses.
		{policy.Expiring, policy.Warning, "portal,portal2", "portal", []string{"reimport it into the same ARN",
			fmt.Sprintf("Of the endpoints listed, portal2.%s:%d (127.0.0.53) serves it directly, not through the resources ACM lists: deploy the renewed certificate there too", awsZone, e.port)}},
		// lbonly is served only by an ALB no hosted zone points to: seen
		// on the wire under the ALB's DNS name.
		{policy.Expiring, policy.Notice, "web-1.eu-west-1.elb.amazonaws.com", "lbonly", []string{"imported"}},
		// In use by the ALB, and served by no endpoint probed: unverified.
		// (shop, docs and pay, in an order the fingerprints decide;
		// their names are checked below.)
		{policy.CoverageGap, policy.Warning, "", "", []string{"is in use by " + albARN, "no endpoint certwatch probed serves it"}},
		{policy.CoverageGap, policy.Warning, "", "", []string{"is in use by " + albARN, "no endpoint certwatch probed serves it"}},
		{policy.CoverageGap, policy.Warning, "", "", []string{"is in use by " + albARN, "no endpoint certwatch probed serves it"}},
		// The load balancers' certificates name example.net, which no
		// hosted zone holds.
		{policy.CoverageGap, policy.Notice, "old-2.eu-west-1.elb.amazonaws.com,static,web-1.eu-west-1.elb.amazonaws.com", "", []string{"zone example.net is watched by no source"}},
		// The IAM server certificates (checked in detail below).
		{policy.Expiring, policy.Warning, "old-2.eu-west-1.elb.amazonaws.com,static", "", []string{"IAM server certificate \"edge-2025\""}},
		{policy.Expiring, policy.Notice, "", "", []string{"IAM server certificate \"orphan\""}},
		// Served, imported or in IAM, past their expected renewal (30 days
		// before expiry) and its grace (13 days for 395) with no newer
		// certificate anywhere: renewal_missed beside their expiry;
		// lbonly (25 days left) is within the grace.
		{policy.RenewalMissed, policy.Warning, "legacy", "legacy", []string{"renewal overdue", "should have been renewed by"}},
		{policy.RenewalMissed, policy.Warning, "portal,portal2", "portal", []string{"renewal overdue"}},
		{policy.RenewalMissed, policy.Warning, "old-2.eu-west-1.elb.amazonaws.com,static", "", []string{"renewal overdue"}},
	}
	matched := make([]bool, len(r.Findings))
	for _, w := range wants {
		found := false
		for i, f := range r.Findings {
			if matched[i] || f.Kind != w.kind || f.Tier != w.tier {
				continue
			}
			var eps []string
			for _, ep := range f.Endpoints {
				eps = append(eps, strings.TrimSuffix(ep.Name, "."+awsZone))
			}
			var arns []string
			for _, ref := range f.Refs().ACM {
				arns = append(arns, ref.ARN)
			}
			if strings.Join(eps, ",") != w.endpoint || (w.acm != "" && strings.Join(arns, ",") != e.arn[w.acm]) || (w.acm == "" && len(arns) > 0) {
				continue
			}
			matched[i], found = true, true
			for _, s := range w.contains {
				if !strings.Contains(f.Message, s) {
					t.Errorf("%s on %q: message lacks %q:\n  %s", f.Kind, w.endpoint+w.acm, s, f.Message)
				}
			}
			break
		}
		if !found {
			t.Errorf("missing finding %s/%s on endpoint %q linked to ACM %q", w.kind, w.tier, w.endpoint, w.acm)
		}
	}
	for i, f := range r.Findings {
		if !matched[i] {
			t.Errorf("unexpected finding (false alarm?): %s %s %v: %s", f.Tier, f.Kind, f.Endpoints, f.Message)
		}
	}
	unverified := map[string]bool{}
	for _, f := range r.Findings {
		if f.Kind == policy.CoverageGap && f.Tier == policy.Warning {
			unverified[f.Name] = true
		}
	}
	for _, c := range []string{"shop", "docs", "pay"} {
		if !unverified[e.arn[c]] {
			t.Errorf("no coverage_gap for %s (%s), in use and served by no endpoint probed", c, e.arn[c])
		}
	}

	// deploy/iam-policy.json grants exactly the actions the scan called
	// (sts:AssumeRole aside, which only roles need).
	called := map[string]bool{}
	for _, req := range e.srv.Requests("") {
		action := req.Service + ":" + req.Operation
		switch req.Service {
		case "apigateway":
			action = "apigateway:" + req.Method
		case "":
			t.Errorf("unrecognised request %s %s", req.Method, req.Path)
		}
		called[action] = true
	}
	if diff := cmpSets(policyActions(t), called); diff != "" {
		t.Errorf("deploy/iam-policy.json vs the actions a scan calls: %s", diff)
	}

	// ACM-only findings name the certificate by the fingerprint of ACM's
	// PEM (where ACM gives one) and list no endpoint as [], not null.
	var raw struct {
		Findings []map[string]any `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range raw.Findings {
		if f["name"] == e.arn["pay"] {
			if f["certificate"] != e.pem["pay"] {
				t.Errorf("pay's finding: certificate = %v, want the fingerprint of ACM's PEM %s", f["certificate"], e.pem["pay"])
			}
		}
		if eps, ok := f["endpoints"].([]any); !ok {
			t.Errorf("finding %v %v: endpoints = %#v, want a list", f["kind"], f["name"], f["endpoints"])
		} else if f["name"] == e.arn["fresh"] && len(eps) != 0 {
			t.Errorf("fresh's finding lists endpoints %v", eps)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", stdout)
	}
}

// policyActions returns the actions deploy/iam-policy.json allows, but
// sts:AssumeRole.
func policyActions(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../deploy/iam-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Statement []struct {
			Action json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, st := range doc.Statement {
		var list []string
		if err := json.Unmarshal(st.Action, &list); err != nil {
			var one string
			if err := json.Unmarshal(st.Action, &one); err != nil {
				t.Fatal(err)
			}
			list = []string{one}
		}
		for _, a := range list {
			if a != "sts:AssumeRole" {
				out[a] = true
			}
		}
	}
	return out
}

// cmpSets says what is only in the policy (granted, never called) and
// only in the calls (called, not granted).
func cmpSets(granted, called map[string]bool) string {
	var d []string
	for a := range granted {
		if !called[a] {
			d = append(d, "granted, never called: "+a)
		}
	}
	for a := range called {
		if !granted[a] {
			d = append(d, "called, not granted: "+a)
		}
	}
	slices.Sort(d)
	return strings.Join(d, "; ")
}

func TestScanAWSTable(t *testing.T) {
	e := startAWSEstate(t)
	stdout, stderr, code := run(t, e.args("scan", "--ca-file", e.caFile, "--timeout", "2s")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want %d; stderr:\n%s", code, cli.ExitFindings, stderr)
	}
	for _, want := range []string{
		"stale_deployment", "renewal_overdue",
		"ACM: " + e.arn["api"] + " (AMAZON_ISSUED, overdue, in use by 1 resource(s))",
		"ACM certificates (14):", "RENEWAL", "auto-renews (pending_auto_renewal)", "manual", "www." + awsZone + ":" + fmt.Sprint(e.port),
		"validation_record_missing", "127.0.0.49 serves \"mix." + awsZone, "blog." + awsZone + ":" + fmt.Sprint(e.port) + " (127.0.0.48) still serves",
		" 6d ", // pay: six days left, as its deadline date says
		"IAM server certificates (2), renewed by hand:", "edge-2025", "IAM: " + e.iam["edge-2025"] + " (server certificate edge-2025, renewed by hand)",
		e.arn["portal"] + " is served by:", "elbv2 " + e.lb["web"] + " (web-1.eu-west-1.elb.amazonaws.com, port " + fmt.Sprint(e.port) + ", reached as portal." + awsZone + ")",
		"cloudfront " + e.lb["cdn"] + " (de2cdn.cloudfront.net, port 443, reached as static." + awsZone + ")",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestInventoryAWS(t *testing.T) {
	e := startAWSEstate(t)
	stdout, stderr, code := run(t, e.args("inventory")...)
	if code != 0 {
		t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("www.%s:%d", awsZone, e.port), fmt.Sprintf("db.internal.%s:%d", awsZone, e.port), "route53",
		"ACM certificates (14):", "auto-renews", "failed (pending_validation)", "expired", e.arn["pay"],
		"Source acm: 0 target(s), 14 certificate(s)",
		// IAM server certificates, and the resources using each certificate.
		"IAM server certificates (2), renewed by hand:", "Source iam: 0 target(s), 2 certificate(s)",
		"edge-2025  static." + awsZone + "  2 resource(s)  " + e.iam["edge-2025"], "orphan     orphan.example.net   -              " + e.iam["orphan"],
		e.iam["edge-2025"] + " is served by:\n    elb arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/old (old-2.eu-west-1.elb.amazonaws.com, port " + fmt.Sprint(e.port) + ")\n" +
			"    cloudfront " + e.lb["cdn"] + " (de2cdn.cloudfront.net, port 443, reached as static." + awsZone + ")\n",
		e.arn["portal"] + " is served by:\n    elbv2 " + e.lb["web"] + " (web-1.eu-west-1.elb.amazonaws.com, port " + fmt.Sprint(e.port) + ", reached as portal." + awsZone + ")\n",
		e.arn["api"] + " is served by:\n    apigateway arn:aws:apigateway:eu-west-1::/domainnames/api." + awsZone + " (d-0000000001.execute-api.eu-west-1.amazonaws.com, port 443, reached as api." + awsZone + ")\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inventory lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "SERVED BY") {
		t.Errorf("inventory probes nothing, yet shows a SERVED BY column:\n%s", stdout)
	}

	stdout, stderr, code = run(t, e.args("inventory", "--output", "json")...)
	if code != 0 {
		t.Fatalf("json: exit code = %d; stderr:\n%s", code, stderr)
	}
	var inv struct {
		ACM []policy.ACMCertificate `json:"acm"`
		IAM []policy.IAMCertificate `json:"iam"`
	}
	if err := json.Unmarshal([]byte(stdout), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.ACM) != 14 || !slices.ContainsFunc(inv.ACM, func(c policy.ACMCertificate) bool {
		return c.ARN == e.arn["login"] && c.Renewal == policy.RenewalStateFailed && c.RenewalStatus == "PENDING_VALIDATION"
	}) {
		t.Errorf("inventory JSON acm = %+v, want 14 certificates with login's failed renewal", inv.ACM)
	}
	consumers := func(cs []policy.ConsumerRef) string {
		var out []string
		for _, k := range cs {
			out = append(out, fmt.Sprintf("%s %s %s %v %v", k.Kind, k.ARN, k.DNSName, k.Ports, k.Names))
		}
		return strings.Join(out, "; ")
	}
	var iams []string
	for _, c := range inv.IAM {
		iams = append(iams, fmt.Sprintf("%s %s %s [%s]", c.Name, c.ARN, c.NotAfter.UTC().Format(time.DateOnly), consumers(c.Consumers)))
	}
	if len(inv.IAM) != 2 {
		t.Errorf("inventory JSON iam = %+v, want edge-2025 and orphan", inv.IAM)
	} else if got, want := strings.Join(iams, "\n"), fmt.Sprintf("edge-2025 %s %s [elb arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/old old-2.eu-west-1.elb.amazonaws.com [%d] []; cloudfront %s de2cdn.cloudfront.net [443] [static.%s]]\norphan %s %s []",
		e.iam["edge-2025"], inv.IAM[0].NotAfter.UTC().Format(time.DateOnly), e.port, e.lb["cdn"], awsZone, e.iam["orphan"], inv.IAM[1].NotAfter.UTC().Format(time.DateOnly)); got != want {
		t.Errorf("inventory JSON iam =\n%s\nwant\n%s", got, want)
	}
	for short, want := range map[string]string{
		"portal": fmt.Sprintf("elbv2 %s web-1.eu-west-1.elb.amazonaws.com [%d] [portal.%s]", e.lb["web"], e.port, awsZone),
		"api":    fmt.Sprintf("apigateway arn:aws:apigateway:eu-west-1::/domainnames/api.%s d-0000000001.execute-api.eu-west-1.amazonaws.com [443] [api.%s]", awsZone, awsZone),
	} {
		i := slices.IndexFunc(inv.ACM, func(c policy.ACMCertificate) bool { return c.ARN == e.arn[short] })
		if i < 0 || consumers(inv.ACM[i].Consumers) != want {
			t.Errorf("inventory JSON: %s's consumers, want %q; acm %+v", short, want, inv.ACM)
		}
	}
}

// TestScanAWSRegionDenied denies one region: it is reported as a partial
// failure naming the region and the permission, and the rest of the scan
// goes on.
func TestScanAWSRegionDenied(t *testing.T) {
	e := startAWSEstate(t)
	e.srv.ACM.DenyRegion("eu-central-1")
	stdout, stderr, code := run(t, e.args("scan", "--region", "eu-central-1", "--ca-file", e.caFile, "--timeout", "2s", "--output", "json")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want 1; stderr:\n%s", code, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.ACM) != 14 {
		t.Errorf("ACM section has %d certificates, want eu-west-1's 14", len(r.ACM))
	}
	i := slices.IndexFunc(r.Findings, func(f policy.Finding) bool { return f.Kind == policy.DiscoveryFailed })
	if i < 0 {
		t.Fatalf("no discovery_failed finding: %+v", r.Findings)
	}
	for _, want := range []string{"eu-central-1", "acm:ListCertificates"} {
		if !strings.Contains(r.Findings[i].Message, want) {
			t.Errorf("discovery_failed message lacks %q: %s", want, r.Findings[i].Message)
		}
	}
}

// TestScanAWSServiceDenied denies API Gateway: it fails alone, as a
// discovery_failed finding naming the action to grant, and the load
// balancers, distributions and certificates are still inventoried.
func TestScanAWSServiceDenied(t *testing.T) {
	e := startAWSEstate(t)
	e.srv.APIGateway.DenyRegion("eu-west-1")
	stdout, stderr, code := run(t, e.args("scan", "--ca-file", e.caFile, "--timeout", "2s", "--output", "json")...)
	if code != cli.ExitFindings {
		t.Fatalf("exit code = %d, want 1; stderr:\n%s", code, stderr)
	}
	var r scan.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(r.Findings, func(f policy.Finding) bool { return f.Kind == policy.DiscoveryFailed })
	if i < 0 {
		t.Fatalf("no discovery_failed finding: %+v", r.Findings)
	}
	for _, want := range []string{"apigateway", "eu-west-1", "grant apigateway:GET"} {
		if !strings.Contains(r.Findings[i].Message, want) {
			t.Errorf("discovery_failed message lacks %q: %s", want, r.Findings[i].Message)
		}
	}
	if len(r.ACM) != 14 || len(r.IAM) != 2 || len(r.IAM[0].Consumers) != 2 {
		t.Errorf("ACM %d, IAM %+v: want every certificate and edge-2025's two consumers despite API Gateway failing", len(r.ACM), r.IAM)
	}
}

// TestScanAWSZoneResolver resolves the private zone's names through its own
// resolver (aws.route53_resolvers): cache.internal.corp.example, a CNAME to
// a name only the VPC resolver answers, is probed and its expiry found;
// without the setting it is an endpoint that could not be resolved.
func TestScanAWSZoneResolver(t *testing.T) {
	e := startAWSEstate(t)
	for _, withResolver := range []bool{true, false} {
		if withResolver {
			e.writeConfig(t, "  route53_resolvers:\n    \"internal.*\": \""+e.vpcDNS+"\"\n")
		} else {
			e.writeConfig(t, "")
		}
		stdout, stderr, code := run(t, e.args("scan", "--ca-file", e.caFile, "--timeout", "2s", "--output", "json")...)
		if code != cli.ExitFindings {
			t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
		}
		var r scan.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(r.Endpoints, func(ep scan.Endpoint) bool { return ep.Name == "cache.internal."+awsZone })
		if i < 0 {
			t.Fatalf("cache.internal.%s not in the endpoints", awsZone)
		}
		ep := r.Endpoints[i]
		found := slices.ContainsFunc(r.Findings, func(f policy.Finding) bool {
			return f.Kind == policy.Expiring && len(f.Endpoints) == 1 && f.Endpoints[0].Name == ep.Name
		})
		if withResolver && (ep.Address != "127.0.0.55" || ep.Certificate == "" || !found) {
			t.Errorf("with the zone's resolver: endpoint %+v, expiry finding %v; want 127.0.0.55 probed and its expiry found", ep, found)
		}
		if !withResolver && (ep.Certificate != "" || !strings.Contains(ep.Fault().Error, "resolve cache-1.vpc-0abc.example")) {
			t.Errorf("without it: endpoint %+v, want a resolve error", ep)
		}
	}
}

func TestAWSUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"region without acm", []string{"scan", "--region", "eu-west-1", "--target", "a.example"}, "give --route53 or --acm"},
		{"acm without region", []string{"scan", "--acm"}, "at least one region is required"},
		{"bad region", []string{"scan", "--acm", "--region", "Ireland"}, `invalid region "Ireland"`},
		{"bad role", []string{"scan", "--route53", "--role-arn", "arn:aws:iam::1:user/me"}, "invalid role arn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := run(t, tt.args...)
			if code != cli.ExitUsage {
				t.Errorf("exit code = %d, want 2", code)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr = %q, want it to mention %q", stderr, tt.want)
			}
		})
	}
}

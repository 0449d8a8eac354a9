package policy_test

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// goldenFixture mints the certificates of one evaluation and remembers a
// label for each, so that the golden output names them by label: keys,
// serials and signatures are random, and so are fingerprints.
type goldenFixture struct {
	t     *testing.T
	now   time.Time
	root  *certtest.CA
	inter *certtest.CA
	// labels are each minted leaf's, in minting order.
	labels []string
	leaves []*x509.Certificate
	obs    []probes.Observation
}

func newGoldenFixture(t *testing.T, now time.Time) *goldenFixture {
	root := certtest.MustCA("Golden Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	return &goldenFixture{t: t, now: now, root: root, inter: root.MustIntermediate("Golden Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))}
}

func (g *goldenFixture) day(n int) time.Time { return g.now.Add(time.Duration(n) * day) }

// leaf mints a leaf issued by the intermediate, valid from notBefore days
// (negative: ago) to notAfter days from now, for names (or IP addresses).
func (g *goldenFixture) leaf(label string, notBefore, notAfter int, names ...string) *x509.Certificate {
	o := certtest.LeafOptions{NotBefore: g.day(notBefore), NotAfter: g.day(notAfter)}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			o.IPs = append(o.IPs, ip)
		} else {
			o.DNSNames = append(o.DNSNames, n)
		}
	}
	l := g.inter.MustLeaf(o)
	g.labels, g.leaves = append(g.labels, label), append(g.leaves, l.Cert)
	return l.Cert
}

// selfSigned mints a self-signed leaf.
func (g *goldenFixture) selfSigned(label string, notAfter int, names ...string) *x509.Certificate {
	l := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: names, NotBefore: g.day(-1), NotAfter: g.day(notAfter)})
	g.labels, g.leaves = append(g.labels, label), append(g.leaves, l.Cert)
	return l.Cert
}

// serve observes c (with the intermediate, unless self-signed) on name at
// addr.
func (g *goldenFixture) serve(name, addr string, c *x509.Certificate) {
	chain := []*x509.Certificate{c}
	if c.Issuer.CommonName == g.inter.Cert.Subject.CommonName {
		chain = append(chain, g.inter.Cert)
	}
	g.obs = append(g.obs, observe(name, addr, chain, g.root.Pool(), g.now))
}

// Every leaf of a fixture has a NotAfter of its own, and at most one
// finding of a kind is about a fingerprint at one tier and deadline: the
// evaluator breaks ties by fingerprint, which is random.

// golden renders r as indented JSON, every minted certificate's
// fingerprint, short fingerprint and serial replaced by its label.
func (g *goldenFixture) golden(r policy.Result) []byte {
	g.t.Helper()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		g.t.Fatal(err)
	}
	var pairs []string
	for i, c := range g.leaves {
		fp := probes.Fingerprint(c)
		pairs = append(pairs, fp, "<sha256 "+g.labels[i]+">")
	}
	for i, c := range g.leaves {
		fp := probes.Fingerprint(c)
		pairs = append(pairs, fp[:12], "<sha256/12 "+g.labels[i]+">", c.SerialNumber.Text(16), "<serial "+g.labels[i]+">")
	}
	return []byte(strings.NewReplacer(pairs...).Replace(string(b)) + "\n")
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./policy -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var a, b string
			if i < len(gl) {
				a = gl[i]
			}
			if i < len(wl) {
				b = wl[i]
			}
			if a != b {
				t.Fatalf("%s differs from the evaluator's output at line %d:\n got: %s\nwant: %s\n(run with -update if the change is meant)", path, i+1, a, b)
			}
		}
	}
}

// TestEvaluatorGolden is the evaluator's whole output (endpoints, findings,
// certificates, ACM and IAM sections) for inventories that take every
// path of the renewal judgement: ACM certificates served and not, renewing
// in time, overdue, failed, waiting for validation, imported into two
// regions, linked by fingerprint and by serial; endpoints still serving a
// certificate that ACM or another endpoint has renewed; candidates that
// are no renewal (untrusted, expiring themselves, lacking a name); an
// inconsistent deployment that is a stale one; IAM server certificates and
// the load balancers using them. The output must not change unless a
// judgement is meant to.
func TestEvaluatorGolden(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		acct  = "111111111111"
		lb    = "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/1"
		lbDNS = "web-1.eu-west-1.elb.amazonaws.com"
		value = "_98d4ae8d.mhbtsbpdnt.acm-validations.aws"
	)
	arn := func(id string) string { return "arn:aws:acm:eu-west-1:" + acct + ":certificate/" + id }
	acm := func(name string, notAfter time.Time, mod ...func(*acmcert.Certificate)) acmcert.Certificate {
		c := acmcert.Certificate{
			ARN: arn(name), Region: "eu-west-1", Account: acct,
			DomainName: name, SubjectAlternativeNames: []string{name},
			Serial:    strings.ReplaceAll(name, ".", ""),
			NotBefore: notAfter.Add(-395 * day), NotAfter: notAfter,
			Type: acmcert.AmazonIssued, Status: acmcert.StatusIssued,
			InUse: true, InUseBy: []string{lb},
			RenewalEligibility: acmcert.Eligible,
		}
		for _, m := range mod {
			m(&c)
		}
		return c
	}
	linked := func(l *x509.Certificate) func(*acmcert.Certificate) {
		return func(c *acmcert.Certificate) {
			c.Serial = l.SerialNumber.Text(16)
			c.NotBefore, c.NotAfter = l.NotBefore, l.NotAfter
		}
	}
	byFingerprint := func(l *x509.Certificate) func(*acmcert.Certificate) {
		return func(c *acmcert.Certificate) {
			c.Fingerprint, c.Serial = probes.Fingerprint(l), ""
			c.NotBefore, c.NotAfter = l.NotBefore, l.NotAfter
		}
	}
	status := func(s acmcert.RenewalStatus, reason string) func(*acmcert.Certificate) {
		return func(c *acmcert.Certificate) { c.RenewalStatus, c.RenewalStatusReason = s, reason }
	}
	unused := func(c *acmcert.Certificate) {
		c.InUse, c.InUseBy, c.RenewalEligibility = false, nil, acmcert.Ineligible
	}
	imported := func(c *acmcert.Certificate) { c.Type, c.RenewalEligibility = acmcert.Imported, acmcert.Ineligible }
	sans := func(names ...string) func(*acmcert.Certificate) {
		return func(c *acmcert.Certificate) { c.SubjectAlternativeNames = names }
	}
	dnsValidated := func(pending bool) func(*acmcert.Certificate) {
		return func(c *acmcert.Certificate) {
			rec := &acmcert.Record{Name: "_3639ac51." + c.DomainName, Type: "CNAME", Value: value}
			c.Validations = []acmcert.Validation{{DomainName: c.DomainName, Status: acmcert.ValidationSuccess, Method: "DNS", Record: rec}}
			if c.RenewalStatus != "" {
				st := acmcert.ValidationSuccess
				if pending {
					st = acmcert.ValidationPending
				}
				c.RenewalValidations = []acmcert.Validation{{DomainName: c.DomainName, Status: st, Method: "DNS", Record: rec}}
			}
		}
	}

	t.Run("inventory", func(t *testing.T) {
		g := newGoldenFixture(t, now)
		var certs []acmcert.Certificate

		// a: served; ACM renews it in time: the endpoint's expiry is
		// not announced.
		a := g.leaf("a", -300, 25, "www.a.example")
		g.serve("www.a.example", "10.0.1.1", a)
		certs = append(certs, acm("www.a.example", g.day(25), linked(a), status(acmcert.RenewalPendingAutoRenewal, "")))

		// b: served on two addresses, one behind the load balancer; ACM
		// has not renewed it inside the margin: one overdue finding with
		// the endpoints' expiry merged in.
		b := g.leaf("b", -300, 15, "api.b.example")
		g.serve("api.b.example", "10.0.2.1", b)
		g.serve("api.b.example", "10.0.2.2", b)
		certs = append(certs, acm("api.b.example", g.day(15), linked(b), status(acmcert.RenewalPendingAutoRenewal, "")))

		// c: served, imported and unused in ACM: expiry with its ARN.
		c := g.leaf("c", -300, 10, "legacy.c.example")
		g.serve("legacy.c.example", "10.0.3.1", c)
		certs = append(certs, acm("legacy.c.example", g.day(10), linked(c), imported, func(c *acmcert.Certificate) { c.InUse, c.InUseBy = false, nil }))

		// d: served under the wrong name, linked by ACM's fingerprint: the
		// mismatch carries the ACM link; the renewal is fine.
		d := g.leaf("d", -300, 200, "right.d.example")
		g.serve("wrong.d.example", "10.0.4.1", d)
		certs = append(certs, acm("right.d.example", g.day(200), byFingerprint(d)))

		// e: unserved, renewal failed; ACM gives its PEM's fingerprint.
		certs = append(certs, acm("caa.e.example", g.day(50), status(acmcert.RenewalFailed, "CAA_ERROR"), func(c *acmcert.Certificate) {
			c.Fingerprint = strings.Repeat("e0", 32)
		}))

		// f: one imported certificate in two regions, used in the second
		// only: one finding, at the tier of the copy in use.
		certs = append(certs, acm("legacy.f.example", g.day(11), imported, unused), acm("legacy.f.example", g.day(11), imported, func(c *acmcert.Certificate) {
			c.Region, c.ARN = "us-east-1", "arn:aws:acm:us-east-1:"+acct+":certificate/legacy.f.example"
		}))

		// g: requested two days ago, validation record missing from the
		// zone certwatch sees: a deadline when ACM gives up.
		certs = append(certs, acm("new.g.example", time.Time{}, dnsValidated(false), func(c *acmcert.Certificate) {
			c.Status, c.NotBefore, c.InUse, c.InUseBy, c.RenewalEligibility, c.CreatedAt = acmcert.StatusPendingValidation, time.Time{}, false, nil, acmcert.Ineligible, now.Add(-2*day)
		}))

		// h: renewal healthy, but the validation CNAME points elsewhere.
		certs = append(certs, acm("login.h.example", g.day(90), status(acmcert.RenewalPendingAutoRenewal, ""), dnsValidated(false)))

		// i: the endpoint still serves the certificate ACM renewed.
		i := g.leaf("i", -300, 5, "shop.i.example")
		g.serve("shop.i.example", "10.0.9.1", i)
		certs = append(certs, acm("shop.i.example", g.day(300), status(acmcert.RenewalSuccess, ""), sans("shop.i.example", "www.i.example"),
			func(c *acmcert.Certificate) { c.NotBefore = g.day(-10) }))

		// j: another endpoint serves the renewal.
		j := g.leaf("j-old", -300, 6, "shop.j.example")
		g.serve("shop.j.example", "10.0.10.1", j)
		g.serve("www.j.example", "10.0.10.2", g.leaf("j-new", -10, 301, "shop.j.example", "www.j.example"))

		// k: a wildcard on another endpoint covers the old name.
		g.serve("shop.k.example", "10.0.11.1", g.leaf("k-old", -300, 4, "shop.k.example"))
		g.serve("cdn.k.example", "10.0.11.2", g.leaf("k-wild", -10, 201, "*.k.example"))

		// l: the newer certificate is self-signed: no replacement.
		g.serve("shop.l.example", "10.0.12.1", g.leaf("l-old", -300, 3, "shop.l.example"))
		g.serve("test.l.example", "10.0.12.2", g.selfSigned("l-self", 400, "shop.l.example", "test.l.example"))

		// m: an imported ACM certificate in use while a newer one sits
		// unused in ACM.
		certs = append(certs, acm("legacy.m.example", g.day(12), imported), acm("legacy.m.example", g.day(400), imported, unused, func(c *acmcert.Certificate) {
			c.ARN, c.Serial, c.NotBefore = arn("legacy-2031.m.example"), "0a0b", g.day(-1)
		}))

		// n: one address still serves the certificate ACM renewed, 100
		// days before it expires: stale, and not inconsistent too.
		nNew := g.leaf("n-new", -10, 302, "shop.n.example", "www.n.example")
		g.serve("shop.n.example", "10.0.14.1", g.leaf("n-old", -300, 100, "shop.n.example"))
		g.serve("shop.n.example", "10.0.14.2", nNew)
		certs = append(certs, acm("shop.n.example", g.day(302), linked(nNew), sans("shop.n.example", "www.n.example"), func(c *acmcert.Certificate) { c.Type = acmcert.Private }))

		// u: expired, and another endpoint serves its renewal.
		g.serve("shop.u.example", "10.0.21.1", g.leaf("u-old", -300, -2, "shop.u.example"))
		g.serve("www.u.example", "10.0.21.2", g.leaf("u-new", -5, 304, "shop.u.example", "www.u.example"))

		// o, p: unused in ACM, expiring and expired.
		certs = append(certs, acm("spare.o.example", g.day(1), unused))
		certs = append(certs, acm("gone.p.example", g.day(-3), unused, func(c *acmcert.Certificate) { c.Status = acmcert.StatusExpired }))

		// s: expired, and the would-be replacement expires soon itself.
		g.serve("shop.s.example", "10.0.19.1", g.leaf("s-old", -300, -3, "shop.s.example"))
		g.serve("cdn.s.example", "10.0.19.2", g.leaf("s-wild", -10, 13, "*.s.example"))

		// t: a newer certificate lacking one of the names.
		g.serve("shop.t.example", "10.0.20.1", g.leaf("t-old", -300, 7, "shop.t.example", "www.t.example"))
		g.serve("api.t.example", "10.0.20.2", g.leaf("t-other", -10, 303, "shop.t.example", "api.t.example"))

		// q: IAM server certificates, one served and used by a load
		// balancer, one unused, one expired.
		q := g.leaf("q", -365, 8, "old.q.example")
		g.serve("old.q.example", "10.0.17.1", q)
		iam := func(name string, notAfter time.Time) iamcert.Certificate {
			return iamcert.Certificate{ARN: "arn:aws:iam::" + acct + ":server-certificate/" + name, ID: "ASCA" + strings.ToUpper(name), Name: name,
				Account: acct, NotBefore: notAfter.AddDate(-1, 0, 0), NotAfter: notAfter, Serial: name}
		}
		used := iam("used", q.NotAfter)
		used.Serial, used.Fingerprint = q.SerialNumber.Text(16), probes.Fingerprint(q)

		rules := policy.DefaultRules()
		rules.RenewalMargin = 20 * day
		ev := policy.NewEvaluator(rules, now)
		for i := range g.obs {
			ev.Add(&g.obs[i])
		}
		ev.AddACM(certs...)
		ev.SetZones([]hostedzone.Zone{
			zone("g.example", "Z7PUBLIC"),
			zone("h.example", "Z8PUBLIC", hostedzone.Record{Name: "_3639ac51.login.h.example", Type: "CNAME", Value: "_old.acm-validations.aws"}),
			{ID: "Z2PUBLIC", Name: "b.example", AWSTargets: []hostedzone.Record{{Name: "api.b.example", Type: "ALIAS", Value: "dualstack." + lbDNS}}},
		})
		ev.AddIAM(used, iam("unused", g.day(9)), iam("gone", g.day(-4)))
		ev.AddConsumers(
			certconsumer.Consumer{ARN: lb, Kind: certconsumer.KindELBv2, Name: "web", DNSName: lbDNS,
				Listeners: []certconsumer.Listener{{Port: 443, Protocol: "HTTPS", Certificates: []string{arn("api.b.example")}}}},
			certconsumer.Consumer{ARN: "arn:aws:elasticloadbalancing:eu-west-1:" + acct + ":loadbalancer/old", Kind: certconsumer.KindELB,
				Name: "old", DNSName: "old-1.eu-west-1.elb.amazonaws.com", Listeners: []certconsumer.Listener{{Port: 443, Protocol: "HTTPS", Certificates: []string{used.ARN}}}},
		)
		res := ev.Result()
		kinds := map[policy.Kind]bool{}
		for _, f := range res.Findings {
			kinds[f.Kind] = true
		}
		for _, k := range []policy.Kind{policy.RenewalOverdue, policy.RenewalFailed, policy.ValidationRecordMissing, policy.StaleDeployment,
			policy.Expiring, policy.Expired, policy.HostnameMismatch, policy.SelfSigned} {
			if !kinds[k] {
				t.Errorf("the fixture yields no %s finding; it is meant to cover every renewal judgement", k)
			}
		}
		if slices.ContainsFunc(res.Findings, func(f policy.Finding) bool { return f.Kind == policy.InconsistentDeployment }) {
			t.Errorf("an inconsistent_deployment is left beside the stale deployment it is")
		}
		// Policy's verdict on a served certificate (RenewedBy) and its
		// stale_deployment finding go together.
		stale := map[string]bool{}
		for _, f := range res.Findings {
			if f.Kind == policy.StaleDeployment {
				stale[f.Certificate] = true
			}
		}
		renewed := 0
		for _, c := range res.Certificates {
			if (c.RenewedBy != nil) != stale[c.SHA256] {
				t.Errorf("certificate %q (%s): RenewedBy = %+v, but a stale_deployment finding about it: %v", c.Subject, c.SHA256, c.RenewedBy, stale[c.SHA256])
			}
			if c.RenewedBy != nil {
				renewed++
			}
		}
		if renewed == 0 {
			t.Error("the fixture renews no served certificate")
		}
		checkGolden(t, "evaluate-inventory.json", g.golden(res))
	})

	t.Run("at rest", func(t *testing.T) {
		// Certificates held at rest, merged with the served ones by
		// fingerprint and judged as they are.
		g := newGoldenFixture(t, now)
		set := atrest.Set{Roots: g.root.Pool(), Now: now}
		// The intermediate is at rest too: name it in the output.
		g.labels, g.leaves = append(g.labels, "golden-issuing"), append(g.leaves, g.inter.Cert)
		file := func(path string) atrest.Location { return atrest.Location{Kind: atrest.File, Where: path} }
		secret := func(where, key string) atrest.Location {
			return atrest.Location{Kind: atrest.Secret, Where: where, Key: key}
		}

		// v: the endpoint serves a certificate expiring in 3 days; a
		// file holds its renewal: stale, naming the file.
		g.serve("shop.v.example", "10.0.22.1", g.leaf("v-old", -300, 3, "shop.v.example"))
		set.Add(file("/etc/ssl/v.pem"), g.leaf("v-new", -2, 305, "shop.v.example"), g.inter.Cert)

		// w: the endpoint serves a certificate with 200 days left; a
		// Secret holds its renewal: stale whatever the time left.
		g.serve("api.w.example", "10.0.23.1", g.leaf("w-old", -100, 200, "api.w.example"))
		set.Add(secret("payments/w-tls", "tls.crt"), g.leaf("w-new", -1, 306, "api.w.example"), g.inter.Cert)

		// x: served and held in a file and a Secret: its expiry finding
		// lists both endpoints and both locations.
		x := g.leaf("x", -300, 9, "x.example")
		g.serve("x.example", "10.0.24.1", x)
		g.serve("x.example", "10.0.24.2", x)
		set.Add(file("/etc/ssl/x.pem"), x)
		set.Add(secret("web/x-tls", "tls.crt"), x, g.inter.Cert)

		// y: held at rest only, expiring: a finding with its locations
		// and no endpoint.
		set.Add(file("/etc/ssl/client/y.pem"), g.leaf("y", -300, 11, "client.y.example"))

		// z: a private root held at rest, expiring, with a leaf it
		// issued beside it: the root's expiry names the leaf.
		zRoot := certtest.MustCA("Z Private Root", g.day(-3000), g.day(20))
		zLeaf := zRoot.MustLeaf(certtest.LeafOptions{DNSNames: []string{"mtls.z.example"}, NotBefore: g.day(-10), NotAfter: g.day(80)})
		g.labels, g.leaves = append(g.labels, "z-root", "z-leaf"), append(g.leaves, zRoot.Cert, zLeaf.Cert)
		set.Add(atrest.Location{Kind: atrest.ConfigMap, Where: "kube-system/z-root", Key: "ca.crt"}, zRoot.Cert)
		set.Add(secret("mtls/z-client", "tls.crt"), zLeaf.Cert)

		// r: a weak key held at rest.
		weak := g.inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"legacy.r.example"}, NotBefore: g.day(-10), NotAfter: g.day(200), RSABits: 1024})
		g.labels, g.leaves = append(g.labels, "r-weak"), append(g.leaves, weak.Cert)
		set.Add(atrest.Location{Kind: atrest.Keystore, Where: "/opt/r/keystore.jks", Key: "server"}, weak.Cert, g.inter.Cert)

		// s: a newer certificate at rest that does not verify (issued
		// by a CA no one trusts): no renewal of what is served.
		g.serve("shop.s.example", "10.0.25.1", g.leaf("s-old", -300, 4, "shop.s.example"))
		stranger := certtest.MustCA("Stranger", g.day(-10), g.day(1000)).MustLeaf(certtest.LeafOptions{DNSNames: []string{"shop.s.example"}, NotBefore: g.day(-1), NotAfter: g.day(400)})
		g.labels, g.leaves = append(g.labels, "s-stranger"), append(g.leaves, stranger.Cert)
		set.Add(file("/tmp/s.pem"), stranger.Cert)

		// t2: a wildcard held at rest covers a host that serves its own
		// certificate: no renewal of it (not the same names).
		t2 := g.leaf("t2-host", -100, 150, "www.t2.example")
		g.serve("www.t2.example", "10.0.26.1", t2)
		set.Add(file("/etc/ssl/t2-wild.pem"), g.leaf("t2-wild", -1, 307, "*.t2.example"), g.inter.Cert)

		ev := policy.NewEvaluator(policy.DefaultRules(), now)
		for i := range g.obs {
			ev.Add(&g.obs[i])
		}
		certs := set.Certificates()
		// Two sources may hold one certificate: the second copy merges.
		ev.AddAtRest(certs...)
		ev.AddAtRest(atrest.Certificate{SHA256: probes.Fingerprint(x), Locations: []atrest.Location{{Kind: atrest.File, Where: "/backup/x.pem"}}})
		res := ev.Result()
		byCert := map[string][]policy.Finding{}
		for _, f := range res.Findings {
			byCert[f.Certificate] = append(byCert[f.Certificate], f)
		}
		stale := byCert[probes.Fingerprint(g.leaves[slices.Index(g.labels, "v-old")])]
		if len(stale) != 1 || stale[0].Kind != policy.StaleDeployment || !strings.HasPrefix(stale[0].Message, "renewed in file /etc/ssl/v.pem on 2029-12-30") ||
			!strings.Contains(stale[0].Message, "shop.v.example:443 (10.0.22.1) still serves the old one") || !strings.Contains(stale[0].Message, "expires in 3 days") {
			t.Errorf("findings of v-old = %+v, want one stale_deployment naming the file", stale)
		}
		// Its expiry and its renewal_missed (past its expected renewal, no
		// newer one anywhere), each with every endpoint and location.
		if xs := byCert[probes.Fingerprint(x)]; len(xs) != 2 || slices.ContainsFunc(xs, func(f policy.Finding) bool { return len(f.Endpoints) != 2 || len(f.Refs().Locations) != 3 }) {
			t.Errorf("findings of x = %+v, want two with 2 endpoints and 3 locations", xs)
		}
		if fs := byCert[probes.Fingerprint(t2)]; len(fs) != 0 {
			t.Errorf("findings of t2-host = %+v, want none: a wildcard at rest renews no host of its own", fs)
		}
		checkGolden(t, "evaluate-at-rest.json", g.golden(res))
	})

	t.Run("endpoints only", func(t *testing.T) {
		// No inventory, and nothing expiring.
		g := newGoldenFixture(t, now)
		g.serve("ok.example", "10.0.0.1", g.leaf("ok", -30, 200, "ok.example"))
		g.serve("other.example", "10.0.0.3", g.leaf("ok", -30, 200, "ok.example"))
		ev := policy.NewEvaluator(policy.DefaultRules(), now)
		for i := range g.obs {
			ev.Add(&g.obs[i])
		}
		checkGolden(t, "evaluate-endpoints.json", g.golden(ev.Result()))
	})

	t.Run("nothing to look for", func(t *testing.T) {
		// No inventory, and no expiry finding that a newer certificate
		// could explain: an IP-only leaf has no names to look for.
		g := newGoldenFixture(t, now)
		g.serve("10.0.0.2", "10.0.0.2", g.leaf("ip", -300, 9, "10.0.0.2"))
		g.serve("ok.example", "10.0.0.1", g.leaf("ok", -30, 200, "ok.example"))
		ev := policy.NewEvaluator(policy.DefaultRules(), now)
		for i := range g.obs {
			ev.Add(&g.obs[i])
		}
		checkGolden(t, "evaluate-ip-only.json", g.golden(ev.Result()))
	})
}

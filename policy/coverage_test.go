package policy_test

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestCoverageGaps: names on certificates under a zone no source watches
// are one notice per zone (its names and certificates listed, the zone an
// SOA lookup found where there was one, a wildcard's base otherwise),
// zones out of scope stay quiet, a failed delegation is a warning, and an
// ACM certificate in use by a load balancer that no probed endpoint serves
// is a warning; one that is served is not.
func TestCoverageGaps(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	leaf := root.MustLeaf(certtest.LeafOptions{
		DNSNames:  []string{"www.watched.example", "api.other.example", "db.other.example", "*.svc.hidden.example", "vanity.saas.example", "static.elsewhere.example"},
		NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)})

	rules := policy.DefaultRules()
	rules.OutOfScope = []string{"saas.example"}
	ev := policy.NewEvaluator(rules, now)
	for _, name := range []string{"www.watched.example", "static.elsewhere.example"} {
		o := observe(name, "10.0.0.1", []*x509.Certificate{leaf.Cert}, root.Pool(), now)
		ev.Add(&o)
	}
	served := acmCert("www.watched.example", now.AddDate(0, 6, 0))
	served.Serial = leaf.Cert.SerialNumber.Text(16)
	unverified := acmCert("internal.watched.example", now.AddDate(0, 6, 0))
	unverified.InUseBy = []string{"arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/internal/2"}
	ev.AddACM(served, unverified)
	ev.AddConsumers(certconsumer.Consumer{ARN: lbID, Kind: certconsumer.KindELB, DNSName: "web-1.eu-west-1.elb.amazonaws.com",
		Listeners: []certconsumer.Listener{{Port: 443, Protocol: "HTTPS", Certificates: []string{served.ARN}}}})
	ev.AddCoverage([]found.WatchedZone{{Zone: "watched.example", Source: "dnszone:watched.example"}},
		[]found.Gap{{Reason: found.GapDelegationRefused, Zone: "child.watched.example", Parent: "watched.example", Nameservers: []string{"ns.child.watched.example"},
			Detail: "AXFR refused", Fix: "allow transfers from this host, or add the zone with its own nameserver/tsig"}})
	if got := strings.Join(ev.UncoveredNames(), " "); got != "api.other.example db.other.example svc.hidden.example" {
		t.Errorf("UncoveredNames = %s", got)
	}
	ev.SetZonesOf(map[string]string{"svc.hidden.example": "hidden.example"})
	res := ev.Result()

	byName := map[string]policy.Finding{}
	for _, f := range res.Findings {
		if f.Kind == policy.CoverageGap {
			byName[f.Name] = f
		}
	}
	for name, w := range map[string]struct {
		tier     policy.Tier
		contains []string
	}{
		"other.example":         {policy.Notice, []string{"api.other.example, db.other.example", "www.watched.example", "coverage.out_of_scope"}},
		"hidden.example":        {policy.Notice, []string{"*.svc.hidden.example"}},
		"child.watched.example": {policy.Warning, []string{"refused its transfer", "ns.child.watched.example", "allow transfers from this host"}},
		unverified.ARN:          {policy.Warning, []string{"in use by arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/internal/2", "no endpoint certwatch probed serves it"}},
	} {
		f, ok := byName[name]
		if !ok {
			t.Errorf("no coverage_gap for %s", name)
			continue
		}
		if f.Tier != w.tier {
			t.Errorf("%s: tier %s, want %s", name, f.Tier, w.tier)
		}
		for _, s := range w.contains {
			if !strings.Contains(f.Message, s) {
				t.Errorf("%s: message lacks %q: %s", name, s, f.Message)
			}
		}
		delete(byName, name)
	}
	for name, f := range byName {
		t.Errorf("unexpected coverage_gap %s: %s", name, f.Message)
	}
	if f := findByName(res.Findings, "other.example"); f != nil && len(f.Endpoints) != 2 {
		t.Errorf("other.example lists %d endpoints, want the 2 serving the certificate", len(f.Endpoints))
	}
	reasons := map[found.GapReason]int{}
	for _, g := range res.Gaps {
		reasons[g.Reason]++
	}
	if reasons[found.GapUnmonitoredZone] != 2 || reasons[found.GapDelegationRefused] != 1 || reasons[found.GapUnverifiedInUse] != 1 {
		t.Errorf("gaps by reason = %v", reasons)
	}
}

// TestCoverageNamesNeedAZone: a scan that watches no zone (static targets
// alone) claims no namespace: no name on a certificate is a gap.
func TestCoverageNamesNeedAZone(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	leaf := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example.org", "b.example.net"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)})
	o := observe("a.example.org", "10.0.0.1", []*x509.Certificate{leaf.Cert}, root.Pool(), now)
	res := policy.Evaluate([]probes.Observation{o}, policy.DefaultRules(), now)
	for _, f := range res.Findings {
		if f.Kind == policy.CoverageGap {
			t.Errorf("coverage_gap without a watched zone: %s", f.Message)
		}
	}
}

func findByName(fs []policy.Finding, name string) *policy.Finding {
	for i := range fs {
		if fs[i].Kind == policy.CoverageGap && fs[i].Name == name {
			return &fs[i]
		}
	}
	return nil
}

// TestCoverageAtRest: a certificate held in a Secret for names under a zone
// no source watches is a coverage gap like a served one: its names are
// asked about before Result (so an SOA lookup can place them), and the gap
// names the certificate by subject and where it is held.
func TestCoverageAtRest(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	secret := atrest.Location{Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt"}
	held := atrest.Certificate{SHA256: strings.Repeat("ab", 32), Subject: "api.team.other.example", Issuer: "CA", DNSNames: []string{"api.team.other.example", "www.watched.example"},
		NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0), KeyAlgorithm: "ECDSA", KeyBits: 256, SignatureAlgorithm: "ECDSA-SHA256",
		Locations: []atrest.Location{secret}}
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	ev.AddAtRest(held)
	ev.AddCoverage([]found.WatchedZone{{Zone: "watched.example", Source: "dnszone:watched.example"}}, nil)
	if got := strings.Join(ev.UncoveredNames(), " "); got != "api.team.other.example" {
		t.Errorf("UncoveredNames = %q, want the name on the certificate held at rest", got)
	}
	ev.SetZonesOf(map[string]string{"api.team.other.example": "other.example"})
	res := ev.Result()
	f := findByName(res.Findings, "other.example")
	if f == nil {
		t.Fatalf("no coverage_gap for other.example: %+v", res.Findings)
	}
	if f.Tier != policy.Notice || !strings.Contains(f.Message, `"api.team.other.example" (held at rest in secret payments/api-tls tls.crt)`) ||
		len(f.Refs().Locations) != 1 || f.Refs().Locations[0] != secret {
		t.Errorf("coverage_gap = %+v, want a notice naming the certificate and its Secret", f)
	}
	if len(res.Gaps) != 1 || len(res.Gaps[0].Certificates) != 1 || res.Gaps[0].Certificates[0] != held.SHA256 {
		t.Errorf("gaps = %+v, want other.example listing the certificate", res.Gaps)
	}
}

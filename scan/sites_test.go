package scan_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestEvaluateSites: two instances in two AWS accounts (each its own AWS
// fake: Route 53 and ACM) each discover their account and probe their own
// endpoints; one certificate, held in the first account's ACM, is served in
// both. The first evaluates both parts, each carrying its site's
// inventory, after the wire: the report is the one a single pass over both
// accounts gives, and the certificate is one, with one renewal finding
// listing the endpoints of both accounts.
func TestEvaluateSites(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	ca := certtest.MustCA("Sites Test Root", now.Add(-365*24*time.Hour), now.Add(365*24*time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"*.a.corp.example", "*.b.corp.example"}, NotBefore: now.Add(-300 * 24 * time.Hour), NotAfter: now.Add(20 * 24 * time.Hour)})
	awstest.Isolate(t)
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	type site struct {
		sources []scan.Source
		arns    []string
	}
	newSite := func(account, zone string, withACM bool) site {
		tls, err := certtest.Serve("127.0.0.1:0", leaf.FullChain())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tls.Close() })
		srv := awstest.NewServer()
		t.Cleanup(srv.Close)
		srv.Route53.AddZone(awstest.Zone{Name: zone, Records: []awstest.RecordSet{{Name: "www." + zone, Type: "A", TTL: 60, Values: []string{"127.0.0.1"}}}})
		r53, err := route53.New(route53.Config{Endpoint: srv.URL, Account: account, Ports: []int{int(tls.Addr().Port())}, RateLimit: 1000}, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := site{sources: []scan.Source{r53}}
		if withACM {
			s.arns = srv.ACM.Add(awstest.Certificate{
				Region: "eu-west-1", DomainName: "*.a.corp.example", SubjectAlternativeNames: []string{"*.a.corp.example", "*.b.corp.example"}, Serial: serial(leaf), NotBefore: leaf.Cert.NotBefore, NotAfter: leaf.Cert.NotAfter,
				InUseBy: []string{"arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/1"}, RenewalEligibility: "ELIGIBLE",
				Renewal: &awstest.Renewal{Status: "PENDING_AUTO_RENEWAL", UpdatedAt: now.Add(-24 * time.Hour)},
			})
			certs, err := acm.New(acm.Config{Endpoint: srv.URL, Account: account, Regions: []string{"eu-west-1"}, RateLimit: 1000}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.sources = append(s.sources, certs)
		}
		return s
	}
	a := newSite("111111111111", "a.corp.example", true)
	b := newSite("222222222222", "b.corp.example", false)
	pass := func(sources ...scan.Source) *scan.Pass {
		return &scan.Pass{Sources: sources, Prober: probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool()}), Rules: policy.DefaultRules(), Now: func() time.Time { return now }}
	}

	want, err := pass(append(a.sources, b.sources...)...).Run(context.Background())
	if err != nil {
		t.Fatalf("one pass over both accounts: %v", err)
	}

	// Each site discovers and probes its own; b's part travels to a.
	var parts []*scan.Part
	var d scan.Decoder
	targets := 0
	for _, s := range []site{a, b} {
		p := pass(s.sources...)
		ts, _, err := p.Discover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		targets += len(ts)
		parts = append(parts, wire(t, &d, &scan.Part{Observations: p.Collect(context.Background(), ts), Inventory: p.Inventory()}))
	}
	if len(parts[0].Inventory.ACM) != 1 || len(parts[0].Inventory.Zones) != 1 || len(parts[1].Inventory.Zones) != 1 {
		t.Fatalf("inventories after the wire: %+v / %+v, want a's certificate and each site's zone", parts[0].Inventory, parts[1].Inventory)
	}
	got := pass(a.sources...).Evaluate(now, targets, nil, slices.Values(parts))

	// The sources are the caller's to report (Run's), and to complete
	// the coverage with, as the daemon does.
	got.Coverage.AddSources(want.Sources)
	want.Sources = nil
	want.Summary = scan.Summary{} // Run's, like the sources
	for _, f := range got.Findings {
		if f.Kind == policy.HostnameMismatch {
			t.Fatalf("the certificate does not cover a site's name, so the report depends on which endpoint was seen first: %+v", f)
		}
	}
	if diff := cmp.Diff(reportJSON(t, want), reportJSON(t, got)); diff != "" {
		t.Errorf("two sites' report differs from one pass over both (-one pass +sites):\n%s", diff)
	}
	if len(got.Certificates) != 1 || len(got.ACM) != 1 || got.ACM[0].ARN != a.arns[0] || len(got.ACM[0].Endpoints) != 2 {
		t.Fatalf("certificates %+v, ACM %+v; want one certificate, in a's ACM, served at both sites' endpoints", got.Certificates, got.ACM)
	}
	var overdue []policy.Finding
	for _, f := range got.Findings {
		if f.Kind == policy.RenewalOverdue {
			overdue = append(overdue, f)
		}
	}
	if len(overdue) != 1 || len(overdue[0].Endpoints) != 2 || overdue[0].Endpoints[0].Name != "www.a.corp.example" || overdue[0].Endpoints[1].Name != "www.b.corp.example" {
		t.Errorf("renewal_overdue findings = %+v, want one listing www.a and www.b", overdue)
	}
}

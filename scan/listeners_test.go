package scan_test

import (
	"context"
	"crypto/tls"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/consumers"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestPassProbesListenerCertificates runs a pass over an ACM account
// whose application load balancer has a default certificate and an
// additional (SNI) one on its HTTPS listener, which a loopback listener
// stands in for: it serves the default certificate to unknown names and,
// when the SNI certificate is deployed, that one to its name. The load
// balancer is probed under the SNI certificate's name, at its own
// addresses: a deployed copy is verified on that listener, with no
// coverage gap; one not served says what was served instead.
func TestPassProbesListenerCertificates(t *testing.T) {
	now := time.Now()
	ca := certtest.MustCA("Listener Test Root", now.Add(-time.Hour), now.Add(2*365*24*time.Hour))
	lifetime := certtest.LeafOptions{NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(300 * 24 * time.Hour)}
	defaultOpts, shopOpts := lifetime, lifetime
	defaultOpts.DNSNames = []string{"www.corp.example"}
	shopOpts.DNSNames = []string{"shop.corp.example", "*.shop.corp.example"}
	def, shop := ca.MustLeaf(defaultOpts), ca.MustLeaf(shopOpts)

	for _, tt := range []struct {
		name     string
		deployed bool
	}{
		{"sni certificate served", true},
		{"sni certificate not served", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			served := map[string]tls.Certificate{"": def.FullChain()}
			if tt.deployed {
				served["shop.corp.example"] = shop.FullChain()
			}
			lb, err := certtest.ServeSNI("127.0.0.1:0", served)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lb.Close() })
			port := int(lb.Addr().Port())

			awstest.Isolate(t)
			srv := awstest.NewServer()
			t.Cleanup(srv.Close)
			const (
				defaultARN = "arn:aws:acm:eu-west-1:111111111111:certificate/default"
				shopARN    = "arn:aws:acm:eu-west-1:111111111111:certificate/shop"
				lbDNS      = "web-1.eu-west-1.elb.amazonaws.com"
			)
			lbARN := srv.ELB.Add(awstest.LoadBalancer{Region: "eu-west-1", Name: "web", Listeners: []awstest.LBListener{
				{Port: port, Protocol: "HTTPS", Certificates: []string{defaultARN, shopARN}},
			}})[0]
			for _, c := range []struct {
				arn  string
				leaf *certtest.Leaf
			}{{defaultARN, def}, {shopARN, shop}} {
				srv.ACM.Add(awstest.Certificate{
					Region: "eu-west-1", ARN: c.arn, DomainName: c.leaf.Cert.DNSNames[0], SubjectAlternativeNames: c.leaf.Cert.DNSNames,
					Serial: serial(c.leaf), NotBefore: c.leaf.Cert.NotBefore, NotAfter: c.leaf.Cert.NotAfter,
					InUseBy: []string{lbARN}, RenewalEligibility: "ELIGIBLE", PEM: string(certtest.PEM(c.leaf.Cert)),
				})
			}
			// The load balancer's name resolves to the loopback listener.
			dns, err := dnstest.Start(dnstest.Zone{Name: "eu-west-1.elb.amazonaws.com", Text: "web-1 60 IN A 127.0.0.1\n"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dns.Close() })

			cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond, MaxAttempts: 2})
			if err != nil {
				t.Fatal(err)
			}
			certs, err := acm.New(acm.Config{Endpoint: srv.URL, Regions: []string{"eu-west-1"}, RateLimit: 1000}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			users, err := consumers.New(consumers.Config{Regions: []string{"eu-west-1"}, RateLimit: 1000,
				Endpoints: consumers.Endpoints{ELBv2: srv.URL, ELB: srv.URL, CloudFront: srv.URL, APIGateway: srv.URL}}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := &scan.Pass{
				Sources: []scan.Source{certs, users},
				Prober:  probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), Resolver: probes.NewResolver(dns.Addr(), 0)}),
				Rules:   policy.DefaultRules(),
			}
			r, err := p.Run(context.Background())
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if names := lb.ServerNames(); !slices.Contains(names, "shop.corp.example") {
				t.Errorf("the load balancer was asked for %q, want shop.corp.example among them", names)
			}
			i := slices.IndexFunc(r.ACM, func(c policy.ACMCertificate) bool { return c.ARN == shopARN })
			if i < 0 {
				t.Fatalf("ACM section %+v lacks %s", r.ACM, shopARN)
			}
			got := r.ACM[i]
			var gaps []policy.Finding
			for _, f := range r.Findings {
				switch f.Kind {
				case policy.CoverageGap:
					gaps = append(gaps, f)
				case policy.HostnameMismatch:
					t.Errorf("finding %s: %s: the load balancer asked for a name at its own address is no endpoint of that name", f.Kind, f.Message)
				}
			}

			if tt.deployed {
				want := policy.Endpoint{Name: "shop.corp.example", Port: port, Address: "127.0.0.1", Via: lbDNS}
				if !slices.Contains(got.Endpoints, want) {
					t.Errorf("%s served at %+v, want %+v among them", shopARN, got.Endpoints, want)
				}
				if len(got.Consumers) != 1 || !slices.Contains(got.Consumers[0].Verified, port) {
					t.Errorf("%s consumers = %+v, want the load balancer verified on port %d", shopARN, got.Consumers, port)
				}
				if len(gaps) > 0 {
					t.Errorf("coverage gaps %+v, want none: both certificates are served by the load balancer using them", gaps)
				}
				return
			}
			if len(got.Endpoints) != 0 || len(got.Consumers) != 1 || len(got.Consumers[0].Verified) != 0 {
				t.Errorf("%s: endpoints %+v, consumers %+v: want none serving it and its listener not verified", shopARN, got.Endpoints, got.Consumers)
			}
			if len(gaps) != 1 || gaps[0].Name != shopARN {
				t.Fatalf("coverage gaps %+v, want one about %s", gaps, shopARN)
			}
			msg := gaps[0].Message
			for _, w := range []string{lbDNS, "shop.corp.example", `"www.corp.example"`, "served another certificate"} {
				if !strings.Contains(msg, w) {
					t.Errorf("gap message %q does not say %q", msg, w)
				}
			}
		})
	}
}

// TestDiscoverListenerTargets: every certificate attached to a listener
// but its default one, and every distribution, is asked for at the
// resource itself under one of its names: a host name first, else a
// concrete name under a wildcard; a name a Route 53 alias already leads
// to at that resource is not asked twice, and a certificate no inventory
// names is not asked at all. The targets count as the consumers source's.
func TestDiscoverListenerTargets(t *testing.T) {
	const (
		lbDNS = "web-1.eu-west-1.elb.amazonaws.com"
		arn   = "arn:aws:acm:eu-west-1:111111111111:certificate/"
	)
	inventory := &yieldSource{name: "acm", yield: found.Yield{Inventory: found.Inventory{
		ACM: []acmcert.Certificate{
			{ARN: arn + "default", DomainName: "www.corp.example"},
			{ARN: arn + "shop", DomainName: "*.shop.corp.example", SubjectAlternativeNames: []string{"*.shop.corp.example", "shop.corp.example"}},
			{ARN: arn + "img", DomainName: "*.img.corp.example"},
			{ARN: arn + "api", DomainName: "api.corp.example"},
		},
		IAM: []iamcert.Certificate{{ARN: "arn:aws:iam::111111111111:server-certificate/legacy", DNSNames: []string{"legacy.corp.example"}}},
	}}}
	zone := &yieldSource{name: "route53", yield: found.Yield{Targets: []discovery.Target{
		{Name: "api.corp.example", Port: 443, Resolve: "dualstack." + lbDNS, Sources: []string{"route53:corp.example"}},
	}}}
	web := certconsumer.Consumer{ARN: "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/1", Kind: certconsumer.KindELBv2,
		Name: "web", Account: "111111111111", DNSName: lbDNS, Listeners: []certconsumer.Listener{
			{Port: 443, Protocol: "HTTPS", Certificates: []string{arn + "default", arn + "shop", arn + "img", arn + "api", arn + "unknown"}},
			{Port: 8443, Protocol: "HTTPS", Certificates: []string{arn + "img", "arn:aws:iam::111111111111:server-certificate/legacy"}}, // img by default
		}}
	cdn := certconsumer.Consumer{ARN: "arn:aws:cloudfront::111111111111:distribution/E1", Kind: certconsumer.KindCloudFront, Name: "E1",
		Account: "111111111111", DNSName: "d1.cloudfront.net", Aliases: []string{"*.cdn.corp.example", "cdn.corp.example"},
		Listeners: []certconsumer.Listener{{Port: 443, Protocol: "HTTPS", Certificates: []string{"arn:aws:acm:us-east-1:111111111111:certificate/cdn"}}}}
	users := &yieldSource{name: "aws-consumers", yield: found.Yield{Inventory: found.Inventory{Consumers: []certconsumer.Consumer{web, cdn}}}}

	p := &scan.Pass{Sources: []scan.Source{inventory, zone, users}}
	targets, results, err := p.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range targets {
		if tg.Via != "" {
			got = append(got, tg.Key()+" "+strings.Join(tg.Sources, ","))
		}
	}
	want := []string{
		"cdn.corp.example:443 via d1.cloudfront.net aws:cloudfront:111111111111/E1",
		"certwatch-probe.img.corp.example:443 via " + lbDNS + " aws-lb:elbv2:111111111111/web",
		"legacy.corp.example:8443 via " + lbDNS + " aws-lb:elbv2:111111111111/web",
		"shop.corp.example:443 via " + lbDNS + " aws-lb:elbv2:111111111111/web",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets asked of the resources (-want +got):\n%s", diff)
	}
	if r := results[2]; r.Name != "aws-consumers" || r.Targets != len(want) {
		t.Errorf("consumers source result = %+v, want its %d targets", r, len(want))
	}
}

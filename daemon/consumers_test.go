package daemon_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/daemon"
	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/consumers"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/internal/dnstest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

// TestConsumersTargetsProbed runs the daemon on an ACM source and the AWS
// consumers source of the AWS fake: an application load balancer whose
// HTTPS listener has a default and an SNI certificate, and a CloudFront
// distribution with an alias (on ports), each standing on a loopback
// listener (the distribution's own, on 443, refuses). The
// daemon probes what a scan of the same sources probes: the load
// balancer's own name, the SNI certificate's name at the load balancer
// (via), the alias and the alias at the distribution (via). The consumers
// source is named "aws-consumers" while its targets name each resource
// ("aws-lb:…", "aws:cloudfront:…"), and the daemon used to take none of
// them.
func TestConsumersTargetsProbed(t *testing.T) {
	awstest.Isolate(t)
	now := time.Now()
	ca := certtest.MustCA("Consumers Test Root", now.Add(-time.Hour), now.Add(2*365*24*time.Hour))
	leaf := func(name string) *certtest.Leaf {
		return ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(300 * 24 * time.Hour)})
	}
	def, shop, cdn := leaf("www.corp.example"), leaf("shop.corp.example"), leaf("cdn.corp.example")
	lb, err := certtest.ServeSNI("127.0.43.1:0", map[string]tls.Certificate{"": def.FullChain(), "shop.corp.example": shop.FullChain()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	port := int(lb.Addr().Port())
	edge, err := certtest.ServeSNI(net.JoinHostPort("127.0.43.2", strconv.Itoa(port)), map[string]tls.Certificate{"": cdn.FullChain()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { edge.Close() })

	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	const (
		defaultARN = "arn:aws:acm:eu-west-1:111111111111:certificate/default"
		shopARN    = "arn:aws:acm:eu-west-1:111111111111:certificate/shop"
		cdnARN     = "arn:aws:acm:us-east-1:111111111111:certificate/cdn"
		lbDNS      = "web-1.eu-west-1.elb.amazonaws.com"
		cdnDNS     = "de2cdn.cloudfront.net"
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
			Serial: fmt.Sprintf("%x", c.leaf.Cert.SerialNumber), NotBefore: c.leaf.Cert.NotBefore, NotAfter: c.leaf.Cert.NotAfter,
			InUseBy: []string{lbARN}, RenewalEligibility: "ELIGIBLE",
		})
	}
	srv.CloudFront.Add(awstest.Distribution{ID: "E2CDN", Aliases: []string{"cdn.corp.example"}, ACMCertificateARN: cdnARN})
	dns, err := dnstest.Start(
		dnstest.Zone{Name: "eu-west-1.elb.amazonaws.com", Text: "web-1 60 IN A 127.0.43.1\n"},
		dnstest.Zone{Name: "cloudfront.net", Text: "de2cdn 60 IN A 127.0.43.2\n"},
		dnstest.Zone{Name: "cdn.corp.example", Text: "@ 60 IN A 127.0.43.2\n"},
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })

	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	newPass := func() *scan.Pass {
		certs, err := acm.New(acm.Config{Endpoint: srv.URL, Regions: []string{"eu-west-1"}, RateLimit: 1000}, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		users, err := consumers.New(consumers.Config{Regions: []string{"eu-west-1"}, RateLimit: 1000, Ports: []int{port},
			Endpoints: consumers.Endpoints{ELBv2: srv.URL, ELB: srv.URL, CloudFront: srv.URL, APIGateway: srv.URL}}, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &scan.Pass{
			Sources: []scan.Source{certs, users},
			Prober: probes.New(probes.Config{AllowLoopback: true, Roots: ca.Pool(), Resolver: probes.NewResolver(dns.Addr(), 0),
				DialTimeout: 2 * time.Second, HandshakeTimeout: 2 * time.Second}),
			Rules: policy.DefaultRules(),
		}
	}
	// What each endpoint served, by name, port and via.
	served := func(r *scan.Report) []string {
		var out []string
		for _, ep := range r.Endpoints {
			subject := ep.Fault().Failure
			if i := slices.IndexFunc(r.Certificates, func(c policy.Certificate) bool { return c.SHA256 == ep.Certificate }); i >= 0 {
				subject = r.Certificates[i].Subject
			}
			out = append(out, fmt.Sprintf("%s:%d via %q: %s", ep.Name, ep.Port, ep.Via, subject))
		}
		slices.Sort(out)
		return out
	}
	want := []string{
		fmt.Sprintf("cdn.corp.example:%d via %q: cdn.corp.example", port, ""),
		fmt.Sprintf("cdn.corp.example:443 via %q: refused", cdnDNS), // a distribution listens on 443 only
		fmt.Sprintf("shop.corp.example:%d via %q: shop.corp.example", port, lbDNS),
		fmt.Sprintf("%s:%d via %q: www.corp.example", lbDNS, port, ""),
	}
	slices.Sort(want)
	scanned, err := newPass().Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, served(scanned)); d != "" {
		t.Fatalf("a scan probed (-want +got):\n%s", d)
	}

	reports := make(reportChan, 16)
	d, err := daemon.New(daemon.Config{Discovery: "@every 1s", Probe: "@every 1s", GracePeriod: time.Second}, newPass(), reports, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, d)
	defer stop()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case r := <-reports:
			i := slices.IndexFunc(r.Sources, func(s scan.SourceResult) bool { return strings.HasPrefix(s.Name, "aws-consumers") })
			if i < 0 || r.Sources[i].Targets == 0 {
				continue // before the first discovery
			}
			if d := cmp.Diff(want, served(r)); d != "" {
				t.Fatalf("%s found %d targets; the daemon probed (-want +got):\n%s", r.Sources[i].Name, r.Sources[i].Targets, d)
			}
			return
		case <-deadline:
			t.Fatal("no report with the consumers source's targets within 15s")
		}
	}
}

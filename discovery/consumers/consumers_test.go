package consumers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/consumers"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/internal/awstest"
)

const (
	acmWeb  = "arn:aws:acm:eu-west-1:111111111111:certificate/web"
	acmShop = "arn:aws:acm:eu-west-1:111111111111:certificate/shop"
	acmCDN  = "arn:aws:acm:us-east-1:111111111111:certificate/cdn"
	iamOld  = "arn:aws:iam::111111111111:server-certificate/old"
)

func estate(t *testing.T) (*consumers.Source, *awstest.Server) {
	t.Helper()
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ep := srv.URL
	s, err := consumers.New(consumers.Config{Regions: []string{"eu-west-1"}, Account: awstest.DefaultAccount, RateLimit: 1000,
		Endpoints: consumers.Endpoints{ELBv2: ep, ELB: ep, CloudFront: ep, APIGateway: ep}}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.ELB.Add(
		awstest.LoadBalancer{Region: "eu-west-1", Name: "web", Listeners: []awstest.LBListener{
			{Port: 80, Protocol: "HTTP"},
			{Port: 443, Protocol: "HTTPS", Certificates: []string{acmWeb, acmShop, iamOld}}, // two SNI certificates
			{Port: 8443, Protocol: "HTTPS", Certificates: []string{acmWeb}},
		}},
		awstest.LoadBalancer{Region: "eu-west-1", Name: "plain", Listeners: []awstest.LBListener{{Port: 80, Protocol: "HTTP"}}},
		awstest.LoadBalancer{Region: "eu-west-1", Name: "legacy", Type: "classic", Listeners: []awstest.LBListener{
			{Port: 443, Protocol: "HTTPS", Certificates: []string{iamOld}}}},
		awstest.LoadBalancer{Region: "eu-central-1", Name: "elsewhere", Listeners: []awstest.LBListener{
			{Port: 443, Protocol: "HTTPS", Certificates: []string{acmWeb}}}},
	)
	srv.CloudFront.Add(
		awstest.Distribution{Aliases: []string{"cdn.example.com", "*.static.example.com"}, ACMCertificateARN: acmCDN},
		awstest.Distribution{Aliases: []string{"old.example.com"}, IAMCertificateID: "ASCAOLD"},
		awstest.Distribution{}, // the default *.cloudfront.net certificate
	)
	srv.APIGateway.Add(awstest.DomainName{Region: "eu-west-1", Name: "api.example.com", RegionalCertificateARN: acmWeb})
	srv.ELB.SetPageSize(1)
	srv.CloudFront.SetPageSize(1)
	srv.APIGateway.SetPageSize(1)
	return s, srv
}

// TestTargets reads every kind of consumer over pages of one, through
// throttling of each protocol, with each listener's SNI certificates.
func TestTargets(t *testing.T) {
	s, srv := estate(t)
	srv.ELB.Throttle(2)
	srv.CloudFront.Throttle(2)
	srv.APIGateway.Throttle(2)

	targets, err := s.Targets(context.Background())
	if err != nil {
		t.Fatalf("Targets: %v", err)
	}
	got := map[string]certconsumer.Consumer{}
	for _, c := range s.Consumers() {
		got[c.Kind+"/"+c.Name] = c
	}
	web := got["elbv2/web"]
	if diff := cmp.Diff([]certconsumer.Listener{
		{Port: 443, Protocol: "HTTPS", Certificates: []string{acmWeb, acmShop, iamOld}},
		{Port: 8443, Protocol: "HTTPS", Certificates: []string{acmWeb}},
	}, web.Listeners); diff != "" || web.DNSName != "web-1.eu-west-1.elb.amazonaws.com" {
		t.Errorf("web: DNS %q, listeners (-want +got):\n%s", web.DNSName, diff)
	}
	if _, ok := got["elbv2/plain"]; ok {
		t.Errorf("a load balancer without a TLS listener is listed: %+v", got["elbv2/plain"])
	}
	if _, ok := got["elbv2/elsewhere"]; ok {
		t.Errorf("a region not configured is listed")
	}
	if l := got["elb/legacy"].Listeners; len(l) != 1 || l[0].Certificates[0] != iamOld {
		t.Errorf("classic legacy: listeners %+v, want 443 with %s", l, iamOld)
	}
	var cdn, old certconsumer.Consumer
	for _, c := range s.Consumers() {
		if c.Kind == certconsumer.KindCloudFront && c.Uses(acmCDN) {
			cdn = c
		}
		if c.Kind == certconsumer.KindCloudFront && c.Uses(certconsumer.IAMCertificateID+"ASCAOLD") {
			old = c
		}
	}
	if !strings.HasSuffix(cdn.DNSName, ".cloudfront.net") || len(cdn.Aliases) != 2 || old.ARN == "" {
		t.Errorf("distributions: %+v and %+v, want the ACM one with its aliases and the IAM one by ID", cdn, old)
	}
	if api := got["apigateway/api.example.com"]; !api.Uses(acmWeb) || !strings.Contains(api.DNSName, ".execute-api.eu-west-1.amazonaws.com") {
		t.Errorf("api gateway domain: %+v", api)
	}
	if len(s.Consumers()) != 5 {
		t.Errorf("%d consumers, want 5 (web, legacy, two distributions, one domain): %+v", len(s.Consumers()), s.Consumers())
	}

	keys := map[string]string{}
	for _, tg := range targets {
		keys[tg.Key()] = tg.Resolve
	}
	for k, resolve := range map[string]string{
		"web-1.eu-west-1.elb.amazonaws.com:443": "", "web-1.eu-west-1.elb.amazonaws.com:8443": "",
		"legacy-3.eu-west-1.elb.amazonaws.com:443": "", "cdn.example.com:443": "", "old.example.com:443": "",
		"api.example.com:443": "",
	} {
		if r, ok := keys[k]; !ok || r != resolve {
			t.Errorf("target %s: resolve %q, present %v; want resolve %q", k, r, ok, resolve)
		}
	}
	if len(targets) != 6 {
		t.Errorf("%d targets, want 6 (no wildcard alias, no plain listener): %v", len(targets), keys)
	}
	var throttled int
	for _, r := range srv.Requests("") {
		if r.Status == 400 || r.Status == 429 {
			throttled++
		}
	}
	if throttled != 6 {
		t.Errorf("%d throttled requests, want 6", throttled)
	}
}

// TestServiceDenied: a permission missing for one service fails that
// service only, naming the action to grant.
func TestServiceDenied(t *testing.T) {
	s, srv := estate(t)
	srv.ELB.DenyOperation("DescribeListenerCertificates")
	_, err := s.Targets(context.Background())
	var se *consumers.ServiceError
	if !errors.As(err, &se) || se.Service != "elbv2" || !strings.Contains(err.Error(), "grant elasticloadbalancing:DescribeListenerCertificates") ||
		!strings.Contains(err.Error(), "account 111111111111") {
		t.Errorf("error = %v, want elbv2 failing with the action to grant", err)
	}
	kinds := map[string]int{}
	for _, c := range s.Consumers() {
		kinds[c.Kind]++
	}
	if kinds[certconsumer.KindELB] != 1 || kinds[certconsumer.KindCloudFront] != 2 || kinds[certconsumer.KindAPIGateway] != 1 {
		t.Errorf("the other services' consumers = %v, want all of them", kinds)
	}
}

// Package consumers inventories the AWS resources that serve TLS
// certificates, so that each certificate (ACM or IAM) lists who uses it and
// a resource no hosted zone points to is still probed:
//
//   - Elastic Load Balancing v2 (application and network load balancers):
//     DescribeLoadBalancers, DescribeListeners and, per TLS listener,
//     DescribeListenerCertificates, which lists the SNI certificates beside
//     the default one.
//   - Classic Elastic Load Balancing: DescribeLoadBalancers, whose HTTPS and
//     SSL listeners name their certificate.
//   - CloudFront distributions: ListDistributions (global; its viewer
//     certificate is an ACM certificate in us-east-1 or an IAM server
//     certificate).
//   - API Gateway custom domain names: GetDomainNames.
//
// Every attempt of every call (retries included) waits for a rate limiter
// per service and region. A service that fails (a missing permission, say)
// fails alone: the others' consumers are returned with an error naming the
// service, the account, the region and the action to grant.
package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/cloudfront"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
)

// Defaults used when Config fields are zero.
const (
	// DefaultRateLimit is requests per second per service and region.
	DefaultRateLimit = 5
	DefaultTimeout   = 2 * time.Minute
)

// Endpoints override the services' endpoints (VPC interface endpoints, an
// emulator); empty means the SDK's resolution (AWS_ENDPOINT_URL and the
// per-service AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2, ..._CLOUDFRONT,
// ..._API_GATEWAY).
type Endpoints struct {
	ELBv2, ELB, CloudFront, APIGateway string
}

// Config configures a Source for one account.
type Config struct {
	// Regions whose load balancers and API Gateway domains are listed;
	// CloudFront is global and listed once.
	Regions []string
	// Account labels the source and its targets ("aws:<account>").
	Account   string
	Endpoints Endpoints
	// Ports are probed on every distribution alias and API Gateway custom
	// domain name. Empty means 443.
	Ports []int
	// RateLimit is requests per second per service and region, retries
	// included. Zero means DefaultRateLimit.
	RateLimit float64
	// Timeout bounds one API call with its retries. Zero means
	// DefaultTimeout.
	Timeout time.Duration
}

// Source lists the consumers of one account. Its methods are safe for
// concurrent use.
type Source struct {
	c      Config
	cfg    aws.Config
	logger *slog.Logger

	mu        sync.Mutex
	consumers []certconsumer.Consumer // from the last Targets call
}

// New returns a Source for the account whose credentials cfg holds (see
// awsaccount.Load). New does no I/O.
func New(c Config, cfg aws.Config, logger *slog.Logger) (*Source, error) {
	if len(c.Regions) == 0 {
		return nil, errors.New("aws consumers: no regions configured (hint: set aws.regions or --region)")
	}
	if len(c.Ports) == 0 {
		c.Ports = []int{443}
	}
	c.RateLimit = cmp.Or(c.RateLimit, DefaultRateLimit)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Source{c: c, cfg: cfg, logger: logger.With("component", "aws-consumers")}, nil
}

// Name is "aws-consumers", or "aws-consumers:<account>".
func (s *Source) Name() string {
	if s.c.Account == "" {
		return "aws-consumers"
	}
	return "aws-consumers:" + s.c.Account
}

// ServiceError is the failure of one service in one region (CloudFront:
// global) of one account; the other services' consumers are returned.
type ServiceError struct {
	Account, Region, Service string
	// Action is the IAM action the failed call needs.
	Action string
	Err    error
}

func (e *ServiceError) Error() string {
	who := e.Region
	if e.Account != "" {
		who += ", account " + e.Account
	}
	return fmt.Sprintf("%s in %s: %v", e.Service, who, e.Err)
}

// Unwrap returns the underlying SDK error.
func (e *ServiceError) Unwrap() error { return e.Err }

// Discover lists every consumer (see List) and yields them, with the
// targets to probe them on (see Targets).
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	ts, err := s.Targets(ctx)
	return found.Yield{Targets: ts, Inventory: found.Inventory{Consumers: s.Consumers()}}, err
}

// Targets lists every consumer (see List), keeps them for
// Consumers, and returns what to probe so a certificate served only by a
// resource no hosted zone points to is seen on the wire: each load
// balancer's DNS name on each TLS listener port (its default
// certificate), each distribution's aliases and each API Gateway custom
// domain name on Config.Ports.
func (s *Source) Targets(ctx context.Context) ([]discovery.Target, error) {
	cs, err := s.List(ctx)
	if ctx.Err() == nil {
		s.mu.Lock()
		s.consumers = cs
		s.mu.Unlock()
	}
	var out []discovery.Target
	for _, c := range cs {
		src := []string{c.Source()}
		switch c.Kind {
		case certconsumer.KindELBv2, certconsumer.KindELB:
			for _, l := range c.Listeners {
				out = append(out, discovery.Target{Name: c.DNSName, Port: l.Port, Sources: src})
			}
		default:
			// Under the alias itself, resolved as clients resolve it, so
			// it merges with a hosted zone's target of the same name.
			for _, a := range c.Aliases {
				if strings.HasPrefix(a, "*.") {
					continue
				}
				for _, port := range s.c.Ports {
					out = append(out, discovery.Target{Name: a, Port: port, Sources: src})
				}
			}
		}
	}
	return discovery.Merge(out), err
}

// Consumers returns the consumers the last Targets call found (nil before
// the first). Callers must not modify them.
func (s *Source) Consumers() []certconsumer.Consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consumers
}

// List lists every consumer: ELBv2 and classic load balancers and API
// Gateway domains in every region, CloudFront distributions once, sorted
// by ARN. A service that fails does not stop the others: the rest are
// returned with an error joining one *ServiceError per failed service and
// region, naming the action to grant. Cancelling ctx stops discovery.
func (s *Source) List(ctx context.Context) ([]certconsumer.Consumer, error) {
	type job struct {
		region string
		run    func(ctx context.Context, region string) ([]certconsumer.Consumer, error)
	}
	jobs := []job{{"global", s.cloudFront}}
	for _, r := range s.c.Regions {
		jobs = append(jobs, job{r, s.elbv2}, job{r, s.elb}, job{r, s.apiGateway})
	}
	results := make([][]certconsumer.Consumer, len(jobs))
	errs := make([]error, len(jobs))
	var g errgroup.Group
	g.SetLimit(4)
	for i, j := range jobs {
		g.Go(func() error {
			results[i], errs[i] = j.run(ctx, j.region)
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
	if ctx.Err() != nil {
		return nil, fmt.Errorf("aws consumers: %w", context.Cause(ctx))
	}
	var out []certconsumer.Consumer
	for _, r := range results {
		out = append(out, r...)
	}
	fillAccount(out)
	slices.SortFunc(out, func(a, b certconsumer.Consumer) int { return strings.Compare(a.ARN, b.ARN) })
	return out, errors.Join(errs...)
}

// withTimeout runs one API call (with the SDK's retries) under the
// per-call timeout.
func withTimeout[T any](ctx context.Context, s *Source, what string, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.c.Timeout, fmt.Errorf("%s call took longer than the %v timeout", what, s.c.Timeout))
	defer cancel()
	return f(ctx)
}

func (s *Source) fail(region, service, action string, err error) error {
	return &ServiceError{Account: s.c.Account, Region: region, Service: service, Action: action, Err: awsaccount.WithHint(err, action)}
}

func newLimiter(r float64) *rate.Limiter { return rate.NewLimiter(rate.Limit(r), 1) }

func (s *Source) elbv2(ctx context.Context, region string) ([]certconsumer.Consumer, error) {
	client := elbv2.NewFromConfig(s.cfg, func(o *elbv2.Options) {
		o.Region = region
		if s.c.Endpoints.ELBv2 != "" {
			o.BaseEndpoint = aws.String(s.c.Endpoints.ELBv2)
		}
		o.APIOptions = append(slices.Clip(o.APIOptions), awsaccount.LimitAttempts(newLimiter(s.c.RateLimit)))
	})
	const service = "elbv2"
	var out []certconsumer.Consumer
	p := elbv2.NewDescribeLoadBalancersPaginator(client, &elbv2.DescribeLoadBalancersInput{PageSize: aws.Int32(400)})
	for p.HasMorePages() {
		page, err := withTimeout(ctx, s, service, func(ctx context.Context) (*elbv2.DescribeLoadBalancersOutput, error) { return p.NextPage(ctx) })
		if err != nil {
			return out, s.fail(region, service, "elasticloadbalancing:DescribeLoadBalancers", err)
		}
		for _, lb := range page.LoadBalancers {
			out = append(out, certconsumer.Consumer{ARN: aws.ToString(lb.LoadBalancerArn), Kind: certconsumer.KindELBv2, Name: aws.ToString(lb.LoadBalancerName),
				Account: awsaccount.AccountID(aws.ToString(lb.LoadBalancerArn)), Region: region, DNSName: discovery.NormalizeName(aws.ToString(lb.DNSName))})
		}
	}
	for i := range out {
		c := &out[i]
		lp := elbv2.NewDescribeListenersPaginator(client, &elbv2.DescribeListenersInput{LoadBalancerArn: aws.String(c.ARN), PageSize: aws.Int32(400)})
		for lp.HasMorePages() {
			page, err := withTimeout(ctx, s, service, func(ctx context.Context) (*elbv2.DescribeListenersOutput, error) { return lp.NextPage(ctx) })
			if err != nil {
				return withListeners(out), s.fail(region, service, "elasticloadbalancing:DescribeListeners", err)
			}
			for _, l := range page.Listeners {
				proto := string(l.Protocol)
				if proto != "HTTPS" && proto != "TLS" {
					continue
				}
				var certs []string
				cp := elbv2.NewDescribeListenerCertificatesPaginator(client, &elbv2.DescribeListenerCertificatesInput{ListenerArn: l.ListenerArn, PageSize: aws.Int32(400)})
				for cp.HasMorePages() {
					cpage, err := withTimeout(ctx, s, service, func(ctx context.Context) (*elbv2.DescribeListenerCertificatesOutput, error) { return cp.NextPage(ctx) })
					if err != nil {
						return withListeners(out), s.fail(region, service, "elasticloadbalancing:DescribeListenerCertificates", err)
					}
					for _, cert := range cpage.Certificates {
						arn := aws.ToString(cert.CertificateArn)
						if aws.ToBool(cert.IsDefault) {
							certs = slices.Insert(certs, 0, arn)
						} else {
							certs = append(certs, arn)
						}
					}
				}
				c.Listeners = append(c.Listeners, certconsumer.Listener{Port: int(aws.ToInt32(l.Port)), Protocol: proto, Certificates: dedup(certs)})
			}
		}
	}
	return withListeners(out), nil
}

func (s *Source) elb(ctx context.Context, region string) ([]certconsumer.Consumer, error) {
	client := elb.NewFromConfig(s.cfg, func(o *elb.Options) {
		o.Region = region
		if s.c.Endpoints.ELB != "" {
			o.BaseEndpoint = aws.String(s.c.Endpoints.ELB)
		}
		o.APIOptions = append(slices.Clip(o.APIOptions), awsaccount.LimitAttempts(newLimiter(s.c.RateLimit)))
	})
	var out []certconsumer.Consumer
	p := elb.NewDescribeLoadBalancersPaginator(client, &elb.DescribeLoadBalancersInput{PageSize: aws.Int32(400)})
	for p.HasMorePages() {
		page, err := withTimeout(ctx, s, "elb", func(ctx context.Context) (*elb.DescribeLoadBalancersOutput, error) { return p.NextPage(ctx) })
		if err != nil {
			return out, s.fail(region, "elb (classic)", "elasticloadbalancing:DescribeLoadBalancers", err)
		}
		for _, lb := range page.LoadBalancerDescriptions {
			name := aws.ToString(lb.LoadBalancerName)
			c := certconsumer.Consumer{ARN: fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:loadbalancer/%s", region, s.c.Account, name), Kind: certconsumer.KindELB, Name: name,
				Account: s.c.Account, Region: region, DNSName: discovery.NormalizeName(aws.ToString(lb.DNSName))}
			for _, ld := range lb.ListenerDescriptions {
				l := ld.Listener
				if l == nil || l.SSLCertificateId == nil {
					continue
				}
				c.Listeners = append(c.Listeners, certconsumer.Listener{Port: int(l.LoadBalancerPort), Protocol: aws.ToString(l.Protocol), Certificates: []string{aws.ToString(l.SSLCertificateId)}})
			}
			out = append(out, c)
		}
	}
	return withListeners(out), nil
}

func (s *Source) cloudFront(ctx context.Context, _ string) ([]certconsumer.Consumer, error) {
	client := cloudfront.NewFromConfig(s.cfg, func(o *cloudfront.Options) {
		o.Region = "us-east-1"
		if s.c.Endpoints.CloudFront != "" {
			o.BaseEndpoint = aws.String(s.c.Endpoints.CloudFront)
		}
		o.APIOptions = append(slices.Clip(o.APIOptions), awsaccount.LimitAttempts(newLimiter(s.c.RateLimit)))
	})
	var out []certconsumer.Consumer
	p := cloudfront.NewListDistributionsPaginator(client, &cloudfront.ListDistributionsInput{MaxItems: aws.Int32(1000)})
	for p.HasMorePages() {
		page, err := withTimeout(ctx, s, "cloudfront", func(ctx context.Context) (*cloudfront.ListDistributionsOutput, error) { return p.NextPage(ctx) })
		if err != nil {
			return out, s.fail("global", "cloudfront", "cloudfront:ListDistributions", err)
		}
		if page.DistributionList == nil {
			break
		}
		for _, d := range page.DistributionList.Items {
			vc := d.ViewerCertificate
			if vc == nil || (vc.ACMCertificateArn == nil && vc.IAMCertificateId == nil) {
				continue // the default *.cloudfront.net certificate: AWS's to renew
			}
			cert := aws.ToString(vc.ACMCertificateArn)
			if cert == "" {
				cert = certconsumer.IAMCertificateID + aws.ToString(vc.IAMCertificateId)
			}
			c := certconsumer.Consumer{ARN: aws.ToString(d.ARN), Kind: certconsumer.KindCloudFront, Name: aws.ToString(d.Id), Account: awsaccount.AccountID(aws.ToString(d.ARN)),
				DNSName: discovery.NormalizeName(aws.ToString(d.DomainName)), Listeners: []certconsumer.Listener{{Port: 443, Protocol: "HTTPS", Certificates: []string{cert}}}}
			if d.Aliases != nil {
				for _, a := range d.Aliases.Items {
					c.Aliases = append(c.Aliases, discovery.NormalizeName(a))
				}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func (s *Source) apiGateway(ctx context.Context, region string) ([]certconsumer.Consumer, error) {
	client := apigateway.NewFromConfig(s.cfg, func(o *apigateway.Options) {
		o.Region = region
		if s.c.Endpoints.APIGateway != "" {
			o.BaseEndpoint = aws.String(s.c.Endpoints.APIGateway)
		}
		o.APIOptions = append(slices.Clip(o.APIOptions), awsaccount.LimitAttempts(newLimiter(s.c.RateLimit)))
	})
	var out []certconsumer.Consumer
	p := apigateway.NewGetDomainNamesPaginator(client, &apigateway.GetDomainNamesInput{Limit: aws.Int32(500)})
	for p.HasMorePages() {
		page, err := withTimeout(ctx, s, "apigateway", func(ctx context.Context) (*apigateway.GetDomainNamesOutput, error) { return p.NextPage(ctx) })
		if err != nil {
			return out, s.fail(region, "apigateway", "apigateway:GET", err)
		}
		for _, d := range page.Items {
			name := discovery.NormalizeName(aws.ToString(d.DomainName))
			arn := cmp.Or(aws.ToString(d.DomainNameArn), fmt.Sprintf("arn:aws:apigateway:%s::/domainnames/%s", region, name))
			for _, x := range []struct{ cert, dns string }{
				{aws.ToString(d.RegionalCertificateArn), aws.ToString(d.RegionalDomainName)},
				{aws.ToString(d.CertificateArn), aws.ToString(d.DistributionDomainName)},
			} {
				if x.cert == "" {
					continue
				}
				out = append(out, certconsumer.Consumer{ARN: arn, Kind: certconsumer.KindAPIGateway, Name: name, Account: s.c.Account, Region: region,
					DNSName: discovery.NormalizeName(x.dns), Aliases: []string{name},
					Listeners: []certconsumer.Listener{{Port: 443, Protocol: "HTTPS", Certificates: []string{x.cert}}}})
			}
		}
	}
	return out, nil
}

// fillAccount gives the classic load balancers and API Gateway domains of
// the default credentials' account (whose ID is not looked up: no
// sts:GetCallerIdentity) the account that the other consumers' ARNs name,
// so their ARNs read as AWS writes them (ACM's InUseBy).
func fillAccount(cs []certconsumer.Consumer) {
	account := ""
	for _, c := range cs {
		if a := awsaccount.AccountID(c.ARN); a != "" {
			account = a
			break
		}
	}
	if account == "" {
		return
	}
	for i := range cs {
		c := &cs[i]
		if c.Account == "" {
			c.Account = account
		}
		if c.Kind == certconsumer.KindELB && awsaccount.AccountID(c.ARN) == "" {
			c.ARN = fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:loadbalancer/%s", c.Region, account, c.Name)
		}
	}
}

// withListeners keeps the load balancers that have a TLS listener.
func withListeners(cs []certconsumer.Consumer) []certconsumer.Consumer {
	return slices.DeleteFunc(cs, func(c certconsumer.Consumer) bool { return len(c.Listeners) == 0 })
}

func dedup(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

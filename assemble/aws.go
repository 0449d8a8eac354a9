package assemble

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/consumers"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/iam"
	"github.com/certwatch/certwatch/discovery/route53"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

var (
	_ scan.Source   = (*route53.Source)(nil)
	_ scan.Follower = (*route53.Source)(nil)
	_ scan.Source   = (*acm.Source)(nil)
	_ scan.Source   = (*iam.Source)(nil)
	_ scan.Source   = (*consumers.Source)(nil)
)

// awsSources returns one Route 53 and one ACM source per account, as
// c.AWS enables them: the default credentials' account, or each role's.
// Building them does no network I/O; credentials are fetched (and roles
// assumed) on first use.
func awsSources(ctx context.Context, c config.Config, logger *slog.Logger) ([]scan.Source, error) {
	a := c.AWS
	if !a.Route53 && !a.ACM {
		return nil, nil
	}
	zones, err := discovery.NewFilter(a.Route53Zones, nil)
	if err != nil {
		return nil, fmt.Errorf("aws: route53_zones: %w", err)
	}
	names, err := discovery.NewFilter(a.Include, a.Exclude)
	if err != nil {
		return nil, fmt.Errorf("aws: %w", err)
	}
	var resolvers []route53.ZoneResolver
	for _, glob := range config.ZoneGlobs(a.Route53Resolvers) {
		f, err := discovery.NewFilter([]string{glob}, nil)
		if err != nil {
			return nil, fmt.Errorf("aws: route53_resolvers: %w", err)
		}
		server := string(a.Route53Resolvers[glob])
		resolvers = append(resolvers, route53.ZoneResolver{Zones: f, Server: server, Resolver: probes.NewResolver(server, 0)})
	}
	var follow *dnszone.Config
	if a.FollowsDelegations() {
		follow = &dnszone.Config{
			Resolver:       string(c.Resolver),
			AllowLoopback:  c.Probe.AllowLoopback,
			MaxDepth:       c.Coverage.MaxDelegationDepth,
			MaxDelegations: c.Coverage.MaxDelegations,
			DelegationPort: c.Coverage.DelegationPort,
			Configured:     configuredZones(c),
			OutOfScope:     c.Coverage.OutOfScopeZones(),
		}
	}
	accounts := []awsaccount.Config{{}}
	if len(a.Roles) > 0 {
		accounts = accounts[:0]
		for _, r := range a.Roles {
			accounts = append(accounts, awsaccount.Config{Role: awsaccount.Role{ARN: r.ARN, ExternalID: r.ExternalID, SessionName: r.SessionName}})
		}
	}
	var out []scan.Source
	for _, ac := range accounts {
		if len(a.Regions) > 0 {
			ac.Region = a.Regions[0]
		}
		ac.STSEndpoint = a.Endpoints.STS
		ac.MaxAttempts = a.MaxAttempts
		cfg, err := awsaccount.Load(ctx, ac)
		if err != nil {
			return nil, &config.FieldError{Path: "aws", Err: fmt.Errorf("aws account %s: %w", cmp.Or(ac.Label(), "(default credentials)"), err)}
		}
		if a.Route53 {
			s, err := route53.New(route53.Config{
				Account: ac.Label(), Endpoint: a.Endpoints.Route53, Zones: zones, Filter: names, Ports: c.Ports.Numbers(), Protocols: c.PortProtocols(nil),
				RateLimit: a.Route53RateLimit, Timeout: time.Duration(a.Timeout), Resolvers: resolvers, Delegations: follow,
			}, cfg, logger)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		if a.ACM {
			s, err := acm.New(acm.Config{
				Regions: a.Regions, Account: ac.Label(), Endpoint: a.Endpoints.ACM,
				RateLimit: a.ACMRateLimit, Concurrency: a.ACMConcurrency, Timeout: time.Duration(a.Timeout),
			}, cfg, logger)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			if !a.SkipIAM {
				out = append(out, iam.New(iam.Config{Account: ac.Label(), Endpoint: a.Endpoints.IAM, RateLimit: a.ACMRateLimit,
					Concurrency: a.ACMConcurrency, Timeout: time.Duration(a.Timeout)}, cfg, logger))
			}
			if !a.SkipConsumers {
				cs, err := consumers.New(consumers.Config{Regions: a.Regions, Account: ac.Label(), Ports: c.Ports.Numbers(), RateLimit: a.ACMRateLimit, Timeout: time.Duration(a.Timeout),
					Endpoints: consumers.Endpoints{ELBv2: a.Endpoints.ELBv2, ELB: a.Endpoints.ELB, CloudFront: a.Endpoints.CloudFront, APIGateway: a.Endpoints.APIGateway}}, cfg, logger)
				if err != nil {
					return nil, err
				}
				out = append(out, cs)
			}
		}
	}
	return out, nil
}

package config

import (
	"cmp"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
)

// AWS configures discovery in AWS: every Route 53 hosted zone (public and
// private), the ACM certificates of every listed region, the account's IAM
// server certificates and the resources serving each certificate (load
// balancers, CloudFront, API Gateway), in the default account or in each
// account reached through Roles.
//
// Credentials come from the SDK's default chain (environment, shared files,
// SSO, web identity, container or instance role). Endpoints honour the SDK's
// AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_ACM, AWS_ENDPOINT_URL_ROUTE_53 and
// AWS_ENDPOINT_URL_STS; an endpoint set in Endpoints wins over them.
type AWS struct {
	// Route53 enables discovery of every hosted zone and record set.
	Route53 bool `yaml:"route53,omitempty"`
	// ACM enables the inventory of ACM certificates in every region.
	ACM bool `yaml:"acm,omitempty"`
	// Regions are the regions whose ACM certificates are listed, e.g.
	// [eu-west-1, us-east-1] (CloudFront certificates live in us-east-1).
	// Required when ACM is enabled. The first region also signs STS calls.
	Regions []string `yaml:"regions,omitempty"`
	// Roles are IAM roles to assume, one per account. Empty means the
	// default credentials' own account only; when roles are listed, only
	// those accounts are inventoried (the default credentials assume them).
	Roles []AWSRole `yaml:"roles,omitempty"`
	// Endpoints override the API endpoints per service, e.g. VPC interface
	// endpoints or an AWS-compatible emulator.
	Endpoints AWSEndpoints `yaml:"endpoints,omitempty"`
	// Route53Zones keeps only hosted zones whose name matches one of these
	// globs ("*" spans dots). Empty keeps every zone.
	Route53Zones []string `yaml:"route53_zones,omitempty"`
	// Route53Resolvers maps hosted zone name globs ("*" spans dots) to the
	// DNS resolver ("HOST:PORT") that answers for the names of the zones
	// they match: private hosted zones associated with different VPCs each
	// resolve through their VPC's resolver. The most specific glob (the
	// longest) wins; zones no glob matches use `resolver`.
	Route53Resolvers map[string]HostPort `yaml:"route53_resolvers,omitempty"`
	// Route53Labels maps hosted zone name globs to labels attached to
	// findings with an endpoint in a matching zone, as zones[].labels are
	// (for notify routes that match on labels).
	Route53Labels map[string]map[string]string `yaml:"route53_labels,omitempty"`
	// Route53FollowDelegations follows the child zones hosted zones
	// delegate (NS records below an apex) as zones[].follow_delegations
	// follows a transferred zone's, within the Coverage bounds: a child
	// that is itself a hosted zone read in the same run (public for a
	// public zone, private for a private one) is covered by it; any other
	// is transferred from its name servers, and one that cannot be is a
	// coverage_gap finding. Nil means true.
	Route53FollowDelegations *bool `yaml:"route53_follow_delegations,omitempty"`
	// Include keeps only Route 53 names matching one of these globs.
	Include []string `yaml:"include,omitempty"`
	// Exclude drops Route 53 names matching any of these globs.
	Exclude []string `yaml:"exclude,omitempty"`
	// Route53RateLimit is the number of Route 53 API requests per second
	// per account, retries included. AWS allows 5 per account, shared with
	// every other tool using the account.
	Route53RateLimit float64 `yaml:"route53_rate_limit"`
	// ACMRateLimit is the number of ACM API requests per second per account
	// and region, retries included.
	ACMRateLimit float64 `yaml:"acm_rate_limit"`
	// ACMConcurrency is the number of DescribeCertificate calls in flight
	// per account and region.
	ACMConcurrency int `yaml:"acm_concurrency"`
	// MaxAttempts is how often one API call is tried, with exponential
	// backoff and full jitter between attempts.
	MaxAttempts int `yaml:"max_attempts"`
	// Timeout bounds one API call, its retries included.
	Timeout Duration `yaml:"timeout"`
	// SkipIAM leaves out the IAM server certificates (iam:
	// ListServerCertificates, iam:GetServerCertificate) that ACM enables.
	SkipIAM bool `yaml:"skip_iam,omitempty"`
	// SkipConsumers leaves out the inventory of who serves each certificate
	// (ELBv2 and classic load balancers, CloudFront distributions, API
	// Gateway custom domains) that ACM enables.
	SkipConsumers bool `yaml:"skip_consumers,omitempty"`
	// RenewalMargin: an ACM certificate that ACM renews itself is quiet
	// ("auto-renews") until less than this is left before it expires;
	// still not renewed by then, it is renewal_overdue. ACM starts renewing
	// 60 days before expiry, so the margin must be shorter.
	RenewalMargin Duration `yaml:"renewal_margin"`
}

// AWSRole is an IAM role to assume for one account.
type AWSRole struct {
	// ARN is the role, e.g. arn:aws:iam::123456789012:role/certwatch.
	ARN string `yaml:"arn"`
	// ExternalID is passed to sts:AssumeRole when the role's trust policy
	// requires one.
	ExternalID string `yaml:"external_id,omitempty"`
	// SessionName names the session in CloudTrail. Empty means
	// "certwatch".
	SessionName string `yaml:"session_name,omitempty"`
}

// AWSEndpoints are per-service endpoint URLs. Empty means the SDK's
// resolution (environment, shared config, then the public endpoint).
type AWSEndpoints struct {
	ACM        string `yaml:"acm,omitempty"`
	Route53    string `yaml:"route53,omitempty"`
	STS        string `yaml:"sts,omitempty"`
	IAM        string `yaml:"iam,omitempty"`
	ELBv2      string `yaml:"elbv2,omitempty"`
	ELB        string `yaml:"elb,omitempty"`
	CloudFront string `yaml:"cloudfront,omitempty"`
	APIGateway string `yaml:"apigateway,omitempty"`
}

// FollowsDelegations reports whether the delegations of hosted zones are
// followed (the default).
func (a *AWS) FollowsDelegations() bool {
	return a.Route53FollowDelegations == nil || *a.Route53FollowDelegations
}

// AWS defaults.
const (
	// DefaultRoute53RateLimit stays below the 5 requests per second that
	// Route 53 allows per account.
	DefaultRoute53RateLimit = 4
	// DefaultACMRateLimit stays well below ACM's per-region quotas
	// (DescribeCertificate 10/s, ListCertificates 8/s).
	DefaultACMRateLimit = 5
	// DefaultACMConcurrency is the number of DescribeCertificate calls in
	// flight per account and region.
	DefaultACMConcurrency = 4
	// DefaultAWSMaxAttempts is how often one API call is tried.
	DefaultAWSMaxAttempts = 10
	// DefaultAWSTimeout bounds one API call with its retries.
	DefaultAWSTimeout = 2 * time.Minute
	// DefaultRenewalMargin leaves ACM 30 of its 60 days of managed renewal
	// before a certificate it has not renewed is overdue.
	DefaultRenewalMargin = 30 * 24 * time.Hour
	// acmRenewalWindow is how long before expiry ACM starts renewing.
	acmRenewalWindow = 60 * 24 * time.Hour
)

var (
	awsRegionRe      = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	awsRoleARNRe     = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]+$`)
	awsSessionNameRe = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	awsExternalIDRe  = regexp.MustCompile(`^[\w+=,.@:/-]+$`)
)

func (a *AWS) applyDefaults() {
	if a.Route53RateLimit == 0 {
		a.Route53RateLimit = DefaultRoute53RateLimit
	}
	if a.ACMRateLimit == 0 {
		a.ACMRateLimit = DefaultACMRateLimit
	}
	if a.ACMConcurrency == 0 {
		a.ACMConcurrency = DefaultACMConcurrency
	}
	if a.MaxAttempts == 0 {
		a.MaxAttempts = DefaultAWSMaxAttempts
	}
	if a.Timeout == 0 {
		a.Timeout = Duration(DefaultAWSTimeout)
	}
	if a.RenewalMargin == 0 {
		a.RenewalMargin = Duration(DefaultRenewalMargin)
	}
}

func (a *AWS) validate() []error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, fieldf(join("aws", path), "aws: "+format, args...))
	}

	if a.ACM && len(a.Regions) == 0 {
		add("regions", "regions: at least one region is required when acm is enabled (e.g. regions: [eu-west-1])")
	}
	seen := map[string]bool{}
	for _, r := range a.Regions {
		if !awsRegionRe.MatchString(r) {
			add("regions", "regions: invalid region %q (want e.g. eu-west-1)", r)
		}
		if seen[r] {
			add("regions", "regions: %s listed twice", r)
		}
		seen[r] = true
	}
	seen = map[string]bool{}
	for i, r := range a.Roles {
		where := fmt.Sprintf("roles[%d]", i)
		if !awsRoleARNRe.MatchString(r.ARN) {
			add(where, "%s: invalid role arn %q (want arn:aws:iam::123456789012:role/NAME)", where, r.ARN)
		}
		if seen[r.ARN] {
			add(where, "%s: role %s listed twice", where, r.ARN)
		}
		seen[r.ARN] = true
		if r.ExternalID != "" && (len(r.ExternalID) < 2 || len(r.ExternalID) > 1224 || !awsExternalIDRe.MatchString(r.ExternalID)) {
			add(where+".external_id", "%s: external_id must be 2 to 1224 letters, digits or +=,.@:/-", where)
		}
		if r.SessionName != "" && !awsSessionNameRe.MatchString(r.SessionName) {
			add(where, "%s: invalid session_name %q (2 to 64 letters, digits or +=,.@-)", where, r.SessionName)
		}
	}
	for name, ep := range map[string]string{"acm": a.Endpoints.ACM, "route53": a.Endpoints.Route53, "sts": a.Endpoints.STS,
		"iam": a.Endpoints.IAM, "elbv2": a.Endpoints.ELBv2, "elb": a.Endpoints.ELB, "cloudfront": a.Endpoints.CloudFront, "apigateway": a.Endpoints.APIGateway} {
		if ep == "" {
			continue
		}
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add("endpoints."+name, "endpoints: %s: invalid url %q (want e.g. https://acm.eu-west-1.amazonaws.com)", name, ep)
		}
	}
	if _, err := discovery.NewFilter(a.Route53Zones, nil); err != nil {
		add("route53_zones", "route53_zones: %v", err)
	}
	for glob := range a.Route53Resolvers {
		if _, err := discovery.NewFilter([]string{glob}, nil); err != nil {
			add("route53_resolvers", "route53_resolvers: %v", err)
		}
	}
	for glob, labels := range a.Route53Labels {
		if _, err := discovery.NewFilter([]string{glob}, nil); err != nil {
			add("route53_labels", "route53_labels: %v", err)
		}
		if len(labels) == 0 {
			add("route53_labels."+glob, "route53_labels: %s: no labels", glob)
		}
	}
	if err := checkFilter("aws", "aws: ", a.Include, a.Exclude); err != nil {
		errs = append(errs, err)
	}
	if a.Route53RateLimit <= 0 {
		add("route53_rate_limit", "route53_rate_limit must be positive, got %g", a.Route53RateLimit)
	}
	if a.ACMRateLimit <= 0 {
		add("acm_rate_limit", "acm_rate_limit must be positive, got %g", a.ACMRateLimit)
	}
	if a.ACMConcurrency < 1 {
		add("acm_concurrency", "acm_concurrency must be at least 1, got %d", a.ACMConcurrency)
	}
	if a.MaxAttempts < 1 || a.MaxAttempts > 20 {
		add("max_attempts", "max_attempts must be 1 to 20, got %d", a.MaxAttempts)
	}
	if a.Timeout <= 0 {
		add("timeout", "timeout must be positive, got %v", a.Timeout)
	}
	if a.RenewalMargin <= 0 || a.RenewalMargin >= Duration(acmRenewalWindow) {
		add("renewal_margin", "renewal_margin must be more than 0 and less than the 60 days before expiry at which ACM starts renewing, got %v", a.RenewalMargin)
	}
	return errs
}

// ZoneGlobs returns the keys of a glob-keyed map, most specific (longest)
// first, then in lexical order: the order in which they are tried.
func ZoneGlobs[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	return out
}

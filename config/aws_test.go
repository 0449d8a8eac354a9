package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/config"
)

func TestDecodeAWS(t *testing.T) {
	c, err := config.Decode(strings.NewReader(`
aws:
  route53: true
  acm: true
  regions: [eu-west-1, us-east-1]
  roles:
    - arn: arn:aws:iam::123456789012:role/certwatch
      external_id: ext-1234
      session_name: certwatch-prod
    - arn: arn:aws-us-gov:iam::210987654321:role/path/certwatch
  endpoints:
    acm: https://vpce-1.acm.eu-west-1.vpce.amazonaws.com
    sts: http://127.0.0.1:4566
  route53_zones: ["*.internal.example"]
  route53_resolvers: {"*.vpc1.internal.example": "10.1.0.2:53"}
  route53_labels: {"payments.internal.example": {team: payments}}
  skip_consumers: true
  exclude: ["legacy.*"]
  route53_rate_limit: 2
  timeout: 30s
  renewal_margin: 21d
`))
	if err != nil {
		t.Fatal(err)
	}
	want := config.AWS{
		Route53: true, ACM: true,
		Regions: []string{"eu-west-1", "us-east-1"},
		Roles: []config.AWSRole{
			{ARN: "arn:aws:iam::123456789012:role/certwatch", ExternalID: "ext-1234", SessionName: "certwatch-prod"},
			{ARN: "arn:aws-us-gov:iam::210987654321:role/path/certwatch"},
		},
		Endpoints:        config.AWSEndpoints{ACM: "https://vpce-1.acm.eu-west-1.vpce.amazonaws.com", STS: "http://127.0.0.1:4566"},
		Route53Zones:     []string{"*.internal.example"},
		Route53Resolvers: map[string]config.HostPort{"*.vpc1.internal.example": "10.1.0.2:53"},
		Route53Labels:    map[string]map[string]string{"payments.internal.example": {"team": "payments"}},
		SkipConsumers:    true,
		Exclude:          []string{"legacy.*"},
		Route53RateLimit: 2,
		ACMRateLimit:     config.DefaultACMRateLimit,
		ACMConcurrency:   config.DefaultACMConcurrency,
		MaxAttempts:      config.DefaultAWSMaxAttempts,
		Timeout:          config.Duration(30 * time.Second),
		RenewalMargin:    config.Duration(21 * 24 * time.Hour),
	}
	if diff := cmp.Diff(want, c.AWS); diff != "" {
		t.Errorf("aws (-want +got):\n%s", diff)
	}
}

func TestAWSDefaults(t *testing.T) {
	c, err := config.Decode(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.AWS; a.Route53 || a.ACM || a.Route53RateLimit != 4 || a.ACMRateLimit != 5 ||
		a.MaxAttempts != 10 || time.Duration(a.Timeout) != 2*time.Minute || time.Duration(a.RenewalMargin) != 30*24*time.Hour {
		t.Errorf("aws defaults = %+v", a)
	}
}

func TestDecodeAWSErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"acm needs regions", "aws: {acm: true}\n", []string{"aws: regions: at least one region is required when acm is enabled"}},
		{"bad region", "aws: {regions: [eu-west1, EU-WEST-1]}\n", []string{`invalid region "eu-west1"`, `invalid region "EU-WEST-1"`}},
		{"region twice", "aws: {regions: [eu-west-1, eu-west-1]}\n", []string{"eu-west-1 listed twice"}},
		{"bad role arn", "aws: {roles: [{arn: 'arn:aws:iam::12345:user/x'}]}\n", []string{"roles[0]: invalid role arn"}},
		{"role twice", "aws: {roles: [{arn: 'arn:aws:iam::123456789012:role/a'}, {arn: 'arn:aws:iam::123456789012:role/a'}]}\n", []string{"roles[1]: role arn:aws:iam::123456789012:role/a listed twice"}},
		{"bad session name", "aws: {roles: [{arn: 'arn:aws:iam::123456789012:role/a', session_name: 'has space'}]}\n", []string{"invalid session_name"}},
		{"bad external id", "aws: {roles: [{arn: 'arn:aws:iam::123456789012:role/a', external_id: 'x'}]}\n", []string{"external_id must be 2 to 1224"}},
		{"bad endpoint", "aws: {endpoints: {route53: 'route53.amazonaws.com'}}\n", []string{"endpoints: route53: invalid url"}},
		{"bad rate limit", "aws: {route53_rate_limit: -1, acm_rate_limit: -2}\n", []string{"route53_rate_limit must be positive", "acm_rate_limit must be positive"}},
		{"bad attempts", "aws: {max_attempts: 50}\n", []string{"max_attempts must be 1 to 20"}},
		{"empty pattern", "aws: {include: ['']}\n", []string{"aws: include: empty name pattern"}},
		{"renewal margin beyond ACM's window", "aws: {renewal_margin: 60d}\n", []string{"renewal_margin must be more than 0 and less than the 60 days"}},
		{"bad zone resolver", "aws: {route53_resolvers: {'': '10.0.0.2:53', 'a.example': 'nope'}}\n", []string{"route53_resolvers: include: empty name pattern", "want HOST:PORT"}},
		{"labels without labels", "aws: {route53_labels: {a.example: {}}}\n", []string{"route53_labels: a.example: no labels"}},
		{"unknown key", "aws:\n  regoins: [eu-west-1]\n", []string{"line 2", "regoins"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Decode(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("Decode(%q) = nil error, want one mentioning %q", tt.yaml, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Decode error = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

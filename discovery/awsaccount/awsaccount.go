// Package awsaccount builds the AWS SDK configuration for one account: the
// default credential chain or an assumed role, a retryer with exponential
// backoff and full jitter, and helpers shared by the Route 53 and ACM
// sources (client-side rate limiting of every attempt, account IDs from
// ARNs, actionable error hints).
//
// Endpoint overrides are the SDK's own: AWS_ENDPOINT_URL and the
// per-service AWS_ENDPOINT_URL_ACM, AWS_ENDPOINT_URL_ROUTE_53 and
// AWS_ENDPOINT_URL_STS are honoured by every client built from the returned
// aws.Config; an endpoint given in code (Config.STSEndpoint, or the
// sources' Endpoint) wins over them.
package awsaccount

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
)

// Defaults used when Config fields are zero.
const (
	DefaultMaxAttempts = 10
	DefaultMaxBackoff  = 20 * time.Second
	DefaultSessionName = "certwatch"
)

// Role is an IAM role to assume.
type Role struct {
	// ARN is the role, e.g. arn:aws:iam::123456789012:role/certwatch.
	ARN string
	// ExternalID is sent with sts:AssumeRole when set.
	ExternalID string
	// SessionName names the session; empty means DefaultSessionName.
	SessionName string
	// Duration is the session lifetime; zero means the SDK default (15m).
	// Sessions are refreshed before they expire.
	Duration time.Duration
}

// Config says how to reach one account.
type Config struct {
	// Region is the default region of the returned config and the region
	// STS is called in. Empty means the SDK's (AWS_REGION, shared config),
	// or us-east-1 when that is empty too.
	Region string
	// Role, when ARN is set, is assumed with the default credentials;
	// every call made with the returned config uses the role's session.
	Role Role
	// STSEndpoint overrides the STS endpoint used to assume Role.
	STSEndpoint string
	// MaxAttempts is how often one API call is tried. Zero means
	// DefaultMaxAttempts.
	MaxAttempts int
	// MaxBackoff caps the delay between attempts (exponential with full
	// jitter; throttling errors start at 1s). Zero means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// HTTPClient, when set, sends every request.
	HTTPClient *http.Client
}

// Label names the account for humans: the account ID of Role.ARN, or ""
// for the default credentials (whose account is not looked up, so no
// sts:GetCallerIdentity permission is needed).
func (c Config) Label() string {
	return AccountID(c.Role.ARN)
}

// Load builds the SDK configuration for c: the default credential chain
// (environment, shared config and credentials files, SSO, web identity,
// container and instance roles), wrapped in an assumed-role session when
// c.Role.ARN is set.
//
// The retryer is the SDK's standard one with c.MaxAttempts and exponential
// backoff with full jitter; its retry quota is disabled because callers
// rate-limit every attempt (see LimitAttempts), so a throttled run slows
// down instead of failing. Load does no network I/O: credentials are
// fetched on first use.
func Load(ctx context.Context, c Config) (aws.Config, error) {
	maxAttempts := c.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	maxBackoff := c.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				o.MaxBackoff = maxBackoff
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if c.Region != "" {
		opts = append(opts, awsconfig.WithRegion(c.Region))
	}
	if c.HTTPClient != nil {
		opts = append(opts, awsconfig.WithHTTPClient(c.HTTPClient))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if c.Role.ARN == "" {
		return cfg, nil
	}
	stsClient := sts.NewFromConfig(cfg, func(o *sts.Options) {
		if c.STSEndpoint != "" {
			o.BaseEndpoint = aws.String(c.STSEndpoint)
		}
	})
	provider := stscreds.NewAssumeRoleProvider(stsClient, c.Role.ARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = c.Role.SessionName
		if o.RoleSessionName == "" {
			o.RoleSessionName = DefaultSessionName
		}
		if c.Role.ExternalID != "" {
			o.ExternalID = aws.String(c.Role.ExternalID)
		}
		if c.Role.Duration > 0 {
			o.Duration = c.Role.Duration
		}
	})
	cfg.Credentials = aws.NewCredentialsCache(provider)
	return cfg, nil
}

// AccountID returns the account ID in an ARN
// ("arn:aws:iam::123456789012:role/x" gives "123456789012"), or "" when s
// is not an ARN or has no account.
func AccountID(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" {
		return ""
	}
	return parts[4]
}

// LimitAttempts returns an SDK API option that makes every attempt of every
// operation (the first try and each retry) wait for l before it is signed
// and sent. Add it to a client's APIOptions; share l between the clients
// whose calls count against the same AWS quota.
func LimitAttempts(l *rate.Limiter) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Insert(limitAttempt{l}, "Retry", middleware.After)
	}
}

type limitAttempt struct{ l *rate.Limiter }

func (limitAttempt) ID() string { return "certwatch.RateLimit" }

func (m limitAttempt) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if err := m.l.Wait(ctx); err != nil {
		return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("wait for rate limit: %w", err)
	}
	return next.HandleFinalize(ctx, in)
}

// Hint says what an operator can do about err from an AWS call that needs
// the IAM action action (e.g. "acm:ListCertificates"), or "" when there is
// nothing specific to say.
func Hint(err error, action string) string {
	msg := err.Error()
	if strings.Contains(msg, "operation error STS: AssumeRole") {
		// The credentials failed, not the call: naming action would mislead.
		return "check that the role exists and its trust policy lets these credentials call sts:AssumeRole (with this external id)"
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError":
			return "grant " + action + " to the credentials certwatch uses"
		case "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch",
			"InvalidSignatureException", "IncompleteSignature", "MissingAuthenticationToken",
			"ExpiredToken", "ExpiredTokenException":
			return "check the AWS credentials (environment, shared config, instance or task role)"
		case "Throttling", "ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded":
			return "the API kept throttling: lower the rate limit or share the account's quota with fewer tools"
		}
	}
	if strings.Contains(msg, "failed to refresh cached credentials") ||
		strings.Contains(msg, "failed to retrieve credentials") ||
		strings.Contains(msg, "no EC2 IMDS role found") {
		return "no usable AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID, or run with an instance or task role"
	}
	return ""
}

// WithHint appends Hint(err, action) to err's message, keeping err
// matchable with errors.Is and errors.As.
func WithHint(err error, action string) error {
	h := Hint(err, action)
	if h == "" {
		return err
	}
	return &hinted{err: err, hint: h}
}

type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + " (hint: " + h.hint + ")" }
func (h *hinted) Unwrap() error { return h.err }

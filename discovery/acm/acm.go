// Package acm inventories AWS Certificate Manager: every certificate of
// every key type in every configured region of one account, with what
// renewal-aware policy needs (type, status, InUseBy, renewal eligibility
// and summary, DNS validation records).
//
// ListCertificates returns only RSA_2048 certificates unless its
// Includes.KeyTypes filter lists other key types, and no ACME-issued ones
// unless CertificateKeyPairOrigins asks for them; the Source asks for every
// key type and origin the SDK knows. Each certificate is then described
// with DescribeCertificate and, once issued, fetched with GetCertificate
// (the public certificate only) for its fingerprint, a bounded number at a
// time. Every attempt
// (retries included) waits for a per-region rate limiter.
package acm

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
	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/acm/types"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
)

// Defaults used when Config fields are zero.
const (
	DefaultRateLimit   = 5
	DefaultConcurrency = 4
	DefaultTimeout     = 2 * time.Minute
	// DefaultPageSize is ListCertificates' maximum MaxItems.
	DefaultPageSize = 1000
)

// Config configures a Source for one account.
type Config struct {
	// Regions to inventory; at least one.
	Regions []string
	// Account labels the source ("acm:<account>"); empty means "acm". For
	// an assumed role use awsaccount.Config.Label.
	Account string
	// Endpoint overrides the ACM endpoint (a VPC interface endpoint or an
	// emulator) in every region; empty means the SDK's resolution, which
	// honours AWS_ENDPOINT_URL_ACM and AWS_ENDPOINT_URL.
	Endpoint string
	// RateLimit is requests per second per region, retries included (ACM
	// quotas are per account and region). Zero means DefaultRateLimit.
	RateLimit float64
	// Concurrency is DescribeCertificate calls in flight per region. Zero
	// means DefaultConcurrency.
	Concurrency int
	// Timeout bounds one API call with its retries. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// PageSize is ListCertificates' MaxItems. Zero means DefaultPageSize.
	PageSize int32
}

// Source lists ACM certificates. Its methods are safe for concurrent use.
type Source struct {
	c       Config
	logger  *slog.Logger
	regions []region

	mu   sync.Mutex
	last []acmcert.Certificate // what the last Discover yielded
}

type region struct {
	name   string
	client *acm.Client
}

// New returns a Source for the account whose credentials cfg holds (see
// awsaccount.Load). Each region gets its own client and rate limiter. New
// does no I/O.
func New(c Config, cfg aws.Config, logger *slog.Logger) (*Source, error) {
	if len(c.Regions) == 0 {
		return nil, errors.New("acm: no regions configured (hint: set aws.regions or --region)")
	}
	if c.RateLimit <= 0 {
		c.RateLimit = DefaultRateLimit
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PageSize <= 0 {
		c.PageSize = DefaultPageSize
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Source{c: c, logger: logger.With("component", "acm")}
	for _, name := range c.Regions {
		limiter := rate.NewLimiter(rate.Limit(c.RateLimit), 1)
		client := acm.NewFromConfig(cfg, func(o *acm.Options) {
			o.Region = name
			if c.Endpoint != "" {
				o.BaseEndpoint = aws.String(c.Endpoint)
			}
			o.APIOptions = append(slices.Clip(o.APIOptions), awsaccount.LimitAttempts(limiter))
		})
		s.regions = append(s.regions, region{name: name, client: client})
	}
	return s, nil
}

// Name is "acm", or "acm:<account>" when Config.Account is set.
func (s *Source) Name() string {
	if s.c.Account == "" {
		return "acm"
	}
	return "acm:" + s.c.Account
}

// Discover yields the certificates (see Certificates). A region that
// cannot be listed keeps the certificates the previous Discover found
// there, and a Discover cut short by ctx the whole previous inventory, as
// a failed source keeps its last good targets in the daemon; the error
// says what failed either way.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	certs, err := s.Certificates(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		return found.Yield{Inventory: found.Inventory{ACM: s.last}}, err
	}
	for _, re := range regionErrors(err) {
		if re.Op != acmcert.OpList {
			continue // described ones are returned (Partial); nothing to keep
		}
		for _, c := range s.last {
			if c.Region == re.Region && (re.Account == "" || c.Account == re.Account) {
				certs = append(certs, c)
			}
		}
	}
	s.last = certs
	return found.Yield{Inventory: found.Inventory{ACM: certs}}, err
}

// regionErrors returns every *acmcert.RegionError in err's tree.
func regionErrors(err error) []*acmcert.RegionError {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*acmcert.RegionError
		for _, e := range j.Unwrap() {
			out = append(out, regionErrors(e)...)
		}
		return out
	}
	var re *acmcert.RegionError
	if errors.As(err, &re) {
		return []*acmcert.RegionError{re}
	}
	return nil
}

// Certificates lists and describes every certificate in every region,
// sorted by region, then ARN. A region that fails does not stop the
// others: the certificates found are returned with an error joining one
// *acmcert.RegionError per failed region (match with errors.As on each of
// errors.Join's members, or read the message, which names the region, the
// account and what permission to grant). A certificate that could not be
// described is returned from its ListCertificates summary with Partial
// set. Cancelling ctx stops the listing and returns ctx's error.
func (s *Source) Certificates(ctx context.Context) ([]acmcert.Certificate, error) {
	results := make([][]acmcert.Certificate, len(s.regions))
	errs := make([]error, len(s.regions))
	var g errgroup.Group
	for i, r := range s.regions {
		g.Go(func() error {
			results[i], errs[i] = s.region(ctx, r)
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acm inventory: %w", context.Cause(ctx))
	}
	var out []acmcert.Certificate
	for _, r := range results {
		out = append(out, r...)
	}
	slices.SortFunc(out, func(a, b acmcert.Certificate) int {
		return cmp.Or(strings.Compare(a.Region, b.Region), strings.Compare(a.ARN, b.ARN))
	})
	return out, errors.Join(errs...)
}

// keyTypes are every key algorithm the SDK knows. Without them
// ListCertificates lists only RSA_2048 certificates.
var keyTypes = types.KeyAlgorithm("").Values()

// keyPairOrigins are every key pair origin the SDK knows. Without them
// ListCertificates leaves out ACME-issued certificates.
var keyPairOrigins = types.CertificateKeyPairOrigin("").Values()

func (s *Source) region(ctx context.Context, r region) ([]acmcert.Certificate, error) {
	start := time.Now()
	var summaries []types.CertificateSummary
	p := acm.NewListCertificatesPaginator(r.client, &acm.ListCertificatesInput{
		Includes:                  &types.Filters{KeyTypes: keyTypes},
		CertificateKeyPairOrigins: keyPairOrigins,
		MaxItems:                  aws.Int32(s.c.PageSize),
	})
	for p.HasMorePages() {
		page, err := withTimeout(ctx, s, r.name, func(ctx context.Context) (*acm.ListCertificatesOutput, error) {
			return p.NextPage(ctx)
		})
		if err != nil {
			return nil, &acmcert.RegionError{Account: s.c.Account, Region: r.name, Op: acmcert.OpList,
				Err: awsaccount.WithHint(err, "acm:ListCertificates")}
		}
		summaries = append(summaries, page.CertificateSummaryList...)
	}

	certs := make([]acmcert.Certificate, len(summaries))
	keep := make([]bool, len(summaries))
	var (
		mu                sync.Mutex
		failed, getFailed int
		first, firstGet   error
	)
	var g errgroup.Group
	g.SetLimit(s.c.Concurrency)
	for i := range summaries {
		sum := &summaries[i]
		g.Go(func() error {
			out, err := withTimeout(ctx, s, r.name, func(ctx context.Context) (*acm.DescribeCertificateOutput, error) {
				return r.client.DescribeCertificate(ctx, &acm.DescribeCertificateInput{CertificateArn: sum.CertificateArn})
			})
			var notFound *types.ResourceNotFoundException
			switch {
			case errors.As(err, &notFound):
				// Deleted since it was listed: nothing to watch.
				s.logger.Debug("certificate vanished", "region", r.name, "arn", aws.ToString(sum.CertificateArn))
			case err != nil || out.Certificate == nil:
				if err == nil {
					err = errors.New("empty DescribeCertificate response")
				}
				certs[i], keep[i] = fromSummary(r.name, sum), true
				mu.Lock()
				failed++
				if first == nil {
					first = fmt.Errorf("%s: %w", aws.ToString(sum.CertificateArn), awsaccount.WithHint(err, "acm:DescribeCertificate"))
				}
				mu.Unlock()
			default:
				c := fromDetail(r.name, out.Certificate)
				if err := s.fetch(ctx, r, &c); err != nil {
					mu.Lock()
					getFailed++
					if firstGet == nil {
						firstGet = err
					}
					mu.Unlock()
				}
				certs[i], keep[i] = c, true
			}
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
	var out []acmcert.Certificate
	for i, c := range certs {
		if keep[i] {
			out = append(out, c)
		}
	}
	s.logger.Debug("region inventoried", "region", r.name, "certificates", len(out),
		"describe_failed", failed, "duration", time.Since(start))
	var errs []error
	if failed > 0 {
		errs = append(errs, &acmcert.RegionError{Account: s.c.Account, Region: r.name, Op: acmcert.OpDescribe, Failed: failed, Err: first})
	}
	if getFailed > 0 {
		errs = append(errs, &acmcert.RegionError{Account: s.c.Account, Region: r.name, Op: acmcert.OpGet, Failed: getFailed, Err: firstGet})
	}
	return out, errors.Join(errs...)
}

// fetch sets c.Fingerprint from the PEM GetCertificate returns for an
// issued (or expired) certificate. A certificate ACM has no PEM for (not
// issued, or deleted meanwhile) is no failure.
func (s *Source) fetch(ctx context.Context, r region, c *acmcert.Certificate) error {
	if c.Status != acmcert.StatusIssued && c.Status != acmcert.StatusExpired {
		return nil
	}
	out, err := withTimeout(ctx, s, r.name, func(ctx context.Context) (*acm.GetCertificateOutput, error) {
		return r.client.GetCertificate(ctx, &acm.GetCertificateInput{CertificateArn: aws.String(c.ARN)})
	})
	var notFound *types.ResourceNotFoundException
	var inProgress *types.RequestInProgressException
	switch {
	case errors.As(err, &notFound), errors.As(err, &inProgress):
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", c.ARN, awsaccount.WithHint(err, "acm:GetCertificate"))
	}
	c.Fingerprint = fingerprint(aws.ToString(out.Certificate))
	return nil
}

// withTimeout runs one API call (with the SDK's retries) under the
// per-call timeout.
func withTimeout[T any](ctx context.Context, s *Source, regionName string, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.c.Timeout,
		fmt.Errorf("acm call in %s took longer than the %v timeout", regionName, s.c.Timeout))
	defer cancel()
	return f(ctx)
}

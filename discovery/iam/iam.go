// Package iam inventories the IAM server certificates of one account: the
// certificates classic load balancers, ALBs and CloudFront still use
// outside ACM, which nothing renews and no AWS-native alert covers.
//
// ListServerCertificates (Marker/IsTruncated pagination) lists them; each
// is fetched with GetServerCertificate, a bounded number at a time, for its
// PEM: serial number, names, validity and fingerprint, so served
// certificates are linked to it as to ACM's. IAM is global: requests are
// signed for us-east-1. Every attempt (retries included) waits for the
// Source's rate limiter.
package iam

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/iam/types"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
)

// Defaults used when Config fields are zero.
const (
	// DefaultRateLimit stays well below IAM's per-account quotas.
	DefaultRateLimit   = 5
	DefaultConcurrency = 4
	DefaultTimeout     = 2 * time.Minute
	// DefaultPageSize is ListServerCertificates' maximum MaxItems.
	DefaultPageSize = 1000
)

// Config configures a Source for one account.
type Config struct {
	// Account labels the source ("iam:<account>"); empty means "iam".
	Account string
	// Endpoint overrides the IAM endpoint; empty means the SDK's
	// resolution, which honours AWS_ENDPOINT_URL_IAM and AWS_ENDPOINT_URL.
	Endpoint string
	// RateLimit is requests per second, retries included. Zero means
	// DefaultRateLimit.
	RateLimit float64
	// Concurrency is GetServerCertificate calls in flight. Zero means
	// DefaultConcurrency.
	Concurrency int
	// Timeout bounds one API call with its retries. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// PageSize is ListServerCertificates' MaxItems. Zero means
	// DefaultPageSize.
	PageSize int32
}

// Source lists IAM server certificates. Its methods are safe for
// concurrent use.
type Source struct {
	c      Config
	client *iam.Client
	logger *slog.Logger

	mu   sync.Mutex
	last []iamcert.Certificate // what the last Discover yielded
}

// New returns a Source for the account whose credentials cfg holds (see
// awsaccount.Load). New does no I/O.
func New(c Config, cfg aws.Config, logger *slog.Logger) *Source {
	c.RateLimit = cmp.Or(c.RateLimit, DefaultRateLimit)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	limiter := rate.NewLimiter(rate.Limit(c.RateLimit), 1)
	s := &Source{c: c, logger: logger.With("component", "iam")}
	s.client = iam.NewFromConfig(cfg, func(o *iam.Options) {
		o.Region = "us-east-1"
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.APIOptions = append(slices.Clip(o.APIOptions), awsaccount.LimitAttempts(limiter))
	})
	return s
}

// Name is "iam", or "iam:<account>" when Config.Account is set.
func (s *Source) Name() string {
	if s.c.Account == "" {
		return "iam"
	}
	return "iam:" + s.c.Account
}

// Discover yields the server certificates (see ServerCertificates). A
// listing that fails keeps the certificates the previous Discover found;
// the error says so.
func (s *Source) Discover(ctx context.Context) (found.Yield, error) {
	certs, err := s.ServerCertificates(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	var ie *iamcert.Error
	if err == nil || !errors.As(err, &ie) || ie.Op != iamcert.OpList {
		s.last = certs
	}
	return found.Yield{Inventory: found.Inventory{IAM: s.last}}, err
}

// ServerCertificates lists and fetches every server certificate, sorted
// by ARN. If they cannot be listed it returns an *iamcert.Error naming the
// account and the action to grant. A certificate that could not be fetched
// is returned from its metadata with Partial set, with an *iamcert.Error
// joining the count. Cancelling ctx stops the inventory and returns ctx's
// error.
func (s *Source) ServerCertificates(ctx context.Context) ([]iamcert.Certificate, error) {
	start := time.Now()
	var metas []types.ServerCertificateMetadata
	p := iam.NewListServerCertificatesPaginator(s.client, &iam.ListServerCertificatesInput{MaxItems: aws.Int32(s.c.PageSize)})
	for p.HasMorePages() {
		page, err := withTimeout(ctx, s, func(ctx context.Context) (*iam.ListServerCertificatesOutput, error) { return p.NextPage(ctx) })
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("iam inventory: %w", context.Cause(ctx))
			}
			return nil, &iamcert.Error{Account: s.c.Account, Op: iamcert.OpList, Err: awsaccount.WithHint(err, "iam:ListServerCertificates")}
		}
		metas = append(metas, page.ServerCertificateMetadataList...)
	}
	out := make([]iamcert.Certificate, len(metas))
	var (
		mu     sync.Mutex
		failed int
		first  error
	)
	var g errgroup.Group
	g.SetLimit(s.c.Concurrency)
	for i := range metas {
		g.Go(func() error {
			m := &metas[i]
			out[i] = fromMetadata(m)
			res, err := withTimeout(ctx, s, func(ctx context.Context) (*iam.GetServerCertificateOutput, error) {
				return s.client.GetServerCertificate(ctx, &iam.GetServerCertificateInput{ServerCertificateName: m.ServerCertificateName})
			})
			if err == nil && res.ServerCertificate != nil {
				err = setPEM(&out[i], aws.ToString(res.ServerCertificate.CertificateBody))
			} else if err == nil {
				err = errors.New("empty GetServerCertificate response")
			}
			if err != nil {
				mu.Lock()
				failed++
				if first == nil {
					first = fmt.Errorf("%s: %w", out[i].ARN, awsaccount.WithHint(err, "iam:GetServerCertificate"))
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // every func returns nil
	if ctx.Err() != nil {
		return nil, fmt.Errorf("iam inventory: %w", context.Cause(ctx))
	}
	slices.SortFunc(out, func(a, b iamcert.Certificate) int { return strings.Compare(a.ARN, b.ARN) })
	s.logger.Debug("server certificates inventoried", "certificates", len(out), "get_failed", failed, "duration", time.Since(start))
	if failed > 0 {
		return out, &iamcert.Error{Account: s.c.Account, Op: iamcert.OpGet, Failed: failed, Err: first}
	}
	return out, nil
}

// withTimeout runs one API call (with the SDK's retries) under the
// per-call timeout.
func withTimeout[T any](ctx context.Context, s *Source, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.c.Timeout, fmt.Errorf("iam call took longer than the %v timeout", s.c.Timeout))
	defer cancel()
	return f(ctx)
}

func fromMetadata(m *types.ServerCertificateMetadata) iamcert.Certificate {
	c := iamcert.Certificate{
		ARN: aws.ToString(m.Arn), ID: aws.ToString(m.ServerCertificateId), Name: aws.ToString(m.ServerCertificateName),
		Path: aws.ToString(m.Path), Partial: true,
	}
	c.Account = awsaccount.AccountID(c.ARN)
	if m.UploadDate != nil {
		c.UploadedAt = m.UploadDate.UTC()
	}
	if m.Expiration != nil {
		c.Expiration = m.Expiration.UTC()
		c.NotAfter = c.Expiration
	}
	return c
}

// setPEM fills what the certificate body says.
func setPEM(c *iamcert.Certificate, body string) error {
	b, _ := pem.Decode([]byte(body))
	if b == nil || b.Type != "CERTIFICATE" {
		return errors.New("certificate body is not a PEM certificate")
	}
	x, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return fmt.Errorf("parse certificate body: %w", err)
	}
	sum := sha256.Sum256(b.Bytes)
	c.Fingerprint = hex.EncodeToString(sum[:])
	c.Serial = x.SerialNumber.Text(16)
	c.Subject, c.Issuer = x.Subject.CommonName, x.Issuer.CommonName
	for _, n := range x.DNSNames {
		c.DNSNames = append(c.DNSNames, discovery.NormalizeName(n))
	}
	c.NotBefore, c.NotAfter = x.NotBefore.UTC(), x.NotAfter.UTC()
	c.Partial = false
	return nil
}

package awsaccount_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/smithy-go"
	"golang.org/x/time/rate"

	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/internal/awstest"
)

// memACM answers ACM calls in memory: the first throttle calls with
// ThrottlingException, the rest with an empty certificate list. It lets the
// rate limiter and retryer run on synctest's fake clock.
type memACM struct {
	mu       sync.Mutex
	throttle int
	calls    int
}

func (m *memACM) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	m.mu.Lock()
	m.calls++
	status, body := 200, `{"CertificateSummaryList":[]}`
	if m.throttle > 0 {
		m.throttle--
		status, body = 400, `{"__type":"ThrottlingException","message":"Rate exceeded"}`
	}
	m.mu.Unlock()
	return &http.Response{
		StatusCode: status,
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.1"}},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    r,
	}, nil
}

func TestLimitAttemptsCoversRetries(t *testing.T) {
	awstest.Isolate(t)
	tests := []struct {
		name      string
		calls     int
		throttle  int
		attempts  int
		minElapse time.Duration
	}{
		// 2 requests per second with a burst of 1: the first attempt goes at
		// once, every later one waits half a second.
		{"sequential calls", 5, 0, 5, 2 * time.Second},
		{"retries of a throttled call", 1, 3, 4, 1500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := &memACM{throttle: tt.throttle}
				cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{
					Region: "eu-west-1", MaxBackoff: time.Millisecond, HTTPClient: &http.Client{Transport: mem}})
				if err != nil {
					t.Fatal(err)
				}
				limiter := rate.NewLimiter(2, 1)
				client := acm.NewFromConfig(cfg, func(o *acm.Options) {
					o.BaseEndpoint = aws.String("http://acm.invalid")
					o.APIOptions = append(o.APIOptions, awsaccount.LimitAttempts(limiter))
				})
				start := time.Now()
				for range tt.calls {
					if _, err := client.ListCertificates(context.Background(), &acm.ListCertificatesInput{}); err != nil {
						t.Fatalf("ListCertificates: %v", err)
					}
				}
				elapsed := time.Since(start)
				if mem.calls != tt.attempts {
					t.Errorf("%d attempts, want %d", mem.calls, tt.attempts)
				}
				// The limiter computes delays in float seconds: allow for
				// rounding (1.499999999s for 1.5s). The upper bound leaves
				// a loaded machine room; the lower one is the rate.
				if elapsed < tt.minElapse-time.Millisecond || elapsed > tt.minElapse+4*time.Second {
					t.Errorf("took %v, want about %v at 2 requests/s", elapsed, tt.minElapse)
				}
			})
		})
	}
}

func TestLimitAttemptsStopsOnCancel(t *testing.T) {
	awstest.Isolate(t)
	synctest.Test(t, func(t *testing.T) {
		cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{
			Region: "eu-west-1", HTTPClient: &http.Client{Transport: &memACM{}}})
		if err != nil {
			t.Fatal(err)
		}
		limiter := rate.NewLimiter(rate.Every(time.Hour), 1)
		limiter.Allow() // spend the burst
		client := acm.NewFromConfig(cfg, func(o *acm.Options) {
			o.BaseEndpoint = aws.String("http://acm.invalid")
			o.APIOptions = append(o.APIOptions, awsaccount.LimitAttempts(limiter))
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err = client.ListCertificates(ctx, &acm.ListCertificatesInput{})
		if err == nil || time.Since(start) > time.Second {
			t.Errorf("ListCertificates = %v after %v; want an error within the 1s deadline", err, time.Since(start))
		}
	})
}

func TestAccountID(t *testing.T) {
	for in, want := range map[string]string{
		"arn:aws:iam::123456789012:role/certwatch":                "123456789012",
		"arn:aws:acm:eu-west-1:123456789012:certificate/abc":      "123456789012",
		"arn:aws-us-gov:iam::210987654321:role/path/to/certwatch": "210987654321",
		"arn:aws:s3:::bucket":                                     "",
		"not-an-arn":                                              "",
		"":                                                        "",
		"arn:aws:elasticloadbalancing:eu-west-1:1:loadbalancer/a:b:c": "1",
	} {
		if got := awsaccount.AccountID(in); got != want {
			t.Errorf("AccountID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHint(t *testing.T) {
	api := func(code string) error {
		return fmt.Errorf("operation error ACM: ListCertificates, https response error StatusCode: 400: %w",
			&smithy.GenericAPIError{Code: code, Message: "m"})
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"access denied", api("AccessDeniedException"), "grant acm:ListCertificates"},
		{"route53 access denied", api("AccessDenied"), "grant acm:ListCertificates"},
		{"bad key", api("UnrecognizedClientException"), "check the AWS credentials"},
		{"throttled to the end", api("ThrottlingException"), "lower the rate limit"},
		{"assume role failed", fmt.Errorf("get credentials: failed to refresh cached credentials, operation error STS: AssumeRole, %w", api("AccessDenied")), "trust policy"},
		{"no credentials", errors.New("failed to refresh cached credentials, no EC2 IMDS role found"), "no usable AWS credentials"},
		{"other", errors.New("connection refused"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := awsaccount.Hint(tt.err, "acm:ListCertificates")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("Hint = %q, want one containing %q", got, tt.want)
			}
			wrapped := awsaccount.WithHint(tt.err, "acm:ListCertificates")
			if !errors.Is(wrapped, tt.err) {
				t.Errorf("WithHint lost the cause")
			}
			if tt.want != "" && !strings.Contains(wrapped.Error(), "(hint: "+got+")") {
				t.Errorf("WithHint = %q", wrapped)
			}
		})
	}
}

func TestLoadRegionDefault(t *testing.T) {
	awstest.Isolate(t)
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "us-east-1" {
		t.Errorf("region = %q, want us-east-1 when nothing sets one", cfg.Region)
	}
	t.Setenv("AWS_REGION", "ap-southeast-2")
	if cfg, _ = awsaccount.Load(context.Background(), awsaccount.Config{}); cfg.Region != "ap-southeast-2" {
		t.Errorf("region = %q, want AWS_REGION's", cfg.Region)
	}
	if cfg, _ = awsaccount.Load(context.Background(), awsaccount.Config{Region: "eu-west-1"}); cfg.Region != "eu-west-1" {
		t.Errorf("region = %q, want the configured one", cfg.Region)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != awstest.AccessKeyID {
		t.Errorf("credentials = %q, %v; want the environment's static key", creds.AccessKeyID, err)
	}
}

func TestAssumeRoleThroughSTSEndpointFromEnvironment(t *testing.T) {
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	srv.STS.AddRole(awstest.Role{ARN: "arn:aws:iam::222222222222:role/r", ExternalID: "ext-42"})
	t.Setenv("AWS_ENDPOINT_URL_STS", srv.URL)
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{Region: "eu-west-1",
		Role: awsaccount.Role{ARN: "arn:aws:iam::222222222222:role/r", ExternalID: "ext-42", Duration: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatalf("Retrieve: %v", err)
	}
	sessions := srv.STS.Sessions()
	if len(sessions) != 1 || creds.AccessKeyID != sessions[0].AccessKeyID || creds.SessionToken != sessions[0].SessionToken {
		t.Errorf("credentials %q, sessions %+v", creds.AccessKeyID, sessions)
	}
	r := srv.Requests("sts")[0]
	if r.Region != "eu-west-1" || r.Query.Get("Action") != "" || !strings.Contains(string(r.Body), "DurationSeconds=3600") {
		t.Errorf("AssumeRole request: region %q, body %s", r.Region, r.Body)
	}
}

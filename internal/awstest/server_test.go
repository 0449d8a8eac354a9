package awstest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/smithy-go"

	"github.com/certwatch/certwatch/internal/awstest"
)

func TestSignatureIsVerified(t *testing.T) {
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	srv.Route53.AddZone(awstest.Zone{Name: "example.com"})
	tests := []struct {
		name, key, secret, code string
	}{
		{"known key", awstest.AccessKeyID, awstest.SecretAccessKey, ""},
		{"wrong secret", awstest.AccessKeyID, "not-the-secret", "SignatureDoesNotMatch"},
		{"unknown key", "AKIDUNKNOWN", "x", "InvalidClientTokenId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := route53.New(route53.Options{
				Region:       "us-east-1",
				BaseEndpoint: aws.String(srv.URL),
				Credentials:  credentials.NewStaticCredentialsProvider(tt.key, tt.secret, ""),
			})
			out, err := client.ListHostedZones(context.Background(), &route53.ListHostedZonesInput{})
			var ae smithy.APIError
			switch {
			case tt.code == "" && (err != nil || len(out.HostedZones) != 1):
				t.Errorf("ListHostedZones = %v, %v; want the zone", out, err)
			case tt.code != "" && (!errors.As(err, &ae) || ae.ErrorCode() != tt.code):
				t.Errorf("ListHostedZones error = %v, want %s", err, tt.code)
			}
		})
	}
	reqs := srv.Requests("route53")
	if len(reqs) != 3 || !reqs[0].SignatureValid || reqs[1].SignatureValid || reqs[1].Status != http.StatusForbidden {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestUnsignedRequestIsRefused(t *testing.T) {
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/", strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "CertificateManager.ListCertificates")
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || srv.Requests("acm")[0].Status != http.StatusBadRequest {
		t.Errorf("status %d, want 400 MissingAuthenticationToken", resp.StatusCode)
	}
}

func TestACMErrorsAreTyped(t *testing.T) {
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	client := acm.New(acm.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider(awstest.AccessKeyID, awstest.SecretAccessKey, ""),
	})
	_, err := client.DescribeCertificate(context.Background(), &acm.DescribeCertificateInput{
		CertificateArn: aws.String("arn:aws:acm:eu-west-1:111111111111:certificate/none")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ResourceNotFoundException" {
		t.Errorf("DescribeCertificate(unknown) = %v, want ResourceNotFoundException", err)
	}
	srv.ACM.Throttle(1)
	client = acm.New(acm.Options{
		Region:           "eu-west-1",
		BaseEndpoint:     aws.String(srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider(awstest.AccessKeyID, awstest.SecretAccessKey, ""),
		RetryMaxAttempts: 1,
	})
	if _, err := client.ListCertificates(context.Background(), nil); !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" {
		t.Errorf("throttled ListCertificates = %v, want ThrottlingException", err)
	}
}

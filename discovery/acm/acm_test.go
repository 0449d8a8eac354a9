package acm_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
)

var now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// newSource starts a fake, isolates the SDK from the machine and returns a
// Source pointed at the fake through Config.Endpoint.
func newSource(t *testing.T, c acm.Config, ac awsaccount.Config) (*acm.Source, *awstest.Server) {
	t.Helper()
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	if c.Endpoint == "" {
		c.Endpoint = srv.URL
	}
	if ac.MaxBackoff == 0 {
		ac.MaxBackoff = time.Millisecond
	}
	if c.RateLimit == 0 {
		c.RateLimit = 1000
	}
	cfg, err := awsaccount.Load(context.Background(), ac)
	if err != nil {
		t.Fatal(err)
	}
	s, err := acm.New(c, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, srv
}

func TestCertificatesEveryKeyTypeAndRenewalState(t *testing.T) {
	s, srv := newSource(t, acm.Config{Regions: []string{"eu-west-1"}, PageSize: 3}, awsaccount.Config{})
	srv.ACM.SetPageSize(2)

	keyTypes := []string{"RSA_1024", "RSA_2048", "RSA_3072", "RSA_4096", "EC_prime256v1", "EC_secp384r1", "EC_secp521r1"}
	var fake []awstest.Certificate
	for i, kt := range keyTypes {
		fake = append(fake, awstest.Certificate{
			Region: "eu-west-1", DomainName: kt + ".example.com", KeyAlgorithm: kt,
			Serial:    "0a:0b:" + string(rune('a'+i)) + "0",
			NotBefore: now.AddDate(0, -10, 0), NotAfter: now.AddDate(0, 3, 0),
		})
	}
	validation := func(status string) []awstest.DomainValidation {
		return []awstest.DomainValidation{{
			DomainName: "renew.example.com", ValidationDomain: "renew.example.com",
			ValidationStatus: status, ValidationMethod: "DNS",
			Record: &awstest.ResourceRecord{Name: "_3639ac514e785e898d2646601fa951d5.renew.example.com.", Type: "CNAME",
				Value: "_98d4ae8d6a2b4c1e.mhbtsbpdnt.acm-validations.aws."},
		}}
	}
	for _, st := range []struct{ status, reason, validation string }{
		{"PENDING_AUTO_RENEWAL", "", "SUCCESS"},
		{"PENDING_VALIDATION", "", "PENDING_VALIDATION"},
		{"SUCCESS", "", "SUCCESS"},
		{"FAILED", "CAA_ERROR", "FAILED"},
	} {
		fake = append(fake, awstest.Certificate{
			Region: "eu-west-1", DomainName: "renew.example.com", KeyAlgorithm: "EC_prime256v1",
			Serial: "00:ff", RenewalEligibility: "ELIGIBLE", InUseBy: []string{"arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/1"},
			NotBefore: now.AddDate(0, -11, 0), NotAfter: now.AddDate(0, 0, 20),
			Validations: validation("SUCCESS"),
			Renewal:     &awstest.Renewal{Status: st.status, Reason: st.reason, UpdatedAt: now.AddDate(0, 0, -1), Validations: validation(st.validation)},
		})
	}
	fake = append(fake,
		awstest.Certificate{Region: "eu-west-1", DomainName: "imported.example.com", Type: "IMPORTED", KeyAlgorithm: "RSA_4096",
			Serial: "01:02:03", RenewalEligibility: "INELIGIBLE", NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(0, 0, 5),
			ImportedAt: now.AddDate(-1, 0, 0)},
		awstest.Certificate{Region: "eu-west-1", DomainName: "private.internal.example", Type: "PRIVATE",
			Serial: "7f", RenewalEligibility: "ELIGIBLE", NotBefore: now.AddDate(0, -6, 0), NotAfter: now.AddDate(0, 6, 0)},
		awstest.Certificate{Region: "eu-west-1", DomainName: "acme.example.com", KeyPairOrigin: "ACME",
			Serial: "aa", NotBefore: now, NotAfter: now.AddDate(0, 0, 90)},
		// Another region and another account are not this source's.
		awstest.Certificate{Region: "us-east-1", DomainName: "cdn.example.com"},
		awstest.Certificate{Region: "eu-west-1", Account: "999999999999", DomainName: "other.example.com"},
	)
	arns := srv.ACM.Add(fake...)

	got, err := s.Certificates(context.Background())
	if err != nil {
		t.Fatalf("Certificates: %v", err)
	}
	if len(got) != len(fake)-2 {
		t.Fatalf("got %d certificates, want %d: %+v", len(got), len(fake)-2, got)
	}
	byARN := map[string]acmcert.Certificate{}
	for _, c := range got {
		byARN[c.ARN] = c
	}
	for i, kt := range keyTypes {
		if c := byARN[arns[i]]; c.KeyAlgorithm != kt || c.DomainName != strings.ToLower(kt)+".example.com" {
			t.Errorf("certificate %d: key algorithm %q name %q, want %q", i, c.KeyAlgorithm, c.DomainName, kt)
		}
	}
	wantFailed := acmcert.Certificate{
		ARN: arns[10], Region: "eu-west-1", Account: awstest.DefaultAccount,
		DomainName: "renew.example.com", SubjectAlternativeNames: []string{"renew.example.com"},
		Serial: "ff", NotBefore: now.AddDate(0, -11, 0), NotAfter: now.AddDate(0, 0, 20),
		Type: acmcert.AmazonIssued, Status: acmcert.StatusIssued, KeyAlgorithm: "EC_prime256v1",
		InUseBy:            []string{"arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/1"},
		InUse:              true,
		RenewalEligibility: acmcert.Eligible, RenewalStatus: acmcert.RenewalFailed, RenewalStatusReason: "CAA_ERROR",
		RenewalUpdatedAt: now.AddDate(0, 0, -1),
		Validations: []acmcert.Validation{{DomainName: "renew.example.com", ValidationDomain: "renew.example.com",
			Status: acmcert.ValidationSuccess, Method: "DNS", Record: &acmcert.Record{
				Name: "_3639ac514e785e898d2646601fa951d5.renew.example.com", Type: "CNAME",
				Value: "_98d4ae8d6a2b4c1e.mhbtsbpdnt.acm-validations.aws"}}},
		RenewalValidations: []acmcert.Validation{{DomainName: "renew.example.com", ValidationDomain: "renew.example.com",
			Status: acmcert.ValidationFailed, Method: "DNS", Record: &acmcert.Record{
				Name: "_3639ac514e785e898d2646601fa951d5.renew.example.com", Type: "CNAME",
				Value: "_98d4ae8d6a2b4c1e.mhbtsbpdnt.acm-validations.aws"}}},
	}
	if diff := cmp.Diff(wantFailed, byARN[arns[10]]); diff != "" {
		t.Errorf("FAILED renewal certificate (-want +got):\n%s", diff)
	}
	for i, want := range []acmcert.RenewalStatus{acmcert.RenewalPendingAutoRenewal, acmcert.RenewalPendingValidation, acmcert.RenewalSuccess, acmcert.RenewalFailed} {
		if got := byARN[arns[7+i]].RenewalStatus; got != want {
			t.Errorf("renewal status of certificate %d = %q, want %q", 7+i, got, want)
		}
	}
	imported := byARN[arns[11]]
	if imported.Type != acmcert.Imported || imported.RenewalEligibility != acmcert.Ineligible || imported.Serial != "10203" ||
		!imported.ImportedAt.Equal(now.AddDate(-1, 0, 0)) || imported.KeyAlgorithm != "RSA_4096" {
		t.Errorf("imported certificate = %+v", imported)
	}
	if p := byARN[arns[12]]; p.Type != acmcert.Private {
		t.Errorf("private certificate type = %q", p.Type)
	}
	if _, ok := byARN[arns[13]]; !ok {
		t.Errorf("ACME-issued certificate not listed")
	}

	// What AWS saw: every page asked for every key type and origin, with
	// the pagination token of the previous page.
	var lists int
	var tokens []string
	for _, r := range srv.Requests("acm") {
		if !r.SignatureValid || r.AccessKeyID != awstest.AccessKeyID || r.Region != "eu-west-1" {
			t.Errorf("request %s: signed %v by %q in %q", r.Operation, r.SignatureValid, r.AccessKeyID, r.Region)
		}
		if got := r.Header.Get("X-Amz-Target"); got != "CertificateManager."+r.Operation {
			t.Errorf("X-Amz-Target = %q for %s", got, r.Operation)
		}
		if r.Operation != "ListCertificates" {
			continue
		}
		lists++
		var body struct {
			Includes                  map[string][]string
			CertificateKeyPairOrigins []string
			NextToken                 string
			MaxItems                  int
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if got := body.Includes["keyTypes"]; !sameSet(got, keyTypes) {
			t.Errorf("ListCertificates Includes.keyTypes = %v, want all of %v (body %s)", got, keyTypes, r.Body)
		}
		if got := body.CertificateKeyPairOrigins; !sameSet(got, []string{"AWS_MANAGED", "CUSTOMER_PROVIDED", "ACME"}) {
			t.Errorf("ListCertificates CertificateKeyPairOrigins = %v", got)
		}
		if body.MaxItems != 3 {
			t.Errorf("MaxItems = %d, want 3", body.MaxItems)
		}
		tokens = append(tokens, body.NextToken)
	}
	if want := []string{"", "next-2", "next-4", "next-6", "next-8", "next-10", "next-12"}; !slices.Equal(tokens, want) {
		t.Errorf("%d ListCertificates pages with tokens %q, want %q", lists, tokens, want)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

func TestThrottledRunCompletes(t *testing.T) {
	s, srv := newSource(t, acm.Config{Regions: []string{"eu-west-1"}, Concurrency: 2}, awsaccount.Config{})
	for range 5 {
		srv.ACM.Add(awstest.Certificate{Region: "eu-west-1", DomainName: "a.example.com", NotAfter: now})
	}
	srv.ACM.Throttle(6)

	got, err := s.Certificates(context.Background())
	if err != nil {
		t.Fatalf("Certificates: %v", err)
	}
	if len(got) != 5 {
		t.Errorf("got %d certificates, want 5", len(got))
	}
	var throttled int
	for _, r := range srv.Requests("acm") {
		// Certificates without PEM answer GetCertificate with 400 too.
		if r.Status == 400 && r.Operation != "GetCertificate" {
			throttled++
		}
	}
	if throttled != 6 {
		t.Errorf("%d throttled requests, want 6", throttled)
	}
}

func TestFailingRegionDoesNotStopOthers(t *testing.T) {
	s, srv := newSource(t, acm.Config{Regions: []string{"eu-west-1", "eu-central-1", "us-east-1"}, Account: "111111111111"}, awsaccount.Config{})
	srv.ACM.Add(
		awstest.Certificate{Region: "eu-west-1", DomainName: "a.example.com"},
		awstest.Certificate{Region: "eu-central-1", DomainName: "b.example.com"},
		awstest.Certificate{Region: "us-east-1", DomainName: "c.example.com"},
	)
	srv.ACM.DenyRegion("eu-central-1")

	got, err := s.Certificates(context.Background())
	var names []string
	for _, c := range got {
		names = append(names, c.Region+"/"+c.DomainName)
	}
	if want := []string{"eu-west-1/a.example.com", "us-east-1/c.example.com"}; !slices.Equal(names, want) {
		t.Errorf("certificates = %v, want %v", names, want)
	}
	if err == nil {
		t.Fatal("no error for the denied region")
	}
	var re *acmcert.RegionError
	if !errors.As(err, &re) || re.Region != "eu-central-1" || re.Op != acmcert.OpList {
		t.Errorf("error %v: want a *RegionError for eu-central-1", err)
	}
	for _, want := range []string{"eu-central-1", "account 111111111111", "AccessDeniedException", "grant acm:ListCertificates"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "eu-west-1") || strings.Contains(err.Error(), "us-east-1") {
		t.Errorf("error %q blames a healthy region", err)
	}
}

func TestDescribeFailureKeepsSummary(t *testing.T) {
	s, srv := newSource(t, acm.Config{Regions: []string{"eu-west-1"}}, awsaccount.Config{})
	srv.ACM.Add(
		awstest.Certificate{Region: "eu-west-1", DomainName: "a.example.com", NotAfter: now, Type: "IMPORTED", InUseBy: []string{"arn:x"}},
		awstest.Certificate{Region: "eu-west-1", DomainName: "b.example.com", NotAfter: now},
	)
	srv.ACM.DenyOperation("DescribeCertificate")

	got, err := s.Certificates(context.Background())
	if len(got) != 2 || !got[0].Partial || !got[0].NotAfter.Equal(now) || got[0].Type != acmcert.Imported || !got[0].InUse {
		t.Errorf("certificates = %+v, want both from their summaries", got)
	}
	var re *acmcert.RegionError
	if !errors.As(err, &re) || re.Failed != 2 || !strings.Contains(err.Error(), "grant acm:DescribeCertificate") {
		t.Errorf("error = %v, want 2 failed describes with a hint", err)
	}
}

func TestAssumeRole(t *testing.T) {
	const role = "arn:aws:iam::222222222222:role/certwatch-read"
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	srv.STS.AddRole(awstest.Role{ARN: role, ExternalID: "ext-1234"})
	srv.ACM.Add(
		awstest.Certificate{Region: "eu-west-1", Account: "222222222222", DomainName: "in-role.example.com"},
		awstest.Certificate{Region: "eu-west-1", DomainName: "default-account.example.com"},
	)
	ac := awsaccount.Config{Region: "eu-west-1", STSEndpoint: srv.URL, MaxBackoff: time.Millisecond,
		Role: awsaccount.Role{ARN: role, ExternalID: "ext-1234", SessionName: "certwatch-test"}}
	cfg, err := awsaccount.Load(context.Background(), ac)
	if err != nil {
		t.Fatal(err)
	}
	s, err := acm.New(acm.Config{Regions: []string{"eu-west-1"}, Endpoint: srv.URL, Account: ac.Label(), RateLimit: 1000}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != "acm:222222222222" {
		t.Errorf("Name() = %q", s.Name())
	}
	got, err := s.Certificates(context.Background())
	if err != nil {
		t.Fatalf("Certificates: %v", err)
	}
	if len(got) != 1 || got[0].DomainName != "in-role.example.com" || got[0].Account != "222222222222" {
		t.Errorf("certificates = %+v, want only the role account's", got)
	}

	sts := srv.Requests("sts")
	if len(sts) != 1 {
		t.Fatalf("%d STS requests, want 1", len(sts))
	}
	form := string(sts[0].Body)
	for _, want := range []string{"Action=AssumeRole", "RoleArn=arn%3Aaws%3Aiam%3A%3A222222222222%3Arole%2Fcertwatch-read",
		"ExternalId=ext-1234", "RoleSessionName=certwatch-test"} {
		if !strings.Contains(form, want) {
			t.Errorf("AssumeRole body %q lacks %q", form, want)
		}
	}
	if sts[0].AccessKeyID != awstest.AccessKeyID || !sts[0].SignatureValid {
		t.Errorf("AssumeRole signed by %q (valid %v), want the default credentials", sts[0].AccessKeyID, sts[0].SignatureValid)
	}
	sessions := srv.STS.Sessions()
	for _, r := range srv.Requests("acm") {
		if r.AccessKeyID != sessions[0].AccessKeyID || !r.SignatureValid || r.Header.Get("X-Amz-Security-Token") != sessions[0].SessionToken {
			t.Errorf("%s signed by %q (valid %v), want the assumed role's key %q", r.Operation, r.AccessKeyID, r.SignatureValid, sessions[0].AccessKeyID)
		}
	}
}

func TestAssumeRoleDenied(t *testing.T) {
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	srv.STS.AddRole(awstest.Role{ARN: "arn:aws:iam::222222222222:role/r", ExternalID: "right"})
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{STSEndpoint: srv.URL, MaxBackoff: time.Millisecond,
		Role: awsaccount.Role{ARN: "arn:aws:iam::222222222222:role/r", ExternalID: "wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := acm.New(acm.Config{Regions: []string{"eu-west-1"}, Endpoint: srv.URL, Account: "222222222222"}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Certificates(context.Background())
	if err == nil || !strings.Contains(err.Error(), "trust policy") || strings.Contains(err.Error(), "grant acm:") {
		t.Errorf("error = %v, want a hint about the role's trust policy", err)
	}
	if n := len(srv.Requests("acm")); n != 0 {
		t.Errorf("%d ACM requests without credentials", n)
	}
}

func TestEndpointFromEnvironment(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// endpoint is Config.Endpoint; "fake" stands for the fake's URL.
		endpoint string
	}{
		{"AWS_ENDPOINT_URL_ACM", map[string]string{"AWS_ENDPOINT_URL_ACM": "fake"}, ""},
		{"AWS_ENDPOINT_URL", map[string]string{"AWS_ENDPOINT_URL": "fake"}, ""},
		{"service variable wins over global", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_ACM": "fake"}, ""},
		{"config wins over environment", map[string]string{"AWS_ENDPOINT_URL_ACM": "http://127.0.0.1:1"}, "fake"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			awstest.Isolate(t)
			srv := awstest.NewServer()
			t.Cleanup(srv.Close)
			srv.ACM.Add(awstest.Certificate{Region: "eu-west-1", DomainName: "a.example.com"})
			fake := func(v string) string {
				if v == "fake" {
					return srv.URL
				}
				return v
			}
			for k, v := range tt.env {
				t.Setenv(k, fake(v))
			}
			cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			s, err := acm.New(acm.Config{Regions: []string{"eu-west-1"}, Endpoint: fake(tt.endpoint), RateLimit: 1000}, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Certificates(context.Background())
			if err != nil || len(got) != 1 {
				t.Errorf("Certificates = %d, %v; want the fake's one certificate", len(got), err)
			}
		})
	}
}

func TestCancelled(t *testing.T) {
	s, srv := newSource(t, acm.Config{Regions: []string{"eu-west-1"}}, awsaccount.Config{})
	srv.ACM.Add(awstest.Certificate{Region: "eu-west-1", DomainName: "a.example.com"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := s.Certificates(ctx); err == nil || len(got) != 0 {
		t.Errorf("Certificates(cancelled) = %d, %v; want an error", len(got), err)
	}
}

func TestNormalizeSerial(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"0f:ac:b0:a3", "facb0a3"},
		{"0F:AC:B0:A3", "facb0a3"},
		{"00:00", "0"},
		{"", ""},
		{"7f", "7f"},
		{"01:00", "100"},
	}
	for _, tt := range tests {
		if got := acmcert.NormalizeSerial(tt.in); got != tt.want {
			t.Errorf("NormalizeSerial(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// The same serial as crypto/x509 prints it.
	n, _ := new(big.Int).SetString("0facb0a3", 16)
	if got := acmcert.NormalizeSerial("0f:ac:b0:a3"); got != n.Text(16) {
		t.Errorf("NormalizeSerial = %q, x509 serial %q", got, n.Text(16))
	}
}

func TestNewNeedsRegions(t *testing.T) {
	if _, err := acm.New(acm.Config{}, aws.Config{}, nil); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("New without regions: err = %v", err)
	}
}

// TestFingerprintFromGetCertificate: an issued certificate's fingerprint
// is that of the PEM GetCertificate returns; a denied GetCertificate fails
// OpGet with the action to grant and keeps the certificate.
func TestFingerprintFromGetCertificate(t *testing.T) {
	ca := certtest.MustCA("Test Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"pem.example.com"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 6, 0)})
	sum := sha256.Sum256(leaf.Cert.Raw)
	want := hex.EncodeToString(sum[:])

	s, srv := newSource(t, acm.Config{Regions: []string{"eu-west-1"}}, awsaccount.Config{})
	srv.ACM.Add(
		awstest.Certificate{Region: "eu-west-1", DomainName: "pem.example.com", NotAfter: leaf.Cert.NotAfter,
			PEM: string(certtest.PEM(leaf.Cert, ca.Cert))},
		awstest.Certificate{Region: "eu-west-1", DomainName: "pending.example.com", Status: "PENDING_VALIDATION"},
	)
	got, err := s.Certificates(context.Background())
	if err != nil {
		t.Fatalf("Certificates: %v", err)
	}
	fps := map[string]string{}
	for _, c := range got {
		fps[c.DomainName] = c.Fingerprint
	}
	if fps["pem.example.com"] != want || fps["pending.example.com"] != "" {
		t.Errorf("fingerprints = %v, want pem.example.com %s and none for the pending one", fps, want)
	}
	for _, r := range srv.Requests("acm") {
		if r.Operation == "GetCertificate" && strings.Contains(string(r.Body), "pending") {
			t.Errorf("GetCertificate asked for a certificate not issued: %s", r.Body)
		}
	}

	srv.ACM.DenyOperation("GetCertificate")
	got, err = s.Certificates(context.Background())
	var re *acmcert.RegionError
	if len(got) != 2 || !errors.As(err, &re) || re.Op != acmcert.OpGet || !strings.Contains(err.Error(), "grant acm:GetCertificate") {
		t.Errorf("denied GetCertificate: %d certificates, error %v; want both kept and the action to grant", len(got), err)
	}
}

// TestDiscoverKeepsAFailedRegion: a region that cannot be listed keeps
// the certificates the previous Discover found there, told apart from a
// failure to describe or fetch some (returned Partial, not kept) by the
// error's typed operation, not by its wording.
func TestDiscoverKeepsAFailedRegion(t *testing.T) {
	s, srv := newSource(t, acm.Config{Regions: []string{"eu-west-1", "eu-central-1"}, Account: "111111111111"}, awsaccount.Config{})
	srv.ACM.Add(
		awstest.Certificate{Region: "eu-west-1", DomainName: "a.example.com"},
		awstest.Certificate{Region: "eu-central-1", DomainName: "b.example.com"},
	)
	if _, err := s.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.ACM.DenyRegion("eu-central-1")
	y, err := s.Discover(context.Background())
	var names []string
	for _, c := range y.Inventory.ACM {
		names = append(names, c.Region+"/"+c.DomainName)
	}
	slices.Sort(names)
	var re *acmcert.RegionError
	if !errors.As(err, &re) || re.Op != acmcert.OpList || !slices.Equal(names, []string{"eu-central-1/b.example.com", "eu-west-1/a.example.com"}) {
		t.Errorf("got %v, %v; want eu-central-1's certificate kept from the last Discover and an error of %q", names, err, acmcert.OpList)
	}
}

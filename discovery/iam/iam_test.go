package iam_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
	"github.com/certwatch/certwatch/discovery/iam"
	"github.com/certwatch/certwatch/internal/awstest"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

var now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func newSource(t *testing.T) (*iam.Source, *awstest.Server) {
	t.Helper()
	awstest.Isolate(t)
	srv := awstest.NewServer()
	t.Cleanup(srv.Close)
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{MaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return iam.New(iam.Config{Account: awstest.DefaultAccount, Endpoint: srv.URL, RateLimit: 1000, PageSize: 2}, cfg, nil), srv
}

// TestServerCertificates lists five certificates over pages of two
// (the client asks for two, the fake would give three) through
// throttling, and reads each PEM.
func TestServerCertificates(t *testing.T) {
	s, srv := newSource(t)
	ca := certtest.MustCA("Test Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	want := map[string]string{}
	for i, name := range []string{"a", "b", "c", "d", "e"} {
		l := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{name + ".example.com"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, i+1, 0)})
		srv.IAM.Add(awstest.ServerCertificate{Name: name, Path: "/cloudfront/", UploadDate: now.AddDate(0, -1, 0), Expiration: l.Cert.NotAfter,
			Body: string(certtest.PEM(l.Cert)), Chain: string(certtest.PEM(ca.Cert))})
		want[name] = probes.Fingerprint(l.Cert)
	}
	srv.IAM.SetPageSize(3)
	srv.IAM.Throttle(3)

	got, err := s.ServerCertificates(context.Background())
	if err != nil {
		t.Fatalf("ServerCertificates: %v", err)
	}
	if len(got) != 5 {
		t.Fatalf("got %d certificates, want 5: %+v", len(got), got)
	}
	for _, c := range got {
		if c.Fingerprint != want[c.Name] || c.Partial || len(c.DNSNames) != 1 || c.DNSNames[0] != c.Name+".example.com" ||
			c.ARN != "arn:aws:iam::111111111111:server-certificate/cloudfront/"+c.Name || c.ID == "" || c.Serial == "" || c.Account != awstest.DefaultAccount {
			t.Errorf("certificate %+v: want %s's fingerprint %s, names and ARN", c, c.Name, want[c.Name])
		}
	}
	var lists, throttled int
	for _, r := range srv.Requests("iam") {
		if r.Operation == "ListServerCertificates" && r.Status == 200 {
			lists++
		}
		if r.Status == 400 {
			throttled++
		}
		if r.Region != "us-east-1" {
			t.Errorf("request signed for %s, want us-east-1 (IAM is global)", r.Region)
		}
	}
	if lists != 3 || throttled != 3 {
		t.Errorf("%d list pages and %d throttled requests, want 3 pages of at most 2 and 3 throttled", lists, throttled)
	}
}

// TestDenied: a missing permission is an error naming the account and the
// action to grant; a denied GetServerCertificate keeps each certificate
// from its metadata.
func TestDenied(t *testing.T) {
	s, srv := newSource(t)
	srv.IAM.Add(awstest.ServerCertificate{Name: "old", Expiration: now})
	srv.IAM.DenyOperation("GetServerCertificate")
	got, err := s.ServerCertificates(context.Background())
	var ie *iamcert.Error
	if len(got) != 1 || !got[0].Partial || !got[0].NotAfter.Equal(now) || !errors.As(err, &ie) || ie.Op != iamcert.OpGet ||
		!strings.Contains(err.Error(), "grant iam:GetServerCertificate") {
		t.Errorf("got %+v, %v; want the certificate from its metadata and the action to grant", got, err)
	}

	srv.IAM.DenyAccount(awstest.DefaultAccount)
	got, err = s.ServerCertificates(context.Background())
	if len(got) != 0 || err == nil || !strings.Contains(err.Error(), "grant iam:ListServerCertificates") || !strings.Contains(err.Error(), "account 111111111111") {
		t.Errorf("denied account: got %+v, %v; want an error naming the account and iam:ListServerCertificates", got, err)
	}
}

// TestDiscoverKeepsTheLastListing: a listing that fails keeps the
// certificates the previous Discover found, told apart from a failure to
// fetch some of them (whose certificates are returned from the listing,
// Partial) by the error's typed operation, not by its wording.
func TestDiscoverKeepsTheLastListing(t *testing.T) {
	s, srv := newSource(t)
	srv.IAM.Add(awstest.ServerCertificate{Name: "a", Expiration: now})
	srv.IAM.DenyOperation("GetServerCertificate")
	y, err := s.Discover(context.Background())
	var ie *iamcert.Error
	if !errors.As(err, &ie) || ie.Op != iamcert.OpGet || len(y.Inventory.IAM) != 1 || !y.Inventory.IAM[0].Partial {
		t.Fatalf("fetch denied: got %+v, %v; want the certificate from its metadata and an error of %q", y.Inventory.IAM, err, iamcert.OpGet)
	}

	srv.IAM.DenyAccount(awstest.DefaultAccount)
	y, err = s.Discover(context.Background())
	if !errors.As(err, &ie) || ie.Op != iamcert.OpList || len(y.Inventory.IAM) != 1 || y.Inventory.IAM[0].Name != "a" {
		t.Errorf("listing denied: got %+v, %v; want the last listing's certificate kept and an error of %q", y.Inventory.IAM, err, iamcert.OpList)
	}
}

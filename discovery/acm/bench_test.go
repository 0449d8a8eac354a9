package acm_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/awsaccount"
	"github.com/certwatch/certwatch/internal/awstest"
)

// BenchmarkCertificates lists and describes 5,000 certificates in one
// region of the fake. The rate limit is raised so the benchmark measures
// the inventory itself; requests/op divided by the configured limit (5/s
// per region) is the time the same inventory takes against AWS.
func BenchmarkCertificates(b *testing.B) {
	const n = 5000
	awstest.Isolate(b)
	srv := awstest.NewServer()
	b.Cleanup(srv.Close)
	keyTypes := []string{"RSA_2048", "EC_prime256v1", "EC_secp384r1", "RSA_4096"}
	for i := range n {
		name := fmt.Sprintf("svc%04d.example.com", i)
		srv.ACM.Add(awstest.Certificate{
			Region: "eu-west-1", DomainName: name, SubjectAlternativeNames: []string{name, "www." + name},
			KeyAlgorithm: keyTypes[i%len(keyTypes)], Serial: fmt.Sprintf("0a:%02x:%02x", i>>8, i&0xff),
			NotBefore: now.AddDate(0, -6, 0), NotAfter: now.AddDate(0, 6, 0), RenewalEligibility: "ELIGIBLE",
			InUseBy: []string{fmt.Sprintf("arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/lb%d/1", i)},
			Validations: []awstest.DomainValidation{{DomainName: name, ValidationStatus: "SUCCESS", ValidationMethod: "DNS",
				Record: &awstest.ResourceRecord{Name: fmt.Sprintf("_%032x.%s.", i, name), Type: "CNAME", Value: fmt.Sprintf("_%032x.acm-validations.aws.", i)}}},
			Renewal: &awstest.Renewal{Status: "SUCCESS", UpdatedAt: now},
		})
	}
	cfg, err := awsaccount.Load(context.Background(), awsaccount.Config{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := acm.New(acm.Config{Regions: []string{"eu-west-1"}, Endpoint: srv.URL, RateLimit: 1e6}, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	b.ReportAllocs()
	var requests int
	var retained uint64
	for b.Loop() {
		certs, err := s.Certificates(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(certs) != n {
			b.Fatalf("%d certificates, want %d", len(certs), n)
		}
		requests = len(srv.Requests("acm"))
		srv.ResetRequests() // so the heap measured below is the inventory alone
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		retained = m.HeapAlloc - min(m.HeapAlloc, base.HeapAlloc)
		runtime.KeepAlive(certs)
	}
	b.ReportMetric(float64(requests), "requests/op")
	b.ReportMetric(float64(requests)/acm.DefaultRateLimit, "s-at-default-limit")
	b.ReportMetric(float64(retained)/(1<<20), "MiB-inventory")
}

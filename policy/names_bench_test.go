package policy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
)

// BenchmarkNamesSeen100k is what a daemon's run at 100,000 certificates,
// one name each, builds to write its name history: bytes allocated per
// run (B/op), at the run's peak.
func BenchmarkNamesSeen100k(b *testing.B) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	certs := make([]policy.Certificate, 100_000)
	for i := range certs {
		certs[i] = policy.Certificate{
			SHA256:    fmt.Sprintf("%064x", i),
			DNSNames:  []string{fmt.Sprintf("h%06d.farm.test", (i*7919)%len(certs))},
			NotBefore: policy.At(t0), NotAfter: policy.At(t0.AddDate(0, 0, 90)),
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := len(policy.NamesSeen(certs, nil, nil, nil, nil)); n != len(certs) {
			b.Fatalf("%d names, want %d", n, len(certs))
		}
	}
}

package atrest_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/internal/certtest"
)

// BenchmarkSet: what a Set keeps per certificate, each found in its own
// Secret with the CA bundle beside it, as a cluster of cert-manager
// Secrets holds them. It reports the heap the finished list retains per
// certificate (retained_B/cert).
func BenchmarkSet(b *testing.B) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := certtest.MustCA("Bench Root", now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0))
	const n = 2000
	leaves := make([]*certtest.Leaf, n)
	for i := range leaves {
		leaves[i] = ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{fmt.Sprintf("svc-%d.ns-%d.svc", i, i%500)}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
	}
	b.ResetTimer()
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := atrest.Set{Roots: ca.Pool(), Now: now}
		for i, l := range leaves {
			where := fmt.Sprintf("ns-%d/svc-%d-tls", i%500, i)
			s.Add(atrest.Location{Kind: atrest.Secret, Where: where, Key: "tls.crt"}, l.Cert)
			s.Add(atrest.Location{Kind: atrest.Secret, Where: where, Key: "ca.crt"}, ca.Cert)
		}
		certs := s.Certificates()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "retained_B/cert")
		runtime.KeepAlive(certs)
	}
}

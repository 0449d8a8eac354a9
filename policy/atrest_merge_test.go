package policy_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/policy"
)

// TestAtRestMergeKeepsIssuances: one certificate that two clusters'
// cert-manager each manage (two sources) keeps both issuances, as it keeps
// both locations.
func TestAtRestMergeKeepsIssuances(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	held := func(cluster string) atrest.Certificate {
		cm := atrest.Location{Kind: atrest.CertManager, Where: "payments/api", Cluster: cluster}
		return atrest.Certificate{
			SHA256: "ab", Subject: "api.example", Issuer: "CA", DNSNames: []string{"api.example"},
			NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0), KeyAlgorithm: "ECDSA", KeyBits: 256, SignatureAlgorithm: "ECDSA-SHA256",
			Locations: []atrest.Location{cm, {Kind: atrest.Secret, Where: "payments/api-tls", Key: "tls.crt", Cluster: cluster}},
			Issuances: []atrest.Issuance{{Location: cm, Ready: true, RenewalTime: now.AddDate(0, 1, 0)}},
		}
	}
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	ev.AddAtRest(held("prod"), held("stage"))
	res := ev.Result()
	if len(res.AtRest) != 1 {
		t.Fatalf("%d certificates at rest, want 1", len(res.AtRest))
	}
	if c := res.AtRest[0]; len(c.Locations) != 4 || len(c.Issuances) != 2 {
		t.Errorf("merged: %d locations and %d issuances, want 4 and 2", len(c.Locations), len(c.Issuances))
	}
}

// TestAtRestNotCopied: a cluster's 10,000 certificates held at rest are
// copied twice on their way to the report, into the merged list and into
// the report's own, not more: AddAtRest keeps the caller's list (it copied
// it), and the merged list is made at its size (appended to, it grew by
// doubling through 2.5 times its size in copies).
func TestAtRestNotCopied(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	certs := make([]atrest.Certificate, 10000)
	for i := range certs {
		certs[i] = atrest.Certificate{
			SHA256: fmt.Sprintf("%064x", i), Subject: "svc", Issuer: "CA", DNSNames: []string{"svc.ns.svc.cluster.local"},
			NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0), KeyAlgorithm: "ECDSA", KeyBits: 256, SignatureAlgorithm: "ECDSA-SHA256",
			Locations: []atrest.Location{{Kind: atrest.Secret, Where: fmt.Sprintf("ns/svc-%d-tls", i), Key: "tls.crt"}},
		}
	}
	list := float64(len(certs)) * float64(unsafe.Sizeof(certs[0]))
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ev.AddAtRest(certs...)
	res := ev.Result()
	runtime.ReadMemStats(&after)
	if len(res.AtRest) != len(certs) {
		t.Fatalf("%d certificates at rest in the result, want %d", len(res.AtRest), len(certs))
	}
	if copies := float64(after.TotalAlloc-before.TotalAlloc) / list; copies > 5 {
		t.Errorf("AddAtRest and Result allocated %.1f times the list of certificates, want at most 5 (the merged list and the report's, their index and what the evaluation keeps of each: 3.6 here; 8.8 when the list was copied five times)", copies)
	}
}

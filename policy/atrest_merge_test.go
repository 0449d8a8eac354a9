package policy_test

import (
	"testing"
	"time"

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

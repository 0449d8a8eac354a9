package policy_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestRevocationSummary: each leaf is counted once, by what answered for
// it (CRL, OCSP, neither), and each CRL relied on is listed with its dates,
// stale once past its next update.
func TestRevocationSummary(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	mk := func(name string) []*x509.Certificate {
		l := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 200)})
		return []*x509.Certificate{l.Cert}
	}
	fresh := probes.Revocation{Depth: 0, Status: probes.RevocationGood, Source: "crl http://crl.example/a.crl", ThisUpdate: now.Add(-time.Hour), NextUpdate: now.Add(24 * time.Hour)}
	stale := probes.Revocation{Depth: 0, Status: probes.RevocationStale, Source: "crl http://crl.example/b.crl", ThisUpdate: now.Add(-72 * time.Hour), NextUpdate: now.Add(-time.Hour)}
	ocsp := probes.Revocation{Depth: 0, Status: probes.RevocationGood, Source: "ocsp http://ocsp.example"}
	down := probes.Revocation{Depth: 0, Status: probes.RevocationUnavailable, Source: "crl http://down.example/c.crl", Error: "connection refused"}
	withRev := func(o probes.Observation, r ...probes.Revocation) probes.Observation { o.Revocation = r; return o }
	a := mk("a.example")
	obs := []probes.Observation{
		withRev(observe("a.example", "10.0.0.1", a, root.Pool(), now), fresh),
		withRev(observe("a.example", "10.0.0.2", a, root.Pool(), now), fresh), // the same leaf again
		withRev(observe("b.example", "10.0.0.3", mk("b.example"), root.Pool(), now), stale),
		withRev(observe("c.example", "10.0.0.4", mk("c.example"), root.Pool(), now), ocsp),
		withRev(observe("d.example", "10.0.0.5", mk("d.example"), root.Pool(), now), down),
		observe("e.example", "10.0.0.6", mk("e.example"), root.Pool(), now),
	}
	got := policy.Evaluate(obs, policy.DefaultRules(), now).Revocation
	if got.ByCRL != 2 || got.ByOCSP != 1 || got.ByNeither != 2 {
		t.Errorf("by CRL, OCSP, neither = %d, %d, %d; want 2, 1, 2", got.ByCRL, got.ByOCSP, got.ByNeither)
	}
	want := []policy.CRLState{
		{URL: "http://crl.example/a.crl", ThisUpdate: fresh.ThisUpdate, NextUpdate: fresh.NextUpdate, Leaves: 1},
		{URL: "http://crl.example/b.crl", ThisUpdate: stale.ThisUpdate, NextUpdate: stale.NextUpdate, Stale: true, Leaves: 1},
	}
	if len(got.CRLs) != len(want) {
		t.Fatalf("CRLs = %+v, want %+v", got.CRLs, want)
	}
	for i := range want {
		if got.CRLs[i] != want[i] {
			t.Errorf("CRL %d = %+v, want %+v", i, got.CRLs[i], want[i])
		}
	}
}

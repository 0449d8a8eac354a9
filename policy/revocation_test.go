package policy_test

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

func TestRevocationPolicy(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	inter := root.MustIntermediate("Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	l := inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 60)})
	with := func(facts ...probes.Revocation) probes.Observation {
		o := observe("a.example", "10.0.0.1", []*x509.Certificate{l.Cert, inter.Cert}, root.Pool(), now)
		o.Revocation = facts
		return o
	}
	revokedAt := now.Add(-day)
	leafRevoked := probes.Revocation{Depth: 0, Subject: "a.example", Status: probes.RevocationRevoked, Source: "crl http://crl.example/i.crl", RevokedAt: revokedAt, Reason: 1}
	interRevoked := probes.Revocation{Depth: 1, Subject: "Issuing", Status: probes.RevocationRevoked, Source: "ocsp http://ocsp.example", RevokedAt: revokedAt, Reason: 2}
	stale := probes.Revocation{Depth: 0, Subject: "a.example", Status: probes.RevocationStale, Error: "crl http://crl.example/i.crl is past its next update"}
	unavailable := probes.Revocation{Depth: 0, Subject: "a.example", Status: probes.RevocationUnavailable, Error: "crl http://crl.example/i.crl: connection refused"}
	good := probes.Revocation{Depth: 1, Subject: "Issuing", Status: probes.RevocationGood}

	loud := policy.DefaultRules()
	loud.RevocationUnavailable = policy.Critical // never more than info, whatever the rules say
	tests := []struct {
		name     string
		rules    policy.Rules
		obs      probes.Observation
		want     []string
		contains string
	}{
		{"revoked leaf", policy.DefaultRules(), with(leafRevoked, good), []string{"revoked critical a.example"}, "key compromise"},
		{"revoked intermediate", policy.DefaultRules(), with(interRevoked), []string{"revoked page a.example"}, "intermediate certificate \"Issuing\" was revoked"},
		{"stale", policy.DefaultRules(), with(stale), []string{"revocation_stale info a.example"}, "past its next update"},
		{"unavailable is at most info", loud, with(unavailable), []string{"revocation_unavailable info a.example"}, "connection refused"},
		{"good", policy.DefaultRules(), with(good), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := policy.Evaluate([]probes.Observation{tt.obs}, tt.rules, now).Findings
			if g, w := strings.Join(summaries(got), "\n"), strings.Join(tt.want, "\n"); g != w {
				t.Errorf("findings:\n%s\nwant:\n%s", g, w)
			}
			if len(got) > 0 && !strings.Contains(got[0].Message, tt.contains) {
				t.Errorf("message %q lacks %q", got[0].Message, tt.contains)
			}
		})
	}
}

package policy_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/found/ctcert"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// An expiring served certificate whose renewal CT shows is one finding:
// its expiry finding becomes the stale deployment, at its tier, once the
// renewal is older than the grace; before that, a rollout in progress, it
// stays an expiry finding.
func TestCTRenewalTurnsExpiryIntoStaleDeployment(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	old := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"www.example.com"}, NotBefore: now.AddDate(0, 0, -85), NotAfter: now.AddDate(0, 0, 5)})
	renewal := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"www.example.com"}, NotBefore: now.AddDate(0, 0, -3), NotAfter: now.AddDate(0, 0, 87)})
	o := observe("www.example.com", "10.0.0.1", []*x509.Certificate{old.Cert}, root.Pool(), now)
	logged := func(at time.Time) ctcert.Certificate {
		return ctcert.Certificate{ID: "issuance-1", Serial: renewal.Cert.SerialNumber.Text(16), Names: renewal.Cert.DNSNames,
			NotBefore: renewal.Cert.NotBefore, NotAfter: renewal.Cert.NotAfter, SHA256: probes.Fingerprint(renewal.Cert),
			Issuer: ctcert.Issuer{CommonName: "Root"},
			Logged: []ctcert.Entry{{Log: "log.example/2030", Index: 7, Timestamp: at, Precert: true}, {Log: "log.example/2030", Index: 8, Timestamp: at}}}
	}
	rules := policy.DefaultRules()
	rules.CT = policy.CTRules{Grace: 48 * time.Hour, Domains: []string{"example.com"}}
	for _, tt := range []struct {
		name   string
		logged time.Time
		want   policy.Kind
	}{
		{"renewal logged 3 days ago", now.AddDate(0, 0, -3), policy.StaleDeployment},
		{"renewal logged an hour ago", now.Add(-time.Hour), policy.Expiring},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := policy.NewEvaluator(rules, now)
			ev.Add(&o)
			ev.AddCT(logged(tt.logged), logged(tt.logged)) // given twice: one issuance
			res := ev.Result()
			var about []policy.Finding
			for _, f := range res.Findings {
				if f.Certificate == probes.Fingerprint(old.Cert) {
					about = append(about, f)
				}
			}
			if len(about) != 1 || about[0].Kind != tt.want || about[0].Tier != policy.Page {
				t.Fatalf("findings about the served certificate %+v, want one %s at page", about, tt.want)
			}
			if tt.want == policy.StaleDeployment && (len(about[0].Refs().CTLogged) != 2 || about[0].Refs().CTLogged[0].Index != 7) {
				t.Errorf("stale deployment names log entries %+v, want the renewal's two", about[0].Refs().CTLogged)
			}
		})
	}
}

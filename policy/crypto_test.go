package policy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

func summaries(fs []policy.Finding) []string {
	var out []string
	for _, f := range fs {
		var names []string
		for _, ep := range f.Endpoints {
			names = append(names, ep.Name)
		}
		out = append(out, string(f.Kind)+" "+f.Tier.String()+" "+strings.Join(names, ","))
	}
	return out
}

func TestCryptoPolicy(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	inter := root.MustIntermediate("Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	roots := root.Pool()
	mint := func(o certtest.LeafOptions) *certtest.Leaf {
		if o.NotBefore.IsZero() {
			o.NotBefore, o.NotAfter = now.AddDate(0, 0, -10), now.AddDate(0, 0, 35)
		}
		o.DNSNames = []string{"a.example"}
		return inter.MustLeaf(o)
	}
	served := func(l *certtest.Leaf, extra ...*x509.Certificate) []*x509.Certificate {
		return append([]*x509.Certificate{l.Cert}, extra...)
	}
	public := func(o probes.Observation) probes.Observation { o.PublicRoot = true; return o }
	sha1Leaf := mint(certtest.LeafOptions{SignatureAlgorithm: x509.ECDSAWithSHA1, NotBefore: now.AddDate(0, 0, -300), NotAfter: now.AddDate(0, 0, 5)})
	// Issued in 2030, when the limit is 47 days.
	long := mint(certtest.LeafOptions{NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 80)})
	atLimit := mint(certtest.LeafOptions{NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 37).Add(-time.Second)})

	tests := []struct {
		name     string
		obs      probes.Observation
		want     []string
		contains string
	}{
		{
			name:     "RSA 1024 leaf",
			obs:      observe("a.example", "10.0.0.1", served(mint(certtest.LeafOptions{RSABits: 1024}), inter.Cert), roots, now),
			want:     []string{"weak_key warning a.example"},
			contains: "1024-bit RSA key",
		},
		{
			name:     "P-224 leaf",
			obs:      observe("a.example", "10.0.0.1", served(p224Leaf(t, inter, now), inter.Cert), roots, now),
			want:     []string{"weak_key warning a.example"},
			contains: "224-bit elliptic curve key (P-224)",
		},
		{
			// crypto/x509 refuses the SHA-1 signature; the chain is still
			// verified, and its expiry judged.
			name:     "SHA-1 leaf that expires in 5 days",
			obs:      observe("a.example", "10.0.0.1", served(sha1Leaf, inter.Cert), roots, now),
			want:     []string{"expiring page a.example", "weak_signature warning a.example", "renewal_missed warning a.example"},
			contains: "signed with ECDSA-SHA1",
		},
		{
			name:     "SHA-1 leaf without its issuer: untrusted, and says why",
			obs:      observe("a.example", "10.0.0.1", served(sha1Leaf), roots, now),
			want:     []string{"chain_untrusted page a.example", "expiring page a.example", "weak_signature warning a.example", "renewal_missed warning a.example"},
			contains: "which the server did not send",
		},
		{
			name:     "public leaf valid longer than allowed when issued",
			obs:      public(observe("a.example", "10.0.0.1", served(long, inter.Cert), roots, now)),
			want:     []string{"long_validity notice a.example"},
			contains: "valid for 90 days, more than the 47",
		},
		{
			name: "public leaf at exactly the limit",
			obs:  public(observe("a.example", "10.0.0.1", served(atLimit, inter.Cert), roots, now)),
		},
		{
			name: "private root: no lifetime limit",
			obs:  observe("a.example", "10.0.0.1", served(long, inter.Cert), roots, now),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := policy.Evaluate([]probes.Observation{tt.obs}, policy.DefaultRules(), now).Findings
			if g, w := strings.Join(summaries(got), "\n"), strings.Join(tt.want, "\n"); g != w {
				t.Errorf("findings:\n%s\nwant:\n%s", g, w)
			}
			var msgs []string
			for _, f := range got {
				msgs = append(msgs, f.Message)
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tt.contains) {
				t.Errorf("no message contains %q:\n%s", tt.contains, strings.Join(msgs, "\n"))
			}
		})
	}

	// Every check can be turned off.
	off := policy.DefaultRules()
	off.WeakKey, off.WeakSignature, off.LongValidity = policy.None, policy.None, policy.None
	obs := []probes.Observation{
		observe("a.example", "10.0.0.1", served(mint(certtest.LeafOptions{RSABits: 1024}), inter.Cert), roots, now),
		observe("b.example", "10.0.0.2", served(mint(certtest.LeafOptions{SignatureAlgorithm: x509.ECDSAWithSHA1}), inter.Cert), roots, now),
		public(observe("c.example", "10.0.0.3", served(long, inter.Cert), roots, now)),
	}
	for _, f := range policy.Evaluate(obs, off, now).Findings {
		if f.Kind != policy.HostnameMismatch {
			t.Errorf("with the crypto checks off: %s %s: %s", f.Kind, f.Tier, f.Message)
		}
	}
}

func TestMaxPublicValidity(t *testing.T) {
	for _, tt := range []struct {
		issued time.Time
		days   int
	}{
		{time.Date(2017, 6, 1, 0, 0, 0, 0, time.UTC), 0},
		{time.Date(2020, 8, 31, 23, 59, 59, 0, time.UTC), 825},
		{time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC), 398},
		{time.Date(2026, 3, 14, 23, 59, 59, 0, time.UTC), 398},
		{time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC), 200},
		{time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC), 100},
		{time.Date(2029, 3, 14, 0, 0, 0, 0, time.UTC), 100},
		{time.Date(2029, 3, 15, 0, 0, 0, 0, time.UTC), 47},
	} {
		if got := policy.MaxPublicValidity(tt.issued); got != tt.days {
			t.Errorf("MaxPublicValidity(%s) = %d, want %d", tt.issued, got, tt.days)
		}
	}
}

// p224Leaf returns a leaf with an elliptic curve key below P-256, which
// certtest does not mint.
func p224Leaf(t *testing.T, ca *certtest.CA, now time.Time) *certtest.Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(224), Subject: pkix.Name{CommonName: "a.example"}, DNSNames: []string{"a.example"},
		NotBefore: now.AddDate(0, 0, -10), NotAfter: now.AddDate(0, 0, 35),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &certtest.Leaf{Cert: c, Key: key, Intermediates: ca.Chain}
}

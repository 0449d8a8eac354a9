package probes_test

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
	"github.com/certwatch/certwatch/probes"
)

var now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// pki is a private PKI minted relative to now.
type pki struct {
	root, oldRoot *certtest.CA
	inter         *certtest.CA // valid
	expiredInter  *certtest.CA
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	root, err := certtest.NewCA("Test Root", now.AddDate(-5, 0, 0), now.AddDate(5, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	oldRoot, err := certtest.NewCA("Old Root", now.AddDate(-20, 0, 0), now.AddDate(5, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	inter, err := root.Intermediate("Test Intermediate", now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	expiredInter, err := root.Intermediate("Expired Intermediate", now.AddDate(-2, 0, 0), now.Add(-day))
	if err != nil {
		t.Fatal(err)
	}
	return &pki{root: root, oldRoot: oldRoot, inter: inter, expiredInter: expiredInter}
}

func leaf(t testing.TB, ca *certtest.CA, name string, notBefore, notAfter time.Time) *certtest.Leaf {
	t.Helper()
	l, err := ca.Leaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: notBefore, NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func chainOf(l *certtest.Leaf, extra ...*x509.Certificate) []*x509.Certificate {
	return append([]*x509.Certificate{l.Cert}, extra...)
}

// constrainedChain returns a leaf for name issued by a root whose name
// constraints do not permit name, and that root's pool.
func constrainedChain(t *testing.T, name string) ([]*x509.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Constrained Root"},
		NotBefore:             now.AddDate(-1, 0, 0),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		PermittedDNSDomains:   []string{"allowed.example"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	rootCert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &certtest.CA{Cert: rootCert, Key: key}
	l := leaf(t, ca, name, now.Add(-day), now.Add(30*day))
	return chainOf(l), certtest.CertPool(rootCert)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	good := leaf(t, p.inter, "a.example", now.Add(-day), now.Add(30*day))
	expired := leaf(t, p.inter, "a.example", now.Add(-90*day), now.Add(-day))
	notYet := leaf(t, p.inter, "a.example", now.Add(day), now.Add(90*day))
	underExpired := leaf(t, p.expiredInter, "a.example", now.Add(-30*day), now.Add(30*day))
	self := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-day), NotAfter: now.Add(30 * day)})
	expiredCross, err := p.oldRoot.CrossSign(p.root, now.AddDate(-3, 0, 0), now.Add(-day))
	if err != nil {
		t.Fatal(err)
	}
	validCross, err := p.oldRoot.CrossSign(p.root, now.AddDate(-3, 0, 0), now.AddDate(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	constrained, constrainedRoots := constrainedChain(t, "a.example")

	roots := p.root.Pool()
	bothRoots := certtest.CertPool(p.root.Cert, p.oldRoot.Cert)
	tests := []struct {
		name      string
		chain     []*x509.Certificate
		host      string
		roots     *x509.CertPool
		trust     probes.Trust
		nameMatch bool
		errHas    string
		paths     [][]*x509.Certificate
	}{
		{name: "trusted", chain: chainOf(good, p.inter.Cert), host: "a.example", roots: roots,
			trust: probes.Trusted, nameMatch: true,
			paths: [][]*x509.Certificate{{good.Cert, p.inter.Cert, p.root.Cert}}},
		{name: "host name is case-insensitive", chain: chainOf(good, p.inter.Cert), host: "A.Example", roots: roots,
			trust: probes.Trusted, nameMatch: true,
			paths: [][]*x509.Certificate{{good.Cert, p.inter.Cert, p.root.Cert}}},
		{name: "wrong host is still trusted", chain: chainOf(good, p.inter.Cert), host: "b.example", roots: roots,
			trust: probes.Trusted, nameMatch: false,
			paths: [][]*x509.Certificate{{good.Cert, p.inter.Cert, p.root.Cert}}},
		{name: "expired leaf", chain: chainOf(expired, p.inter.Cert), host: "a.example", roots: roots,
			trust: probes.TrustExpired, nameMatch: true, errHas: `"a.example" expired at 2029-12-31T00:00:00Z`,
			paths: [][]*x509.Certificate{{expired.Cert, p.inter.Cert, p.root.Cert}}},
		{name: "leaf not yet valid", chain: chainOf(notYet, p.inter.Cert), host: "a.example", roots: roots,
			trust: probes.TrustExpired, nameMatch: true, errHas: `"a.example" is not valid before 2030-01-02T00:00:00Z`,
			paths: [][]*x509.Certificate{{notYet.Cert, p.inter.Cert, p.root.Cert}}},
		{name: "expired intermediate", chain: chainOf(underExpired, p.expiredInter.Cert), host: "a.example", roots: roots,
			trust: probes.TrustExpired, nameMatch: true, errHas: `"Expired Intermediate" expired at`,
			paths: [][]*x509.Certificate{{underExpired.Cert, p.expiredInter.Cert, p.root.Cert}}},
		{name: "missing intermediate", chain: chainOf(good), host: "a.example", roots: roots,
			trust: probes.TrustUnknownAuthority, nameMatch: true,
			errHas: `incomplete chain: server did not send the intermediate "Test Intermediate" that issued "a.example"`},
		{name: "expired leaf and missing intermediate", chain: chainOf(expired), host: "a.example", roots: roots,
			trust: probes.TrustUnknownAuthority, nameMatch: true, errHas: `incomplete chain`},
		{name: "self-signed", chain: chainOf(self), host: "a.example", roots: roots,
			trust: probes.TrustSelfSigned, nameMatch: true, errHas: `self-signed certificate "a.example"`},
		{name: "untrusted root sent", chain: chainOf(good, p.inter.Cert, p.root.Cert), host: "a.example", roots: p.oldRoot.Pool(),
			trust: probes.TrustUnknownAuthority, nameMatch: true, errHas: `untrusted root: the chain ends at "Test Root"`},
		{name: "extra expired cross-sign still trusted", chain: chainOf(good, p.inter.Cert, expiredCross), host: "a.example", roots: bothRoots,
			trust: probes.Trusted, nameMatch: true,
			paths: [][]*x509.Certificate{{good.Cert, p.inter.Cert, p.root.Cert}}},
		{name: "valid cross-sign gives two paths", chain: chainOf(good, p.inter.Cert, validCross), host: "a.example", roots: bothRoots,
			trust: probes.Trusted, nameMatch: true,
			paths: [][]*x509.Certificate{{good.Cert, p.inter.Cert, p.root.Cert}, {good.Cert, p.inter.Cert, validCross, p.oldRoot.Cert}}},
		{name: "only path via expired cross-sign", chain: chainOf(good, p.inter.Cert, expiredCross), host: "a.example", roots: p.oldRoot.Pool(),
			trust: probes.TrustExpired, nameMatch: true, errHas: `"Test Root" expired at`,
			paths: [][]*x509.Certificate{{good.Cert, p.inter.Cert, expiredCross, p.oldRoot.Cert}}},
		{name: "name constraint violated", chain: constrained, host: "a.example", roots: constrainedRoots,
			trust: probes.TrustInvalid, nameMatch: true, errHas: "not permitted"},
		{name: "no chain", chain: nil, host: "a.example", roots: roots, trust: probes.TrustNotChecked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := probes.Verify(tt.chain, tt.host, tt.roots, now)
			if got.Trust != tt.trust {
				t.Errorf("Trust = %q (%s), want %q", got.Trust, got.Error, tt.trust)
			}
			if got.NameMatch != tt.nameMatch {
				t.Errorf("NameMatch = %v, want %v", got.NameMatch, tt.nameMatch)
			}
			if tt.errHas != "" && !strings.Contains(got.Error, tt.errHas) {
				t.Errorf("Error = %q, want it to contain %q", got.Error, tt.errHas)
			}
			if tt.errHas == "" && got.Error != "" {
				t.Errorf("Error = %q, want none", got.Error)
			}
			if !samePaths(got.Paths, tt.paths) {
				t.Errorf("Paths = %s, want %s", describePaths(got.Paths), describePaths(tt.paths))
			}
		})
	}
}

// samePaths compares paths as sets, by certificate identity.
func samePaths(got, want [][]*x509.Certificate) bool {
	if len(got) != len(want) {
		return false
	}
	used := make([]bool, len(got))
outer:
	for _, w := range want {
		for i, g := range got {
			if !used[i] && samePath(g, w) {
				used[i] = true
				continue outer
			}
		}
		return false
	}
	return true
}

func samePath(a, b []*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func describePaths(paths [][]*x509.Certificate) string {
	var parts []string
	for _, p := range paths {
		var names []string
		for _, c := range p {
			names = append(names, c.Subject.CommonName+"/"+c.Issuer.CommonName)
		}
		parts = append(parts, "["+strings.Join(names, " > ")+"]")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// TestVerifyRequiresServerAuth: a certificate whose extended key usage does
// not allow TLS server authentication is rejected by browsers and Go
// clients, so it must not be reported as trusted.
func TestVerifyRequiresServerAuth(t *testing.T) {
	p := newPKI(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(4242),
		Subject:      pkix.Name{CommonName: "client.example"},
		DNSNames:     []string{"client.example"},
		NotBefore:    now.Add(-day),
		NotAfter:     now.Add(90 * day),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.inter.Cert, &key.PublicKey, p.inter.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	v := probes.Verify([]*x509.Certificate{cert, p.inter.Cert}, "client.example", p.root.Pool(), now)
	if v.Trust == probes.Trusted {
		t.Fatalf("Verify of a client-auth-only certificate = trusted, want it rejected")
	}
	if !strings.Contains(v.Error, "key usage") {
		t.Errorf("error %q does not say the key usage is wrong", v.Error)
	}
}

package probes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/certwatch/certwatch/internal/certtest"
)

var cacheNow = time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)

// mintCA issues a CA certificate for cn, signed by parent (self-signed
// when parent is nil), after mod has adjusted its template.
func mintCA(t *testing.T, cn string, parent *certtest.CA, mod func(*x509.Certificate)) *certtest.CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             cacheNow.AddDate(-1, 0, 0),
		NotAfter:              cacheNow.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if mod != nil {
		mod(tmpl)
	}
	signer, signKey, chain := tmpl, key, []*x509.Certificate(nil)
	if parent != nil {
		signer, signKey, chain = parent.Cert, parent.Key, parent.Chain
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &certtest.CA{Cert: cert, Key: key}
	if parent != nil {
		ca.Chain = append([]*x509.Certificate{cert}, chain...)
	}
	return ca
}

func mintLeaf(t *testing.T, ca *certtest.CA, name string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	l, err := ca.Leaf(certtest.LeafOptions{DNSNames: []string{name}, NotBefore: notBefore, NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	return l.Cert
}

// TestCacheAgreesWithVerify checks that the cached verification, cold and
// warm, and through a known issuer for a new leaf, says exactly what a
// whole verification of the chain says, including for the chains where
// the issuer shortcut would be wrong.
func TestCacheAgreesWithVerify(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	root := mintCA(t, "Root", nil, nil)
	oldRoot := mintCA(t, "Old Root", nil, nil)
	inter := mintCA(t, "Intermediate", root, nil)
	expiredInter := mintCA(t, "Expired Intermediate", root, func(c *x509.Certificate) { c.NotAfter = cacheNow.Add(-day) })
	// Name constraints on the intermediate: the leaf must be refused, which
	// a check of the leaf against the intermediate alone would not see if
	// the constraint sat higher up; here it sits on the root.
	ncRoot := mintCA(t, "Constrained Root", nil, func(c *x509.Certificate) { c.PermittedDNSDomains = []string{"allowed.example"} })
	ncInter := mintCA(t, "Under Constrained Root", ncRoot, nil)
	// Path length: a root that allows no intermediate below it.
	plRoot := mintCA(t, "Path Length Root", nil, func(c *x509.Certificate) { c.MaxPathLen, c.MaxPathLenZero = 0, true })
	plInter := mintCA(t, "Under Path Length Root", plRoot, nil)
	// Explicit policy required from two certificates below one above the
	// issuer: met when the issuer is verified alone, not with the leaf.
	// (crypto/x509 parses policy constraints but does not write them.)
	polUpper := mintCA(t, "Policy Intermediate", root, func(c *x509.Certificate) {
		c.ExtraExtensions = []pkix.Extension{{
			Id: []int{2, 5, 29, 36}, Critical: true, // policyConstraints
			Value: []byte{0x30, 0x03, 0x80, 0x01, 0x02}, // requireExplicitPolicy 2
		}}
	})
	polInter := mintCA(t, "Under Policy Intermediate", polUpper, nil)
	// An intermediate that is not a CA.
	notCA := mintCA(t, "Not A CA", root, func(c *x509.Certificate) { c.IsCA = false; c.KeyUsage = x509.KeyUsageDigitalSignature })
	cross, err := oldRoot.CrossSign(root, cacheNow.AddDate(-1, 0, 0), cacheNow.AddDate(1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	roots := certtest.CertPool(root.Cert, oldRoot.Cert, ncRoot.Cert, plRoot.Cert)

	good := func() *x509.Certificate {
		return mintLeaf(t, inter, "a.example", cacheNow.Add(-day), cacheNow.Add(30*day))
	}
	tests := []struct {
		name  string
		chain func() []*x509.Certificate
		trust Trust
		// viaIssuer: the shortcut answers for this chain.
		viaIssuer bool
	}{
		{"trusted", func() []*x509.Certificate { return []*x509.Certificate{good(), inter.Cert} }, Trusted, true},
		{"cross-signed second path", func() []*x509.Certificate { return []*x509.Certificate{good(), inter.Cert, cross} }, Trusted, true},
		{"leaf under a root, extra certificate", func() []*x509.Certificate {
			return []*x509.Certificate{mintLeaf(t, root, "a.example", cacheNow.Add(-day), cacheNow.Add(30*day)), root.Cert}
		}, Trusted, true},
		{"expired leaf", func() []*x509.Certificate {
			return []*x509.Certificate{mintLeaf(t, inter, "a.example", cacheNow.Add(-60*day), cacheNow.Add(-day)), inter.Cert}
		}, TrustExpired, false},
		{"expired intermediate", func() []*x509.Certificate {
			return []*x509.Certificate{mintLeaf(t, expiredInter, "a.example", cacheNow.Add(-day), cacheNow.Add(30*day)), expiredInter.Cert}
		}, TrustExpired, false},
		{"name constraint above the issuer", func() []*x509.Certificate {
			return []*x509.Certificate{mintLeaf(t, ncInter, "a.example", cacheNow.Add(-day), cacheNow.Add(30*day)), ncInter.Cert}
		}, TrustInvalid, false},
		{"path length above the issuer", func() []*x509.Certificate {
			return []*x509.Certificate{mintLeaf(t, plInter, "a.example", cacheNow.Add(-day), cacheNow.Add(30*day)), plInter.Cert}
		}, TrustInvalid, false},
		{"explicit policy above the issuer", func() []*x509.Certificate {
			return []*x509.Certificate{mintLeaf(t, polInter, "a.example", cacheNow.Add(-day), cacheNow.Add(30*day)), polInter.Cert, polUpper.Cert}
		}, TrustInvalid, false},
		{"issuer is not a CA", func() []*x509.Certificate {
			return []*x509.Certificate{mintLeaf(t, notCA, "a.example", cacheNow.Add(-day), cacheNow.Add(30*day)), notCA.Cert}
		}, TrustUnknownAuthority, false},
		{"missing intermediate", func() []*x509.Certificate { return []*x509.Certificate{good()} }, TrustUnknownAuthority, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vc := newVerifyCache(roots)
			first, second := tt.chain(), tt.chain() // two leaves, same issuers
			for i, step := range []struct {
				what  string
				chain []*x509.Certificate
			}{{"cold", first}, {"warm chain", first}, {"new leaf, warm issuer", second}} {
				got := vc.verify(step.chain, cacheNow)
				want := verifyChain(step.chain, roots, cacheNow)
				if got.trust != want.trust || got.msg != want.msg || !samePathSet(got.paths, want.paths) {
					t.Fatalf("%s: cached = %q %q %d paths, whole = %q %q %d paths", step.what, got.trust, got.msg, len(got.paths), want.trust, want.msg, len(want.paths))
				}
				if i == 0 && got.trust != tt.trust {
					t.Errorf("trust = %q (%s), want %q", got.trust, got.msg, tt.trust)
				}
			}
			if _, took := vc.viaIssuer(second, chainSums(second), cacheNow); took != tt.viaIssuer {
				t.Errorf("issuer shortcut taken = %v, want %v", took, tt.viaIssuer)
			}
		})
	}
}

// TestCacheHoldsNoLeaf checks that the cache keeps no leaf alive once its
// observation is gone (a sweep of unique leaves must not accumulate them),
// and that a cached result is not reused once a certificate's validity
// changes.
func TestCacheHoldsNoLeaf(t *testing.T) {
	t.Parallel()
	root := mintCA(t, "Root", nil, nil)
	inter := mintCA(t, "Intermediate", root, nil)
	vc := newVerifyCache(certtest.CertPool(root.Cert))

	// Each leaf is verified, and its result (the paths, holding the
	// leaf) dropped, inside verifyOnce; only a weak pointer leaves it.
	verifyOnce := func(notAfter time.Time, at time.Time) (weak.Pointer[x509.Certificate], Trust) {
		leaf := mintLeaf(t, inter, "a.example", cacheNow.Add(-time.Hour), notAfter)
		r := vc.verify([]*x509.Certificate{leaf, inter.Cert}, at)
		return weak.Make(leaf), r.trust
	}
	var leaves []weak.Pointer[x509.Certificate]
	for _, at := range []time.Time{cacheNow, cacheNow, cacheNow.Add(2 * time.Hour)} {
		wp, trust := verifyOnce(cacheNow.Add(time.Hour), at)
		want := Trusted
		if at.After(cacheNow) {
			want = TrustExpired // the leaf expired: no stale cached result
		}
		if trust != want {
			t.Errorf("verify at %v: trust = %q, want %q", at, trust, want)
		}
		leaves = append(leaves, wp)
	}
	runtime.GC()
	runtime.GC()
	for i, wp := range leaves {
		if wp.Value() != nil {
			t.Errorf("leaf %d is still reachable after its verification: the cache holds it", i)
		}
	}
	if n := len(vc.chains); n != len(leaves) {
		t.Errorf("cache holds %d chains, want %d: the results must stay cached", n, len(leaves))
	}
}

func samePathSet(a, b [][]*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
next:
	for _, p := range a {
		for i, q := range b {
			if !used[i] && len(p) == len(q) && samePathCerts(p, q) {
				used[i] = true
				continue next
			}
		}
		return false
	}
	return true
}

func samePathCerts(p, q []*x509.Certificate) bool {
	for i := range p {
		if !p[i].Equal(q[i]) {
			return false
		}
	}
	return true
}

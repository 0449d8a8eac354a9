package probes_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"testing"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/probes"
)

// withSignatureOID re-encodes c as signed with the algorithm oid (inner and
// outer AlgorithmIdentifier, no parameters) and a signature of junk: what a
// certificate signed with ML-DSA or SLH-DSA looks like to crypto/x509, which
// parses it without knowing the algorithm.
func withSignatureOID(t *testing.T, c *x509.Certificate, oid asn1.ObjectIdentifier) *x509.Certificate {
	t.Helper()
	algo := func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oid) })
	}
	tbs := cryptobyte.String(c.RawTBSCertificate)
	var inner cryptobyte.String
	if !tbs.ReadASN1(&inner, cbasn1.SEQUENCE) {
		t.Fatal("bad TBSCertificate")
	}
	var version, serial cryptobyte.String
	var versionTag, serialTag cbasn1.Tag
	if !inner.ReadAnyASN1Element(&version, &versionTag) || !inner.ReadAnyASN1Element(&serial, &serialTag) || !inner.SkipASN1(cbasn1.SEQUENCE) {
		t.Fatal("bad TBSCertificate fields")
	}
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddBytes(version)
			b.AddBytes(serial)
			algo(b)
			b.AddBytes(inner) // issuer onwards, unchanged
		})
		algo(b)
		b.AddASN1BitString(make([]byte, 64))
	})
	der, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	out, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("re-encoded certificate does not parse: %v", err)
	}
	return out
}

func TestSignatureAlgorithmNames(t *testing.T) {
	p := newPKI(t)
	l := leaf(t, p.inter, "a.example", now.Add(-day), now.Add(30*day))
	if got := probes.SignatureAlgorithm(l.Cert); got != "ECDSA-SHA256" {
		t.Errorf("classical certificate: %q, want ECDSA-SHA256", got)
	}
	for _, tt := range []struct {
		oid  asn1.ObjectIdentifier
		want string
	}{
		{asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 3, 17}, "ML-DSA-44"},
		{asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 3, 18}, "ML-DSA-65"},
		{asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 3, 19}, "ML-DSA-87"},
		{asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 3, 20}, "SLH-DSA-SHA2-128s"},
		{asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 3, 31}, "SLH-DSA-SHAKE-256f"},
		{asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, "1.3.6.1.4.1.99999.1"},
	} {
		c := withSignatureOID(t, l.Cert, tt.oid)
		if c.SignatureAlgorithm != x509.UnknownSignatureAlgorithm {
			t.Fatalf("%v: crypto/x509 knows it as %v; the test needs an algorithm it does not know", tt.oid, c.SignatureAlgorithm)
		}
		if got := probes.SignatureAlgorithm(c); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.oid, got, tt.want)
		}
	}
}

// TestEarliestSCT reads the timestamps of an embedded SCT list as a CA
// encodes it (RFC 6962, 3.3), and reports none for a certificate without.
func TestEarliestSCT(t *testing.T) {
	p := newPKI(t)
	t1, t2 := now.Add(-3*day).Truncate(time.Millisecond), now.Add(-5*day).Truncate(time.Millisecond)
	l := p.inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"a.example"}, NotBefore: now.Add(-day), NotAfter: now.Add(30 * day),
		Extensions: []pkix.Extension{certtest.SCTList(t1, t2)}})
	if got, ok := probes.EarliestSCT(l.Cert); !ok || !got.Equal(t2) {
		t.Errorf("EarliestSCT = %v, %v; want %v", got, ok, t2)
	}
	plain := leaf(t, p.inter, "b.example", now.Add(-day), now.Add(30*day))
	if got, ok := probes.EarliestSCT(plain.Cert); ok {
		t.Errorf("EarliestSCT without SCTs = %v, true", got)
	}
}

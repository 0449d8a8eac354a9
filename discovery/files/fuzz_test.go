package files

import (
	"bytes"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/deatil/go-cryptobin/jceks"
	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/certwatch/certwatch/internal/certtest"
)

// FuzzParse: whatever a file in a configured glob holds (a keystore cut
// short, lengths that lie, garbage after a magic number), parse returns
// certificates or an error, never a panic.
func FuzzParse(f *testing.F) {
	ca := certtest.MustCA("fuzz root", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	ks := jceks.NewJCEKS()
	if err := ks.AddTrustedCert("root", ca.Cert); err != nil {
		f.Fatal(err)
	}
	store, err := ks.Marshal(javaDefault)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(store)
	f.Add(store[:len(store)/2])
	f.Add(append(append([]byte{}, jceksMagic...), 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff))
	f.Add(append(append([]byte{}, jksMagic...), 0, 0, 0, 2, 0x7f, 0xff, 0xff, 0xff))
	f.Add(certtest.PEM(ca.Cert))
	f.Add(ca.Cert.Raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parse("fuzz", b, "")
	})
}

// FuzzJKS: whatever follows a JKS magic number, the walk refuses it or
// keystore-go reads it without running out of the file: every length and
// count the walk accepts is one the library can read (it may still find
// the digest wrong), and none it refuses is read first.
func FuzzJKS(f *testing.F) {
	ca := certtest.MustCA("fuzz root", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"fuzz.example"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
	key, err := x509.MarshalPKCS8PrivateKey(leaf.Key)
	if err != nil {
		f.Fatal(err)
	}
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("root", keystore.TrustedCertificateEntry{CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X509", Content: ca.Cert.Raw}}); err != nil {
		f.Fatal(err)
	}
	chain := []keystore.Certificate{{Type: "X509", Content: leaf.Cert.Raw}, {Type: "X509", Content: ca.Cert.Raw}}
	if err := ks.SetPrivateKeyEntry("server", keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: key, CertificateChain: chain}, []byte(javaDefault)); err != nil {
		f.Fatal(err)
	}
	var store bytes.Buffer
	if err := ks.Store(&store, []byte(javaDefault)); err != nil {
		f.Fatal(err)
	}
	f.Add(store.Bytes())
	f.Add(store.Bytes()[:store.Len()/2])
	f.Add(append(append([]byte{}, jksMagic...), 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff))
	f.Add(append(append([]byte{}, jksMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xf0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !bytes.HasPrefix(b, jksMagic) {
			b = append(append([]byte{}, jksMagic...), b...)
		}
		if _, err := parse("fuzz.jks", b, ""); err != nil && !strings.Contains(err.Error(), "JKS keystore") {
			t.Errorf("error not naming the keystore: %v", err)
		}
		if checkJKS(b) != nil {
			return
		}
		err := keystore.New().Load(bytes.NewReader(b), []byte(javaDefault))
		if err != nil && !strings.Contains(err.Error(), "invalid digest") && !strings.Contains(err.Error(), "unknown version") {
			t.Errorf("the walk accepted what keystore-go cannot read: %v", err)
		}
	})
}

// FuzzPKCS12: whatever a DER file holds, the PKCS#12 walk refuses it,
// finds it no keystore, or lets go-pkcs12 read it within the bounds: it
// never panics, and what it finds no keystore go-pkcs12 cannot read
// either (were it wrong, go-pkcs12 would run whatever it found unchecked).
func FuzzPKCS12(f *testing.F) {
	ca := certtest.MustCA("fuzz root", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	leaf := ca.MustLeaf(certtest.LeafOptions{DNSNames: []string{"fuzz.example"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
	for _, enc := range []*pkcs12.Encoder{pkcs12.LegacyRC2, pkcs12.LegacyDES, pkcs12.Modern2023, pkcs12.Modern2026} {
		b, err := enc.Encode(leaf.Key, leaf.Cert, []*x509.Certificate{ca.Cert}, "")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	trust, err := pkcs12.Modern2023.EncodeTrustStore([]*x509.Certificate{ca.Cert}, javaDefault)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(trust)
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := parsePKCS12("fuzz.p12", b, ""); err != nil && !strings.Contains(err.Error(), "PKCS#12 keystore") {
			t.Errorf("error not naming the keystore: %v", err)
		}
		if w, err := walkPKCS12(b); w == nil && err == nil {
			if _, _, _, err := pkcs12.DecodeChain(b, ""); err == nil {
				t.Errorf("the walk found no keystore where go-pkcs12 reads one")
			}
		}
	})
}

// Package certtest mints certificate authorities, intermediates and leaf
// certificates at run time, relative to a caller-chosen time, and serves
// them (or deliberately broken endpoints) on loopback TCP listeners.
//
// It backs the probe tests and the "certwatch demo" lab, so nothing here
// depends on the testing package: constructors return errors. No key or
// certificate is ever committed; every key is a fresh ECDSA P-256 key,
// unless a leaf asks for a (deliberately weak) RSA key.
package certtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority that can issue intermediates and leaves.
// A CA is safe for concurrent use; its fields must not be modified.
type CA struct {
	// Cert is the CA certificate: self-signed for a root, signed by the
	// parent for an intermediate.
	Cert *x509.Certificate
	// Key is the CA's private key.
	Key *ecdsa.PrivateKey
	// Chain is the chain a server would send above a leaf issued by this
	// CA: Cert followed by the parent intermediates, without the root.
	// It is empty for a root.
	Chain []*x509.Certificate
}

// LeafOptions describe a leaf certificate.
type LeafOptions struct {
	// CommonName is the subject CN; empty means the first DNS name, or
	// "certtest leaf".
	CommonName string
	// DNSNames and IPs are the subject alternative names.
	DNSNames []string
	IPs      []net.IP
	// NotBefore and NotAfter bound the validity period; both are required.
	NotBefore time.Time
	NotAfter  time.Time
	// RSABits, when set, gives the leaf an RSA key of that size (1024
	// for a weak key) instead of ECDSA P-256.
	RSABits int
	// SignatureAlgorithm is how the issuer signs the leaf, e.g.
	// x509.ECDSAWithSHA1 for a legacy leaf; zero means the default.
	SignatureAlgorithm x509.SignatureAlgorithm
	// Revocation says where the leaf's revocation status is published.
	Revocation Revocation
	// Extensions are added to the leaf as they are (e.g. SCTList's).
	Extensions []pkix.Extension
}

// Revocation names where a certificate's revocation status is published:
// CRL distribution points and OCSP responders (HTTP URLs).
type Revocation struct {
	CRL  []string
	OCSP []string
}

// Leaf is an end-entity certificate and its key.
type Leaf struct {
	// Cert is the leaf certificate.
	Cert *x509.Certificate
	// Key is the leaf's private key; nil when LeafOptions.RSABits was
	// set, and RSAKey holds it instead.
	Key    *ecdsa.PrivateKey
	RSAKey *rsa.PrivateKey
	// Intermediates are the certificates between Cert and the root (the
	// issuing CA's Chain); empty for a leaf issued by a root or self-signed.
	Intermediates []*x509.Certificate
}

// NewCA creates a self-signed root CA valid from notBefore to notAfter.
func NewCA(cn string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("new ca %q: %w", cn, err)
	}
	tmpl, err := caTemplate(cn, notBefore, notAfter)
	if err != nil {
		return nil, fmt.Errorf("new ca %q: %w", cn, err)
	}
	cert, err := sign(tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("new ca %q: %w", cn, err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// MustCA is like NewCA but panics on error. For tests and fixed lab setups.
func MustCA(cn string, notBefore, notAfter time.Time) *CA {
	ca, err := NewCA(cn, notBefore, notAfter)
	if err != nil {
		panic(err)
	}
	return ca
}

// Intermediate issues an intermediate CA signed by ca. Its validity is not
// clipped to ca's, so expired or outliving intermediates can be built.
func (ca *CA) Intermediate(cn string, notBefore, notAfter time.Time) (*CA, error) {
	return ca.IntermediateWith(cn, notBefore, notAfter, Revocation{})
}

// IntermediateWith is like Intermediate, and names where the
// intermediate's revocation status (published by ca) is found.
func (ca *CA) IntermediateWith(cn string, notBefore, notAfter time.Time, r Revocation) (*CA, error) {
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("new intermediate %q: %w", cn, err)
	}
	tmpl, err := caTemplate(cn, notBefore, notAfter)
	if err != nil {
		return nil, fmt.Errorf("new intermediate %q: %w", cn, err)
	}
	tmpl.CRLDistributionPoints, tmpl.OCSPServer = r.CRL, r.OCSP
	cert, err := sign(tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("new intermediate %q: %w", cn, err)
	}
	chain := append([]*x509.Certificate{cert}, ca.Chain...)
	return &CA{Cert: cert, Key: key, Chain: chain}, nil
}

// MustIntermediate is like Intermediate but panics on error.
func (ca *CA) MustIntermediate(cn string, notBefore, notAfter time.Time) *CA {
	ic, err := ca.Intermediate(cn, notBefore, notAfter)
	if err != nil {
		panic(err)
	}
	return ic
}

// CrossSign issues a certificate for other's subject and public key, signed
// by ca, valid from notBefore to notAfter: a cross-signed certificate as
// found in bundles that serve a second path to an older root.
func (ca *CA) CrossSign(other *CA, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	tmpl, err := caTemplate(other.Cert.Subject.CommonName, notBefore, notAfter)
	if err != nil {
		return nil, fmt.Errorf("cross-sign %q: %w", other.Cert.Subject.CommonName, err)
	}
	tmpl.Subject = other.Cert.Subject
	tmpl.SubjectKeyId = other.Cert.SubjectKeyId
	cert, err := sign(tmpl, ca.Cert, other.Cert.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("cross-sign %q: %w", other.Cert.Subject.CommonName, err)
	}
	return cert, nil
}

// Leaf issues a server certificate signed by ca.
func (ca *CA) Leaf(o LeafOptions) (*Leaf, error) {
	key, err := o.newKey()
	if err != nil {
		return nil, fmt.Errorf("new leaf %q: %w", o.name(), err)
	}
	tmpl, err := leafTemplate(o)
	if err != nil {
		return nil, fmt.Errorf("new leaf %q: %w", o.name(), err)
	}
	cert, err := sign(tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("new leaf %q: %w", o.name(), err)
	}
	l := &Leaf{Cert: cert, Intermediates: append([]*x509.Certificate(nil), ca.Chain...)}
	l.setKey(key)
	return l, nil
}

// MustLeaf is like Leaf but panics on error.
func (ca *CA) MustLeaf(o LeafOptions) *Leaf {
	l, err := ca.Leaf(o)
	if err != nil {
		panic(err)
	}
	return l
}

// SelfSigned creates a self-signed server certificate (not a CA).
func SelfSigned(o LeafOptions) (*Leaf, error) {
	key, err := o.newKey()
	if err != nil {
		return nil, fmt.Errorf("new self-signed %q: %w", o.name(), err)
	}
	tmpl, err := leafTemplate(o)
	if err != nil {
		return nil, fmt.Errorf("new self-signed %q: %w", o.name(), err)
	}
	cert, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("new self-signed %q: %w", o.name(), err)
	}
	l := &Leaf{Cert: cert}
	l.setKey(key)
	return l, nil
}

// MustSelfSigned is like SelfSigned but panics on error.
func MustSelfSigned(o LeafOptions) *Leaf {
	l, err := SelfSigned(o)
	if err != nil {
		panic(err)
	}
	return l
}

func (l *Leaf) setKey(k crypto.Signer) {
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		l.Key = k
	case *rsa.PrivateKey:
		l.RSAKey = k
	}
}

// signer returns l's private key, whichever kind it is.
func (l *Leaf) signer() crypto.Signer {
	if l.RSAKey != nil {
		return l.RSAKey
	}
	return l.Key
}

// TLSCertificate returns l as a tls.Certificate whose served chain is the
// leaf followed by exactly extra, in order. Pass l.Intermediates... for a
// complete chain, nothing for a chain missing its intermediate, or extra
// certificates (an expired cross-sign, a root) to serve a padded bundle.
func (l *Leaf) TLSCertificate(extra ...*x509.Certificate) tls.Certificate {
	der := make([][]byte, 0, 1+len(extra))
	der = append(der, l.Cert.Raw)
	for _, c := range extra {
		der = append(der, c.Raw)
	}
	return tls.Certificate{Certificate: der, PrivateKey: l.signer(), Leaf: l.Cert}
}

// FullChain returns l as a tls.Certificate serving the leaf and all its
// intermediates, as a correctly configured server would.
func (l *Leaf) FullChain() tls.Certificate {
	return l.TLSCertificate(l.Intermediates...)
}

// KeyPEM returns l's private key as a PKCS #8 "PRIVATE KEY" PEM block.
func (l *Leaf) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(l.signer())
	if err != nil {
		return nil, fmt.Errorf("marshal key of %q: %w", l.Cert.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// PEM returns the CA certificate as a PEM block, as an operator would put
// it in a CA file.
func (ca *CA) PEM() []byte {
	return PEM(ca.Cert)
}

// Pool returns a new pool holding only ca's certificate.
func (ca *CA) Pool() *x509.CertPool {
	return CertPool(ca.Cert)
}

// PEM encodes certs as consecutive "CERTIFICATE" PEM blocks.
func PEM(certs ...*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// CertPool returns a new pool holding certs.
func CertPool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

func (o LeafOptions) name() string {
	switch {
	case o.CommonName != "":
		return o.CommonName
	case len(o.DNSNames) > 0:
		return o.DNSNames[0]
	case len(o.IPs) > 0:
		return o.IPs[0].String()
	}
	return "certtest leaf"
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func (o LeafOptions) newKey() (crypto.Signer, error) {
	if o.RSABits > 0 {
		return rsa.GenerateKey(rand.Reader, o.RSABits)
	}
	return newKey()
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func checkValidity(notBefore, notAfter time.Time) error {
	if notBefore.IsZero() || notAfter.IsZero() {
		return fmt.Errorf("validity period not set (notBefore %v, notAfter %v)", notBefore, notAfter)
	}
	if !notAfter.After(notBefore) {
		return fmt.Errorf("notAfter %v is not after notBefore %v", notAfter, notBefore)
	}
	return nil
}

func caTemplate(cn string, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	if err := checkValidity(notBefore, notAfter); err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"certtest"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil
}

func leafTemplate(o LeafOptions) (*x509.Certificate, error) {
	if err := checkValidity(o.NotBefore, o.NotAfter); err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: o.name(), Organization: []string{"certtest"}},
		DNSNames:              o.DNSNames,
		IPAddresses:           o.IPs,
		NotBefore:             o.NotBefore,
		NotAfter:              o.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		SignatureAlgorithm:    o.SignatureAlgorithm,
		CRLDistributionPoints: o.Revocation.CRL,
		OCSPServer:            o.Revocation.OCSP,
		ExtraExtensions:       o.Extensions,
	}, nil
}

func sign(tmpl, parent *x509.Certificate, pub any, key crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

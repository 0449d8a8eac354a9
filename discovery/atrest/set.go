package atrest

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// Set collects the certificates a source reads: one Certificate per
// fingerprint, with every location it was found in. It keeps the parsed
// CA certificates (to verify and link what they issued) and, per
// certificate, its summary and a few bytes to find its issuer; never the
// DER of a leaf. Set is not safe for concurrent use; the zero value is
// ready and verifies nothing (Roots nil).
type Set struct {
	// Roots are the trusted roots certificates are verified against
	// (Certificate.Verified); nil leaves every certificate unverified.
	Roots *x509.CertPool
	// Now is the time certificates are verified at; zero means the time
	// of each Add.
	Now time.Time

	certs []Certificate
	links []link
	byFP  map[string]int
	// cas holds every CA certificate added, as intermediates for the
	// verification of what comes after; caBy finds the CAs with a
	// subject name.
	cas     *x509.CertPool
	caBy    map[nameKey][]int
	strings map[string]string
}

// nameKey is the hash of a raw distinguished name: certificates are
// linked to their issuer by name without keeping the names.
type nameKey [16]byte

func keyOf(raw []byte) nameKey {
	sum := sha256.Sum256(raw)
	return nameKey(sum[:16])
}

// link is what links a certificate to its issuer: the issuer's name and
// authority key ID, its own subject and subject key ID (for a CA).
type link struct {
	issuer, subject nameKey
	aki, ski        string
}

// Add adds the certificates found together in one place (a PEM bundle, a
// Secret's tls.crt, a keystore entry's chain) at loc: each is numbered in
// loc.Index (from 1) when there are several. A certificate already in the
// set gains the location. CAs among them are intermediates for the
// verification of the others and of every later Add.
func (s *Set) Add(loc Location, certs ...*x509.Certificate) {
	if s.byFP == nil {
		s.byFP = map[string]int{}
		s.cas = x509.NewCertPool()
		s.caBy = map[nameKey][]int{}
		s.strings = map[string]string{}
	}
	for _, c := range certs {
		if c.IsCA {
			s.cas.AddCert(c)
		}
	}
	now := cmp.Or(s.Now, time.Now())
	for i, c := range certs {
		l := loc
		if len(certs) > 1 {
			l.Index = i + 1
		}
		sum := sha256.Sum256(c.Raw)
		fp := hex.EncodeToString(sum[:])
		if k, ok := s.byFP[fp]; ok {
			// A place read twice is one: Certificates compacts them.
			s.certs[k].Locations = append(s.certs[k].Locations, l)
			continue
		}
		d := s.describe(c, fp)
		d.Locations = []Location{l}
		if s.Roots != nil {
			_, err := c.Verify(x509.VerifyOptions{Roots: s.Roots, Intermediates: s.cas, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			d.Verified = err == nil
		}
		lk := link{issuer: keyOf(c.RawIssuer), subject: keyOf(c.RawSubject), aki: string(c.AuthorityKeyId)}
		s.byFP[fp] = len(s.certs)
		if c.IsCA {
			lk.ski = string(c.SubjectKeyId)
			s.caBy[lk.subject] = append(s.caBy[lk.subject], len(s.certs))
		}
		s.certs = append(s.certs, d)
		s.links = append(s.links, lk)
	}
}

// Len is how many distinct certificates the set holds.
func (s *Set) Len() int { return len(s.certs) }

// Certificates returns the certificates, each with its Issuers found
// among the CAs of the set and its locations sorted, by NotAfter and
// fingerprint. It ends the set's use: the set must not be added to after.
func (s *Set) Certificates() []Certificate {
	for i := range s.certs {
		c := &s.certs[i]
		slices.SortFunc(c.Locations, Location.Compare)
		c.Locations = slices.Compact(c.Locations)
		if c.SelfSigned {
			continue
		}
		seen := map[int]bool{i: true}
		for at := i; len(c.Issuers) < 8; {
			up, ok := s.issuerOf(at, seen)
			if !ok {
				break
			}
			c.Issuers = append(c.Issuers, s.certs[up].SHA256)
			if s.certs[up].SelfSigned {
				break
			}
			seen[up] = true
			at = up
		}
	}
	out := s.certs
	slices.SortFunc(out, func(a, b Certificate) int {
		return cmp.Or(a.NotAfter.Compare(b.NotAfter), strings.Compare(a.SHA256, b.SHA256))
	})
	*s = Set{Roots: s.Roots, Now: s.Now}
	return out
}

// issuerOf finds the CA that issued certificate i, by name and key ID:
// of several, the one that lives longest.
func (s *Set) issuerOf(i int, seen map[int]bool) (int, bool) {
	lk := s.links[i]
	best := -1
	for _, k := range s.caBy[lk.issuer] {
		if seen[k] || (lk.aki != "" && s.links[k].ski != "" && lk.aki != s.links[k].ski) {
			continue
		}
		if best < 0 || s.certs[k].NotAfter.After(s.certs[best].NotAfter) {
			best = k
		}
	}
	return best, best >= 0
}

// describe summarises c, sharing equal issuer names.
func (s *Set) describe(c *x509.Certificate, fp string) Certificate {
	d := Certificate{
		SHA256:             fp,
		Subject:            subjectOf(c),
		Issuer:             s.intern(issuerOf(c)),
		Serial:             c.SerialNumber.Text(16),
		DNSNames:           c.DNSNames,
		NotBefore:          c.NotBefore.UTC(),
		NotAfter:           c.NotAfter.UTC(),
		CA:                 c.IsCA,
		SelfSigned:         string(c.RawIssuer) == string(c.RawSubject) && c.CheckSignatureFrom(c) == nil,
		SignatureAlgorithm: c.SignatureAlgorithm.String(),
		WeakSignature:      WeakSignature(c.SignatureAlgorithm),
	}
	d.KeyAlgorithm, d.KeyBits = publicKey(c)
	d.KeyAlgorithm = s.intern(d.KeyAlgorithm)
	d.SignatureAlgorithm = s.intern(d.SignatureAlgorithm)
	return d
}

func (s *Set) intern(v string) string {
	if w, ok := s.strings[v]; ok {
		return w
	}
	s.strings[v] = v
	return v
}

// publicKey names c's public key algorithm and its size.
func publicKey(c *x509.Certificate) (string, int) {
	switch k := c.PublicKey.(type) {
	case *rsa.PublicKey:
		return "RSA", k.N.BitLen()
	case *ecdsa.PublicKey:
		return "ECDSA", k.Curve.Params().BitSize
	case ed25519.PublicKey:
		return "Ed25519", 0
	}
	return c.PublicKeyAlgorithm.String(), 0
}

// WeakSignature reports whether alg is MD2, MD5 or SHA-1 based, which
// clients refuse below a root (the same rule as probes.WeakSignature).
func WeakSignature(alg x509.SignatureAlgorithm) bool {
	switch alg {
	case x509.MD2WithRSA, x509.MD5WithRSA, x509.SHA1WithRSA, x509.DSAWithSHA1, x509.ECDSAWithSHA1:
		return true
	}
	return false
}

func subjectOf(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	return c.Subject.String()
}

func issuerOf(c *x509.Certificate) string {
	if c.Issuer.CommonName != "" {
		return c.Issuer.CommonName
	}
	return c.Issuer.String()
}

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
// DER of a leaf. While a source reads, a location costs 12 bytes (the
// strings of an object and the kinds, keys and clusters are shared);
// Certificates lays them out as Locations once, in one allocation. Set is
// not safe for concurrent use; the zero value is ready and verifies
// nothing (Roots nil).
type Set struct {
	// Roots are the trusted roots certificates are verified against
	// (Certificate.Verified); nil leaves every certificate unverified.
	Roots *x509.CertPool
	// Now is the time certificates are verified at; zero means the time
	// of each Add.
	Now time.Time

	certs []Certificate // without Locations until Certificates
	refs  [][]ref       // certs[i]'s locations
	links []link
	byFP  map[[sha256.Size]byte]int
	// cas holds every CA certificate added, as intermediates for the
	// verification of what comes after; caBy finds the CAs with a
	// subject name.
	cas     *x509.CertPool
	caBy    map[nameKey][]int
	strings map[string]string
	// wheres are the Where of the locations added, each once in a row;
	// attrs their kind, key and cluster, each once.
	wheres  []string
	attrs   []attr
	attrIDs map[attr]uint32
	items   []item // Add's scratch
}

// ref is a location while the set is built: indexes into wheres and
// attrs, and Location.Index.
type ref struct{ where, attr, index uint32 }

// attr is the part of a location that many share.
type attr struct {
	kind         Kind
	key, cluster string
}

// item is a certificate being added: its fingerprint, and the parsed
// certificate unless the set holds it already.
type item struct {
	sum [sha256.Size]byte
	c   *x509.Certificate
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
	s.items = s.items[:0]
	for _, c := range certs {
		s.items = append(s.items, item{sha256.Sum256(c.Raw), c})
	}
	s.add(loc, s.items)
}

// AddDER is Add for certificates in DER, as a source reads them: only
// those the set does not hold yet are parsed, so a CA bundle copied into
// ten thousand Secrets is parsed once. A certificate that does not parse
// is left out (and out of the numbering); its error is returned.
func (s *Set) AddDER(loc Location, ders ...[]byte) []error {
	var errs []error
	s.items = s.items[:0]
	for _, d := range ders {
		it := item{sum: sha256.Sum256(d)}
		if _, ok := s.byFP[it.sum]; !ok {
			c, err := x509.ParseCertificate(d)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			it.c = c
		}
		s.items = append(s.items, it)
	}
	s.add(loc, s.items)
	return errs
}

// add adds items found together at loc; an item without a parsed
// certificate is one the set holds.
func (s *Set) add(loc Location, items []item) {
	if len(items) == 0 {
		return
	}
	if s.byFP == nil {
		s.byFP = map[[sha256.Size]byte]int{}
		s.cas = x509.NewCertPool()
		s.caBy = map[nameKey][]int{}
		s.strings = map[string]string{}
		s.attrIDs = map[attr]uint32{}
	}
	for _, it := range items {
		if it.c != nil && it.c.IsCA {
			s.cas.AddCert(it.c)
		}
	}
	r := s.ref(loc)
	now := cmp.Or(s.Now, time.Now())
	for i, it := range items {
		if len(items) > 1 {
			r.index = uint32(i + 1)
		}
		if k, ok := s.byFP[it.sum]; ok {
			// A place read twice is one: Certificates compacts them.
			s.refs[k] = append(s.refs[k], r)
			continue
		}
		c := it.c
		d := s.describe(c, hex.EncodeToString(it.sum[:]))
		if s.Roots != nil {
			_, err := c.Verify(x509.VerifyOptions{Roots: s.Roots, Intermediates: s.cas, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			d.Verified = err == nil
		}
		lk := link{issuer: keyOf(c.RawIssuer), subject: keyOf(c.RawSubject), aki: string(c.AuthorityKeyId)}
		s.byFP[it.sum] = len(s.certs)
		if c.IsCA {
			lk.ski = string(c.SubjectKeyId)
			s.caBy[lk.subject] = append(s.caBy[lk.subject], len(s.certs))
		}
		s.certs = append(s.certs, d)
		s.refs = append(s.refs, []ref{r})
		s.links = append(s.links, lk)
	}
}

// ref returns loc as a ref, its Index left out. The keys of one object
// are added in a row, so its Where is kept once.
func (s *Set) ref(loc Location) ref {
	if n := len(s.wheres); n == 0 || s.wheres[n-1] != loc.Where {
		s.wheres = append(s.wheres, loc.Where)
	}
	a := attr{kind: loc.Kind, key: loc.Key, cluster: loc.Cluster}
	id, ok := s.attrIDs[a]
	if !ok {
		id = uint32(len(s.attrs))
		s.attrs = append(s.attrs, a)
		s.attrIDs[a] = id
	}
	return ref{where: uint32(len(s.wheres) - 1), attr: id, index: uint32(loc.Index)}
}

// Len is how many distinct certificates the set holds.
func (s *Set) Len() int { return len(s.certs) }

// Certificates returns the certificates, each with its Issuers found
// among the CAs of the set and its locations sorted, by NotAfter and
// fingerprint. It ends the set's use: the set must not be added to after.
// Certificates issued by the same CA share their Issuers, and the
// Locations of all certificates share one array; each slice is capped at
// its length, so appending to one copies it.
func (s *Set) Certificates() []Certificate {
	// Chains first: what links certificates is dropped before the
	// locations are laid out.
	chains := map[int][]string{} // a CA's fingerprint and its Issuers
	for i := range s.certs {
		if c := &s.certs[i]; c.CA && !c.SelfSigned {
			c.Issuers = s.chain(i)
		}
	}
	for i := range s.certs {
		c := &s.certs[i]
		if c.CA || c.SelfSigned {
			continue
		}
		// A certificate that is not a CA issues nothing, so its chain is
		// its issuer's.
		up, ok := s.issuerOf(i, map[int]bool{i: true})
		if !ok {
			continue
		}
		ch, ok := chains[up]
		if !ok {
			ch = append([]string{s.certs[up].SHA256}, s.certs[up].Issuers...)
			ch = ch[:min(len(ch), maxIssuers):min(len(ch), maxIssuers)]
			chains[up] = ch
		}
		c.Issuers = ch
	}
	refs, wheres, attrs, out := s.refs, s.wheres, s.attrs, s.certs
	*s = Set{Roots: s.Roots, Now: s.Now}

	total := 0
	for _, rs := range refs {
		total += len(rs)
	}
	all := make([]Location, total)
	for i := range out {
		c := &out[i]
		rs := refs[i]
		locs := all[:len(rs):len(rs)]
		all = all[len(rs):]
		for j, r := range rs {
			a := attrs[r.attr]
			locs[j] = Location{Kind: a.kind, Where: wheres[r.where], Key: a.key, Index: int(r.index), Cluster: a.cluster}
		}
		refs[i] = nil
		slices.SortFunc(locs, Location.Compare)
		locs = slices.Compact(locs)
		c.Locations = locs[:len(locs):len(locs)]
	}
	slices.SortFunc(out, func(a, b Certificate) int {
		return cmp.Or(a.NotAfter.Compare(b.NotAfter), strings.Compare(a.SHA256, b.SHA256))
	})
	return out
}

// maxIssuers bounds Certificate.Issuers.
const maxIssuers = 8

// chain finds the fingerprints of the CAs above certificate i, issuer
// first, up to a root.
func (s *Set) chain(i int) []string {
	var out []string
	seen := map[int]bool{i: true}
	for at := i; len(out) < maxIssuers; {
		up, ok := s.issuerOf(at, seen)
		if !ok {
			break
		}
		out = append(out, s.certs[up].SHA256)
		if s.certs[up].SelfSigned {
			break
		}
		seen[up] = true
		at = up
	}
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
	if len(d.DNSNames) > 0 && d.Subject == d.DNSNames[0] {
		d.Subject = d.DNSNames[0] // one copy
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

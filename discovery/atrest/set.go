package atrest

import (
	"cmp"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Set collects the certificates a source reads: one Certificate per
// fingerprint, with every location it was found in. It keeps the parsed
// CA certificates (to verify and link what they issued, within
// MaxCAsPerSubject and MaxCAs; Err counts those left out) and, per
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
	// caBy finds the CAs of a subject name that link what they issued
	// (at most MaxCAsPerSubject each).
	caBy map[nameKey][]int
	// cas holds the CA certificates that verified, as intermediates for
	// the verification of what comes with and after them; waiting holds
	// those that did not, by the name of their issuer, until it comes.
	// kept counts both: the parsed CAs the set holds (at most MaxCAs).
	cas     *x509.CertPool
	waiting map[nameKey][]waitingCA
	kept    int
	// leftOut counts, by subject, the CAs beyond the bounds.
	leftOut map[nameKey]*leftOut
	strings map[string]string
	// wheres are the Where of the locations added, each once in a row;
	// attrs their kind, key and cluster, each once.
	wheres  []string
	attrs   []attr
	attrIDs map[attr]uint32
	items   []item  // Add's scratch
	fresh   []fresh // add's scratch
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
// set gains the location. CAs among them that verify are intermediates
// for the verification of the others and of every later Add; one that
// does not waits for its issuer, and verifies when it comes.
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

// Bounds on the CA certificates a set verifies and links through. Go's
// path building (x509.Certificate.Verify) tries as parent every CA of
// the name a certificate gives as its issuer, up to 100 signature checks
// a certificate, and linking (Certificates) walks them all: a PEM bundle
// of 15,000 CAs of one name with unrelated keys took 54 s and 186 MB to
// read, growing with the square of their number. Only the CAs that
// verify are parents in verification, at most MaxCAsPerSubject of a name
// in either, so a certificate costs a few signature checks however many
// CAs share its issuer's name; those left out are counted (Err).
const (
	// MaxCAsPerSubject bounds the CAs of one subject name that verify and
	// link what they issued. Real bundles hold one or two of a name (a
	// renewed CA beside the old one); more is a forged or runaway bundle.
	MaxCAsPerSubject = 16
	// MaxCAs bounds the parsed CA certificates a set keeps to verify
	// what is read after them, about 1.5 KB each: those that verified and
	// those waiting for their issuer.
	MaxCAs = 10000
)

// waitingCA is a CA that did not verify when it was added: s.certs[k],
// parsed.
type waitingCA struct {
	k int
	c *x509.Certificate
}

// leftOut counts the CAs of one subject left out as issuers, and where
// the first was found.
type leftOut struct {
	subject string
	overall bool // beyond MaxCAs, not of one subject
	n       int
	first   Location
}

// fresh is a certificate new to the set in an Add: s.certs[k], parsed;
// issuer is set for a CA that links what it issued.
type fresh struct {
	k      int
	c      *x509.Certificate
	issuer bool
}

// add adds items found together at loc; an item without a parsed
// certificate is one the set holds. The CAs among them are verified
// first, so that those that verify verify the others.
func (s *Set) add(loc Location, items []item) {
	if len(items) == 0 {
		return
	}
	if s.byFP == nil {
		s.byFP = map[[sha256.Size]byte]int{}
		s.cas = x509.NewCertPool()
		s.caBy = map[nameKey][]int{}
		s.waiting = map[nameKey][]waitingCA{}
		s.strings = map[string]string{}
		s.attrIDs = map[attr]uint32{}
	}
	r := s.ref(loc)
	news := s.fresh[:0]
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
		k := len(s.certs)
		lk := link{issuer: keyOf(c.RawIssuer), subject: keyOf(c.RawSubject), aki: string(c.AuthorityKeyId)}
		if c.IsCA {
			lk.ski = string(c.SubjectKeyId)
		}
		s.byFP[it.sum] = k
		s.certs = append(s.certs, s.describe(c, hex.EncodeToString(it.sum[:])))
		s.refs = append(s.refs, []ref{r})
		s.links = append(s.links, lk)
		news = append(news, fresh{k: k, c: c, issuer: c.IsCA && s.admit(k, c)})
	}
	if s.Roots != nil {
		now := cmp.Or(s.Now, time.Now())
		for _, f := range news {
			if f.issuer {
				s.verifyCA(f.k, f.c, now)
			}
		}
		for _, f := range news {
			if !f.issuer {
				s.certs[f.k].Verified = s.verify(f.c, now)
			}
		}
	}
	clear(news) // no parsed certificate outlives its Add here
	s.fresh = news[:0]
}

// admit makes CA k link what it issued, unless MaxCAsPerSubject CAs of
// its name do already.
func (s *Set) admit(k int, c *x509.Certificate) bool {
	subject := s.links[k].subject
	if len(s.caBy[subject]) >= MaxCAsPerSubject {
		s.leave(k, c, false)
		return false
	}
	s.caBy[subject] = append(s.caBy[subject], k)
	return true
}

// verify reports whether c verifies to a root through the CAs that
// verified before it.
func (s *Set) verify(c *x509.Certificate, now time.Time) bool {
	_, err := c.Verify(x509.VerifyOptions{Roots: s.Roots, Intermediates: s.cas, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// verifyCA verifies CA k: one that verifies verifies the others, one
// that does not waits for its issuer (trust).
func (s *Set) verifyCA(k int, c *x509.Certificate, now time.Time) {
	if s.verify(c, now) {
		s.trust(k, c, now)
		return
	}
	issuer := s.links[k].issuer
	if len(s.waiting[issuer]) >= MaxCAsPerSubject {
		s.leave(k, c, false)
		return
	}
	if s.keep(k, c) {
		s.waiting[issuer] = append(s.waiting[issuer], waitingCA{k: k, c: c})
	}
}

// trust makes CA k, which verified, an intermediate for what comes after
// it, and verifies again the CAs that wait for it: those it issued.
func (s *Set) trust(k int, c *x509.Certificate, now time.Time) {
	s.certs[k].Verified = true
	if !s.keep(k, c) {
		return
	}
	s.cas.AddCert(c)
	subject := s.links[k].subject
	waiting := s.waiting[subject]
	delete(s.waiting, subject)
	for _, w := range waiting {
		s.kept-- // kept again if it waits again
		s.verifyCA(w.k, w.c, now)
	}
}

// keep counts CA k among those the set keeps parsed, unless MaxCAs are
// already.
func (s *Set) keep(k int, c *x509.Certificate) bool {
	if s.kept >= MaxCAs {
		s.leave(k, c, true)
		return false
	}
	s.kept++
	return true
}

// maxSubjectLen bounds the subject names quoted in Err.
const maxSubjectLen = 200

// leave counts CA k, left out as an issuer: beyond MaxCAs when overall,
// else beyond MaxCAsPerSubject of its name.
func (s *Set) leave(k int, c *x509.Certificate, overall bool) {
	if s.leftOut == nil {
		s.leftOut = map[nameKey]*leftOut{}
	}
	key := s.links[k].subject
	if overall {
		key = nameKey{} // not the hash of any name
	}
	l, ok := s.leftOut[key]
	if !ok {
		subject := c.Subject.String()
		if len(subject) > maxSubjectLen {
			subject = strings.ToValidUTF8(subject[:maxSubjectLen], "") + "…"
		}
		l = &leftOut{subject: subject, overall: overall, first: s.locationOf(k)}
		s.leftOut[key] = l
	}
	l.n++
}

// locationOf is the first location of certificate k.
func (s *Set) locationOf(k int) Location {
	r := s.refs[k][0]
	a := s.attrs[r.attr]
	return Location{Kind: a.kind, Where: s.wheres[r.where], Key: a.key, Index: int(r.index), Cluster: a.cluster}
}

// maxLeftOutNamed bounds the subjects Err names.
const maxLeftOutNamed = 5

// Err reports the CA certificates left out as issuers, beyond
// MaxCAsPerSubject of one name or MaxCAs in all: they are among
// Certificates as any other, but what they issued is neither verified
// nor linked through them. Each subject is named, the most numerous
// first, with how many and where the first was found. Err is nil when
// none was left out; it may be called before or after Certificates.
func (s *Set) Err() error {
	var errs []error
	subjects := slices.SortedFunc(maps.Values(s.leftOut), func(a, b *leftOut) int {
		return cmp.Or(b.n-a.n, strings.Compare(a.subject, b.subject))
	})
	named := 0
	for _, l := range subjects {
		switch {
		case l.overall:
			errs = append(errs, fmt.Errorf("%d CA certificates (the first in %s) are not used to verify or link what they issued: more than %d CA certificates were read; narrow what the source reads", l.n, l.first, MaxCAs))
		case named < maxLeftOutNamed:
			named++
			errs = append(errs, fmt.Errorf("%d CA certificates of subject %q (the first in %s) are not used to verify or link what they issued: more than %d CA certificates share that name, which only a forged or runaway bundle does; remove them", l.n, l.subject, l.first, MaxCAsPerSubject))
		}
	}
	overall := 0
	if _, ok := s.leftOut[nameKey{}]; ok {
		overall = 1
	}
	if more := len(subjects) - named - overall; more > 0 {
		errs = append(errs, fmt.Errorf("and %d more subject names each have more than %d CA certificates", more, MaxCAsPerSubject))
	}
	return errors.Join(errs...)
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
		up, ok := s.IssuerName(i, map[int]bool{i: true})
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
	*s = Set{Roots: s.Roots, Now: s.Now, leftOut: s.leftOut}

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
		up, ok := s.IssuerName(at, seen)
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
func (s *Set) IssuerName(i int, seen map[int]bool) (int, bool) {
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
		Subject:            SubjectName(c),
		Issuer:             s.intern(IssuerName(c)),
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

// SubjectName is the name certwatch shows for c's subject: its common
// name, else its first DNS name, else the whole subject.
func SubjectName(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	return c.Subject.String()
}

// IssuerName is the name certwatch shows for c's issuer: its common name,
// else the whole issuer.
func IssuerName(c *x509.Certificate) string {
	if c.Issuer.CommonName != "" {
		return c.Issuer.CommonName
	}
	return c.Issuer.String()
}

package probes

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"slices"
	"sync"
	"time"
)

// Bounds on the verification cache. A sweep over tens of thousands of
// endpoints shares far fewer issuers than it has chains, and leaves that
// are served more than once (a wildcard on many endpoints) stay in the
// young generation as long as they keep being seen.
const (
	// chainGeneration is the size of one generation of the chain cache:
	// at most twice as many served chains are remembered.
	chainGeneration = 2048
	// maxCachedIssuers bounds the issuer cache; it is emptied when full.
	maxCachedIssuers = 256
)

// verifyCache shares chain verifications between the endpoints of one
// Prober. It is safe for concurrent use.
//
// Two levels are cached. A served chain seen before (the same leaf on many
// endpoints) reuses its whole result. A new leaf under a known issuer (the
// usual case: every endpoint has its own leaf, a few intermediates sign
// them all) is verified against that issuer alone, and the issuer's own
// paths to the trusted roots, verified once, are appended: one signature
// check per endpoint instead of one per certificate on the path. The
// shortcut is taken only when it provably yields what crypto/x509 would
// for the whole chain (see issuerEntry); otherwise the chain is verified
// whole.
//
// Entries hold no leaf certificate: a sweep's leaves are freed as soon as
// its observations are evaluated.
type verifyCache struct {
	roots *x509.CertPool

	// mu guards chains, oldChains and issuers.
	mu        sync.Mutex
	chains    map[[sha256.Size]byte]*chainEntry
	oldChains map[[sha256.Size]byte]*chainEntry
	issuers   map[[sha256.Size]byte]*issuerEntry
}

// chainEntry is a cached verification of one served chain, valid for any
// time in [from, until). tails are the verified paths without their first
// element, the leaf, which the caller supplies.
type chainEntry struct {
	trust       Trust
	msg         string
	tails       [][]*x509.Certificate
	from, until time.Time
}

// issuerEntry is the verification of one served certificate, issuer, as
// the parent of a leaf, with the other certificates served beside it as
// intermediates, valid for any time in [from, until).
//
// roots is set only when the shortcut is sound: issuer verified to a
// trusted root, may sign certificates as an intermediate, and nothing on
// its paths constrains names, requires explicit policies, maps policies or
// limits the path length below what one more level needs. Under those
// conditions crypto/x509's checks of the whole chain (validity, signatures,
// CA flags, path lengths, name constraints, policies, and extended key
// usage, which with the one usage asked for, server authentication, is a
// check of each certificate on its own) reduce to the checks of the leaf
// against issuer plus the checks of issuer's own paths. roots is the trusted roots plus
// issuer, so that a leaf signed directly by a trusted root still finds that
// path too.
type issuerEntry struct {
	issuer      *x509.Certificate
	roots       *x509.CertPool
	tails       [][]*x509.Certificate
	from, until time.Time
}

func newVerifyCache(roots *x509.CertPool) *verifyCache {
	return &verifyCache{
		roots:     roots,
		chains:    make(map[[sha256.Size]byte]*chainEntry),
		oldChains: make(map[[sha256.Size]byte]*chainEntry),
		issuers:   make(map[[sha256.Size]byte]*issuerEntry),
	}
}

// verify returns the verification of the served chain (leaf first) at now,
// from the cache when it holds one valid at now.
func (vc *verifyCache) verify(chain []*x509.Certificate, now time.Time) chainResult {
	sums := chainSums(chain)
	key := hashSums(sums)

	vc.mu.Lock()
	e, ok := vc.chains[key]
	if !ok {
		if e, ok = vc.oldChains[key]; ok {
			vc.chains[key] = e // still in use: keep it young
		}
	}
	vc.mu.Unlock()
	if ok && !now.Before(e.from) && now.Before(e.until) {
		return chainResult{trust: e.trust, msg: e.msg, paths: withLeaf(chain[0], e.tails), from: e.from, until: e.until}
	}

	res, ok := vc.viaIssuer(chain, sums, now)
	if !ok {
		res = verifyChain(chain, vc.roots, now)
	}
	res.from, res.until = stableInterval(chain, res.paths, now)
	e = &chainEntry{trust: res.trust, msg: res.msg, from: res.from, until: res.until}
	for _, p := range res.paths {
		// A copy: p[1:] would share p's array, which holds the leaf.
		e.tails = append(e.tails, slices.Clone(p[1:]))
	}
	vc.mu.Lock()
	if len(vc.chains) >= chainGeneration {
		vc.oldChains, vc.chains = vc.chains, make(map[[sha256.Size]byte]*chainEntry, chainGeneration)
	}
	vc.chains[key] = e
	vc.mu.Unlock()
	return res
}

// viaIssuer verifies chain through the cached verification of the leaf's
// issuer, when that is sound (see issuerEntry) and the leaf verifies. It
// reports false when the chain must be verified whole, which includes
// every chain that does not verify now: their diagnosis needs the whole
// chain.
func (vc *verifyCache) viaIssuer(chain []*x509.Certificate, sums [][sha256.Size]byte, now time.Time) (chainResult, bool) {
	leaf := chain[0]
	if len(chain) < 2 || leaf.RequireExplicitPolicy > 0 || leaf.RequireExplicitPolicyZero || hasNameConstraints(leaf) {
		return chainResult{}, false
	}
	// Exactly one served certificate may be named as the leaf's issuer;
	// with two (a cross-signed pair) the whole chain is verified, so that
	// every path through either is found.
	k := -1
	for i, c := range chain[1:] {
		if bytes.Equal(c.RawSubject, leaf.RawIssuer) {
			if k >= 0 {
				return chainResult{}, false
			}
			k = i + 1
		}
	}
	if k < 0 {
		return chainResult{}, false
	}
	ie := vc.issuer(chain, sums, k, now)
	if ie.roots == nil {
		return chainResult{}, false
	}
	paths, err := leaf.Verify(x509.VerifyOptions{
		Roots:       ie.roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return chainResult{}, false
	}
	var full [][]*x509.Certificate
	for _, p := range paths {
		if len(p) != 2 { // the leaf is itself a trusted root
			return chainResult{}, false
		}
		if p[1] != ie.issuer {
			full = append(full, p) // signed directly by a trusted root
			continue
		}
		for _, t := range ie.tails {
			for _, c := range t {
				// crypto/x509 never puts a certificate equal to the leaf
				// above it; the issuer's own verification cannot know the
				// leaf, so such a path is left to the whole verification.
				if bytes.Equal(c.RawSubject, leaf.RawSubject) && bytes.Equal(c.RawSubjectPublicKeyInfo, leaf.RawSubjectPublicKeyInfo) {
					return chainResult{}, false
				}
			}
			full = append(full, append([]*x509.Certificate{leaf}, t...))
		}
	}
	return chainResult{trust: Trusted, paths: full}, true
}

// issuer returns the cached issuerEntry of chain[k] served beside the
// other certificates of chain[1:], computing it when missing or stale.
func (vc *verifyCache) issuer(chain []*x509.Certificate, sums [][sha256.Size]byte, k int, now time.Time) *issuerEntry {
	key := hashSums(append([][sha256.Size]byte{sums[k]}, sums[1:]...))
	vc.mu.Lock()
	e, ok := vc.issuers[key]
	vc.mu.Unlock()
	if ok && !now.Before(e.from) && now.Before(e.until) {
		return e
	}
	e = newIssuerEntry(chain, k, vc.roots, now)
	vc.mu.Lock()
	if len(vc.issuers) >= maxCachedIssuers {
		clear(vc.issuers)
	}
	vc.issuers[key] = e
	vc.mu.Unlock()
	return e
}

func newIssuerEntry(chain []*x509.Certificate, k int, roots *x509.CertPool, now time.Time) *issuerEntry {
	issuer := chain[k]
	others := x509.NewCertPool()
	for i, c := range chain[1:] {
		if i+1 != k {
			others.AddCert(c)
		}
	}
	tails, err := issuer.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: others,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	e := &issuerEntry{issuer: issuer}
	e.from, e.until = stableInterval(chain[1:], tails, now)
	if err != nil || !soundIssuer(issuer, tails) {
		return e
	}
	var pool *x509.CertPool
	if roots != nil {
		pool = roots.Clone()
	} else if pool, err = x509.SystemCertPool(); err != nil {
		return e
	}
	pool.AddCert(issuer)
	e.roots, e.tails = pool, tails
	return e
}

// soundIssuer reports whether issuer, verified as the head of tails, may
// stand for the rest of any chain it issues a leaf in (see issuerEntry).
func soundIssuer(issuer *x509.Certificate, tails [][]*x509.Certificate) bool {
	// Checked as a root, the issuer's CA flag is not required; as an
	// intermediate it is (CheckSignatureFrom lets a version 1 CA pass).
	if !issuer.BasicConstraintsValid || !issuer.IsCA {
		return false
	}
	for _, t := range tails {
		for j, c := range t {
			if hasNameConstraints(c) || c.RequireExplicitPolicy > 0 || c.RequireExplicitPolicyZero || len(c.PolicyMappings) > 0 {
				return false
			}
			// Below c at index j of a tail lie j-1 intermediates when the
			// issuer is verified alone, and j once the leaf is added.
			if c.BasicConstraintsValid && c.MaxPathLen >= 0 && j > c.MaxPathLen {
				return false
			}
		}
	}
	return true
}

// oidNameConstraints is id-ce-nameConstraints (RFC 5280, 4.2.1.10).
var oidNameConstraints = asn1.ObjectIdentifier{2, 5, 29, 30}

func hasNameConstraints(c *x509.Certificate) bool {
	return slices.ContainsFunc(c.Extensions, func(e pkix.Extension) bool { return e.Id.Equal(oidNameConstraints) })
}

// chainSums returns the SHA-256 of each certificate of chain.
func chainSums(chain []*x509.Certificate) [][sha256.Size]byte {
	sums := make([][sha256.Size]byte, len(chain))
	for i, c := range chain {
		sums[i] = sha256.Sum256(c.Raw)
	}
	return sums
}

// hashSums returns the SHA-256 of the concatenated sums: the key of a
// sequence of certificates.
func hashSums(sums [][sha256.Size]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range sums {
		h.Write(s[:])
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

// withLeaf returns the paths leaf + tail for each tail.
func withLeaf(leaf *x509.Certificate, tails [][]*x509.Certificate) [][]*x509.Certificate {
	if len(tails) == 0 {
		return nil
	}
	paths := make([][]*x509.Certificate, len(tails))
	for i, t := range tails {
		paths[i] = append([]*x509.Certificate{leaf}, t...)
	}
	return paths
}

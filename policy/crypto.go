package policy

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/probes"
)

// Kinds of the crypto policy.
const (
	// WeakKey: a certificate on the verified path (or the served chain,
	// when none verified) has an RSA key below 2048 bits or an elliptic
	// curve key below P-256.
	WeakKey Kind = "weak_key"
	// WeakSignature: a certificate below the root is signed with SHA-1 or
	// MD5. crypto/x509 and browsers refuse such a chain; certwatch checks
	// the signature itself, so the expiry of the chain is still judged.
	WeakSignature Kind = "weak_signature"
	// LongValidity: a publicly trusted leaf is valid for longer than the
	// CA/Browser Forum allowed on the day it was issued. Never reported
	// for a leaf under a private root (see probes.Observation.PublicRoot).
	LongValidity Kind = "long_validity"
)

// Minimum key sizes below which a key is weak_key.
const (
	MinRSABits = 2048
	MinECBits  = 256
)

// validityLimit is a maximum lifetime of publicly trusted TLS leaves, in
// force for leaves issued from From on (CA/Browser Forum Baseline
// Requirements 6.3.2, ballots 193, SC31 and SC-081). Leaves issued before
// the first row are not judged.
type validityLimit struct {
	From time.Time
	Days int
}

var validityLimits = [...]validityLimit{
	{time.Date(2018, 3, 1, 0, 0, 0, 0, time.UTC), 825},
	{time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC), 398},
	{time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC), 200},
	{time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC), 100},
	{time.Date(2029, 3, 15, 0, 0, 0, 0, time.UTC), 47},
}

// MaxPublicValidity returns the longest lifetime the CA/Browser Forum
// allows a publicly trusted TLS leaf issued at issued, in days, or 0 when
// issued predates the limits judged here.
func MaxPublicValidity(issued time.Time) int {
	days := 0
	for _, l := range validityLimits {
		if !issued.Before(l.From) {
			days = l.Days
		}
	}
	return days
}

// judgeCrypto rates the keys and signatures of the best verified path (the
// served chain when none verified) and the lifetime of a publicly trusted
// leaf.
func (e *Evaluator) judgeCrypto(o *probes.Observation, leaf *x509.Certificate, fp string) {
	path := o.Chain
	verified := len(o.Paths) > 0
	if verified {
		path = bestPath(o.Paths)
	}
	if e.rules.WeakKey != None {
		var weak []string
		for _, c := range path {
			if w := weakKey(c); w != "" {
				weak = append(weak, fmt.Sprintf("%s %q has %s", role(c, leaf), atrest.SubjectName(c), w))
			}
		}
		if len(weak) > 0 {
			e.add(WeakKey, e.rules.WeakKey, fp, fp, e.now, func() string {
				return fmt.Sprintf("%s; clients may refuse it and it can be broken: reissue with an RSA key of at least %d bits or an ECDSA P-256 key", strings.Join(weak, "; "), MinRSABits)
			})
		}
	}
	if e.rules.WeakSignature != None {
		var weak []string
		for i, c := range path {
			// A root's own signature is never checked by clients.
			if (verified && i == len(path)-1) || (!verified && i > 0 && isSelfIssued(c)) {
				continue
			}
			if probes.WeakSignature(c.SignatureAlgorithm) {
				weak = append(weak, fmt.Sprintf("%s %q is signed with %s", role(c, leaf), atrest.SubjectName(c), c.SignatureAlgorithm))
			}
		}
		if len(weak) > 0 {
			e.add(WeakSignature, e.rules.WeakSignature, fp, fp, e.now, func() string {
				return fmt.Sprintf("%s; browsers and Go, Java and OpenSSL clients refuse it: reissue it signed with SHA-256 or better", strings.Join(weak, "; "))
			})
		}
	}
	if e.rules.LongValidity != None && verified && o.PublicRoot {
		limit := MaxPublicValidity(leaf.NotBefore)
		// RFC 5280 validity is inclusive of both ends; a day is 86,400 s
		// (Baseline Requirements 6.3.2).
		lifetime := leaf.NotAfter.Sub(leaf.NotBefore) + time.Second
		if limit > 0 && lifetime > time.Duration(limit)*day {
			e.add(LongValidity, e.rules.LongValidity, fp, fp, e.now, func() string {
				return fmt.Sprintf("leaf certificate %q, issued %s under a public root (%q), is valid for %d days, more than the %d the CA/Browser Forum allowed then; clients may distrust it: reissue it with a shorter lifetime", atrest.SubjectName(leaf), leaf.NotBefore.UTC().Format(time.DateOnly), atrest.SubjectName(path[len(path)-1]), int(lifetime/day), limit)
			})
		}
	}
}

// weakKey describes c's key when it is too small, or returns "".
func weakKey(c *x509.Certificate) string {
	switch k := c.PublicKey.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < MinRSABits {
			return fmt.Sprintf("a %d-bit RSA key", n)
		}
	case *ecdsa.PublicKey:
		if n := k.Curve.Params().BitSize; n < MinECBits {
			return fmt.Sprintf("a %d-bit elliptic curve key (%s)", n, k.Curve.Params().Name)
		}
	}
	return ""
}

func isSelfIssued(c *x509.Certificate) bool {
	return string(c.RawIssuer) == string(c.RawSubject)
}

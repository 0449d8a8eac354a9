package probes

import (
	"bytes"
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verification is the outcome of verifying a served chain for a name.
type Verification struct {
	// Trust is the chain's verdict, independent of the name; Error
	// explains any verdict other than Trusted.
	Trust Trust
	Error string
	// Paths are the verified paths, leaf first and root last, when Trust
	// is Trusted or TrustExpired. For TrustExpired they are the paths that
	// verify at a time when the leaf was valid.
	Paths [][]*x509.Certificate
	// NameMatch reports whether the leaf is valid for the name.
	NameMatch bool
}

// Verify verifies chain, as a server presented it (leaf first), for name
// against roots at time now. Intermediates are taken only from chain, never
// fetched or borrowed from elsewhere, so a server that omits one is
// reported. Trust and the name check are independent: a trusted chain for
// another name is Trusted with NameMatch false. Every certificate on a path
// must allow TLS server authentication where it lists extended key usages,
// as browsers and Go clients require. Nil roots means the system roots.
//
// When the chain verifies only outside now (an expired or not yet valid
// certificate on every path), Trust is TrustExpired and Paths holds the
// paths that verify at a time when the leaf was valid, so the certificate
// that is out of date can be found on them.
func Verify(chain []*x509.Certificate, name string, roots *x509.CertPool, now time.Time) Verification {
	if len(chain) == 0 {
		return Verification{Trust: TrustNotChecked}
	}
	r := verifyChain(chain, roots, now)
	return Verification{
		Trust: r.trust, Error: r.msg, Paths: r.paths,
		NameMatch: chain[0].VerifyHostname(name) == nil,
	}
}

// chainResult is the name-independent part of a Verification, valid for
// any time in [from, until).
type chainResult struct {
	trust       Trust
	msg         string
	paths       [][]*x509.Certificate
	from, until time.Time
}

// maxTimeCandidates bounds the re-verifications tried to find when an
// out-of-date chain was valid.
const maxTimeCandidates = 8

func verifyChain(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) chainResult {
	leaf := chain[0]
	opts := x509.VerifyOptions{
		Roots:         roots,
		Intermediates: x509.NewCertPool(),
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	paths, err := leaf.Verify(opts)
	if err == nil {
		return chainResult{trust: Trusted, paths: paths}
	}
	if ie, ok := errors.AsType[x509.CertificateInvalidError](err); ok && ie.Reason == x509.Expired {
		var firstErr error
		for _, t := range validTimes(chain, now) {
			opts.CurrentTime = t
			paths, terr := leaf.Verify(opts)
			if terr == nil {
				return chainResult{trust: TrustExpired, msg: outOfDateMessage(chain, paths, now, err), paths: paths}
			}
			if firstErr == nil {
				firstErr = terr
			}
		}
		// No path even while the certificates were valid: the real problem
		// is trust, not time.
		if firstErr != nil {
			err = firstErr
		}
	}
	if r, ok := verifyWeak(chain, roots, now); ok {
		return r
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		if selfSigned(leaf) {
			return chainResult{trust: TrustSelfSigned, msg: fmt.Sprintf("self-signed certificate %q is not a trusted root", certName(leaf))}
		}
		return chainResult{trust: TrustUnknownAuthority, msg: unknownAuthorityMessage(chain)}
	}
	return chainResult{trust: TrustInvalid, msg: err.Error()}
}

// validTimes returns instants inside the leaf's validity at which the
// chain may verify, nearest to now first: now clamped into the leaf's
// validity, then every validity boundary of the served certificates that
// falls inside it.
func validTimes(chain []*x509.Certificate, now time.Time) []time.Time {
	leaf := chain[0]
	lo, hi := leaf.NotBefore, leaf.NotAfter
	if hi.Before(lo) {
		return nil
	}
	clamp := now
	if clamp.Before(lo) {
		clamp = lo
	} else if clamp.After(hi) {
		clamp = hi
	}
	ts := []time.Time{clamp}
	for _, c := range chain[1:] {
		for _, b := range []time.Time{c.NotBefore, c.NotAfter} {
			if !b.Before(lo) && !b.After(hi) {
				ts = append(ts, b)
			}
		}
	}
	ts = append(ts, lo, hi)
	dist := func(t time.Time) time.Duration { return t.Sub(now).Abs() }
	slices.SortStableFunc(ts, func(a, b time.Time) int { return cmp.Compare(dist(a), dist(b)) })
	ts = slices.CompactFunc(ts, time.Time.Equal)
	return ts[:min(len(ts), maxTimeCandidates)]
}

// outOfDateMessage names the certificates on paths that are not valid at
// now, falling back to the verifier's message.
func outOfDateMessage(chain []*x509.Certificate, paths [][]*x509.Certificate, now time.Time, err error) string {
	seen := make(map[*x509.Certificate]bool)
	var parts []string
	for _, path := range paths {
		for _, c := range path {
			if seen[c] {
				continue
			}
			seen[c] = true
			switch {
			case now.After(c.NotAfter):
				parts = append(parts, fmt.Sprintf("%q expired at %s", certName(c), c.NotAfter.UTC().Format(time.RFC3339)))
			case now.Before(c.NotBefore):
				parts = append(parts, fmt.Sprintf("%q is not valid before %s", certName(c), c.NotBefore.UTC().Format(time.RFC3339)))
			}
		}
	}
	if len(parts) == 0 {
		return err.Error()
	}
	return "out of date: " + strings.Join(parts, "; ")
}

// selfSigned reports whether c names itself as issuer and is signed by its
// own key. CheckSignatureFrom is not used: it also demands that the parent
// be a CA, which a self-signed server certificate usually is not.
func selfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) &&
		c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature) == nil
}

// unknownAuthorityMessage explains a chain that leads to no trusted root:
// it follows the served chain from the leaf as far as the server's own
// certificates link up and names the certificate where it stops.
func unknownAuthorityMessage(chain []*x509.Certificate) string {
	last := chain[0]
	used := map[*x509.Certificate]bool{last: true}
	for {
		next := servedIssuer(chain, last, used)
		if next == nil {
			break
		}
		used[next] = true
		last = next
	}
	if selfSigned(last) {
		return fmt.Sprintf("untrusted root: the chain ends at %q, which is not a trusted root", certName(last))
	}
	return fmt.Sprintf("incomplete chain: server did not send the intermediate %q that issued %q, and it is not a trusted root (or the issuing CA is not among the trusted roots)",
		last.Issuer.CommonName, certName(last))
}

// servedIssuer returns a certificate from chain, not yet used, that signed c.
func servedIssuer(chain []*x509.Certificate, c *x509.Certificate, used map[*x509.Certificate]bool) *x509.Certificate {
	for _, cand := range chain {
		if used[cand] || !bytes.Equal(cand.RawSubject, c.RawIssuer) {
			continue
		}
		if c.CheckSignatureFrom(cand) == nil {
			return cand
		}
	}
	return nil
}

// certName is how messages refer to a certificate: its subject CN, or its
// whole subject when there is no CN.
func certName(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	return c.Subject.String()
}

// stableInterval returns the interval around now in which none of the
// served or path certificates becomes valid or expires. (Roots that are on
// no path cannot be seen; a root entering or leaving its validity is not
// noticed until another certificate's boundary passes.)
func stableInterval(chain []*x509.Certificate, paths [][]*x509.Certificate, now time.Time) (from, until time.Time) {
	until = time.Unix(1<<62, 0)
	edge := func(c *x509.Certificate) {
		// A certificate is valid on [NotBefore, NotAfter], both inclusive.
		for _, b := range []time.Time{c.NotBefore, c.NotAfter.Add(time.Nanosecond)} {
			if b.After(now) {
				if b.Before(until) {
					until = b
				}
			} else if b.After(from) {
				from = b
			}
		}
	}
	for _, c := range chain {
		edge(c)
	}
	for _, p := range paths {
		for _, c := range p {
			edge(c)
		}
	}
	return from, until
}

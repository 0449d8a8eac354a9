package probes

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/md5"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// WeakSignature reports whether alg hashes with MD2, MD5 or SHA-1, which
// crypto/x509 refuses on every certificate but a trusted root and
// browsers have refused since 2017.
func WeakSignature(alg x509.SignatureAlgorithm) bool {
	switch alg {
	case x509.MD2WithRSA, x509.MD5WithRSA, x509.SHA1WithRSA, x509.DSAWithSHA1, x509.ECDSAWithSHA1:
		return true
	}
	return false
}

// verifyWeak verifies a chain in which a certificate below the root (the
// leaf, or an intermediate) is signed with SHA-1 or MD5, which crypto/x509
// refuses: it links the served certificates up from the leaf, checking the
// weak signatures itself, and hands the certificate above the last weak one
// to verifyChain. The paths it returns hold the weakly signed certificates,
// so the policy reports them as weak_signature with their expiry judged,
// instead of an unexplained untrusted chain. It reports false when no
// served certificate is weakly signed, and TrustInvalid, saying why, when
// a weak signature's issuer was not sent.
func verifyWeak(chain []*x509.Certificate, roots *x509.CertPool, now time.Time) (chainResult, bool) {
	links := []*x509.Certificate{chain[0]}
	rest := slices.Clone(chain[1:])
	lastWeak := -1
	for {
		cur := links[len(links)-1]
		if WeakSignature(cur.SignatureAlgorithm) {
			lastWeak = len(links) - 1
		}
		i := slices.IndexFunc(rest, func(c *x509.Certificate) bool {
			if !c.BasicConstraintsValid || !c.IsCA || !bytes.Equal(c.RawSubject, cur.RawIssuer) {
				return false
			}
			if WeakSignature(cur.SignatureAlgorithm) {
				return checkWeakSignature(cur, c) == nil
			}
			return cur.CheckSignatureFrom(c) == nil
		})
		if i < 0 {
			break
		}
		links = append(links, rest[i])
		rest = slices.Delete(rest, i, i+1)
	}
	if lastWeak < 0 {
		return chainResult{}, false
	}
	if lastWeak == len(links)-1 {
		c := links[lastWeak]
		return chainResult{trust: TrustInvalid, msg: fmt.Sprintf("%q is signed with %s, which crypto/x509 and current browsers refuse, by %q, which the server did not send (certwatch checks a weak signature only against a certificate the server sends)",
			certName(c), c.SignatureAlgorithm, c.Issuer.CommonName)}, true
	}
	prefix, top := links[:lastWeak+1], links[lastWeak+1]
	upper := append([]*x509.Certificate{top}, links[lastWeak+2:]...)
	r := verifyChain(append(upper, rest...), roots, now)
	if r.trust != Trusted && r.trust != TrustExpired {
		return chainResult{}, false
	}
	paths := make([][]*x509.Certificate, len(r.paths))
	for i, p := range r.paths {
		paths[i] = append(slices.Clone(prefix), p...)
	}
	var weak, outOfDate []string
	for _, c := range prefix {
		if WeakSignature(c.SignatureAlgorithm) {
			weak = append(weak, fmt.Sprintf("%q (%s)", certName(c), c.SignatureAlgorithm))
		}
		if now.After(c.NotAfter) || now.Before(c.NotBefore) {
			outOfDate = append(outOfDate, certName(c))
		}
	}
	res := chainResult{trust: r.trust, paths: paths,
		msg: "verified only by accepting the weak signature of " + strings.Join(weak, ", ") + ", which crypto/x509 and current browsers refuse"}
	if len(outOfDate) > 0 {
		res.trust = TrustExpired
		res.msg += "; out of date: " + strings.Join(outOfDate, ", ")
	} else if r.msg != "" {
		res.msg += "; " + r.msg
	}
	return res, true
}

// checkWeakSignature checks c's SHA-1 or MD5 signature with parent's key.
func checkWeakSignature(c, parent *x509.Certificate) error {
	var h crypto.Hash
	var digest []byte
	switch c.SignatureAlgorithm {
	case x509.SHA1WithRSA, x509.ECDSAWithSHA1:
		sum := sha1.Sum(c.RawTBSCertificate)
		h, digest = crypto.SHA1, sum[:]
	case x509.MD5WithRSA:
		sum := md5.Sum(c.RawTBSCertificate)
		h, digest = crypto.MD5, sum[:]
	default:
		return fmt.Errorf("signature algorithm %s not supported", c.SignatureAlgorithm)
	}
	switch pub := parent.PublicKey.(type) {
	case *rsa.PublicKey:
		if c.SignatureAlgorithm == x509.ECDSAWithSHA1 {
			return errors.New("an ECDSA signature cannot come from an RSA key")
		}
		return rsa.VerifyPKCS1v15(pub, h, digest, c.Signature)
	case *ecdsa.PublicKey:
		if c.SignatureAlgorithm != x509.ECDSAWithSHA1 || !ecdsa.VerifyASN1(pub, digest, c.Signature) {
			return errors.New("ECDSA signature does not verify")
		}
		return nil
	}
	return fmt.Errorf("public key %T not supported", parent.PublicKey)
}

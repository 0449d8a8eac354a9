package probes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"time"
)

// crlEntry is one fetched CRL whose issuer and signature checked out
// against the issuer that asked for it (the cache key names both: the CRL
// alone does not say which certificate's key must have signed it).
type crlEntry struct {
	src     string               // "crl URL"
	list    *x509.RevocationList // entries dropped: see revoked
	revoked map[string]x509.RevocationListEntry
}

// crlCheck returns the status of c according to the CRL at url, fetched at
// most once while it is current (see fetchCache), and trusted only when
// issuer signed it. A CRL that is not the issuer's, or whose signature does
// not check out, is a failed fetch: kept for RetryAfter, never until the
// next update it claims, so one forged answer cannot hide a revocation
// for longer than that.
func (rc *revocationChecker) crlCheck(ctx context.Context, url string, c, issuer *x509.Certificate, now time.Time) Revocation {
	sum := sha256.Sum256(issuer.Raw)
	key := url + "\x00" + string(sum[:])
	e, ok, err := rc.crls.peek(key, rc.now())
	if !ok {
		e, err = rc.crls.get(ctx, key, rc.now, func(ctx context.Context) (*crlEntry, time.Time, error) {
			e, err := rc.fetchCRL(ctx, url, issuer)
			until := rc.now().Add(rc.retryAfter)
			if err == nil && e.list.NextUpdate.After(rc.now()) {
				until = e.list.NextUpdate
			}
			return e, until, err
		})
	}
	if err != nil {
		return Revocation{Status: RevocationUnavailable, Source: "crl " + url, Error: fmt.Sprintf("crl %s: %v", url, err)}
	}
	r := Revocation{Status: RevocationGood, Source: e.src, NextUpdate: e.list.NextUpdate}
	var buf [32]byte
	if re, ok := e.revoked[string(serialBytes(c, buf[:]))]; ok {
		r.Status, r.RevokedAt, r.Reason = RevocationRevoked, re.RevocationTime, re.ReasonCode
		return r
	}
	if !e.list.NextUpdate.IsZero() && now.After(e.list.NextUpdate) {
		r.Status = RevocationStale
		r.Error = fmt.Sprintf("crl %s is past its next update (%s)", url, e.list.NextUpdate.UTC().Format(time.RFC3339))
	}
	return r
}

// fetchCRL fetches the CRL at url and checks that issuer issued and signed
// it; a CRL that does not check out is an error.
func (rc *revocationChecker) fetchCRL(ctx context.Context, url string, issuer *x509.Certificate) (*crlEntry, error) {
	der, err := rc.get(ctx, revocationFetch{url: url, limit: rc.maxCRL, what: "the CRL", capName: "revocation.max_crl_bytes"})
	if err != nil {
		return nil, err
	}
	list, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(list.RawIssuer, issuer.RawSubject) {
		return nil, fmt.Errorf("it is not signed by %q, the certificate's issuer: its issuer is %q; not trusted, fetched again after the retry interval (%v)", certName(issuer), list.Issuer.String(), rc.retryAfter)
	}
	if err := list.CheckSignatureFrom(issuer); err != nil {
		return nil, fmt.Errorf("it is not signed by %q, the certificate's issuer: %v; not trusted, fetched again after the retry interval (%v)", certName(issuer), err, rc.retryAfter)
	}
	e := &crlEntry{src: "crl " + url, list: list, revoked: make(map[string]x509.RevocationListEntry, len(list.RevokedCertificateEntries))}
	for _, re := range list.RevokedCertificateEntries {
		re.Raw, re.Extensions = nil, nil
		e.revoked[string(re.SerialNumber.Bytes())] = re
	}
	list.RevokedCertificateEntries = nil
	return e, nil
}

// size is about the memory e holds, for the cache's budget.
func (e *crlEntry) size() int64 {
	return int64(len(e.list.Raw)) + 100*int64(len(e.revoked))
}

// serialBytes returns the big-endian bytes of c's serial number, as
// big.Int.Bytes does, in buf when it fits.
func serialBytes(c *x509.Certificate, buf []byte) []byte {
	n := c.SerialNumber
	if n.Sign() <= 0 || (n.BitLen()+7)/8 > len(buf) {
		return n.Bytes()
	}
	return n.FillBytes(buf[:(n.BitLen()+7)/8])
}

package probes

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"sync"
	"time"
)

// crlEntry is one fetched and parsed CRL. Its signature is checked against
// each issuer that asks (checked), since the CRL alone does not say which
// certificate's key must have signed it.
type crlEntry struct {
	src     string               // "crl URL"
	list    *x509.RevocationList // entries dropped: see revoked
	revoked map[string]x509.RevocationListEntry

	mu      sync.Mutex
	checked map[string]error // by the issuer's DER encoding
}

// crlCheck returns the status of c according to the CRL at url, fetched at
// most once while it is current (see fetchCache), and trusted only when
// issuer signed it.
func (rc *revocationChecker) crlCheck(ctx context.Context, url string, c, issuer *x509.Certificate, now time.Time) Revocation {
	e, ok, err := rc.crls.peek(url, rc.now())
	if !ok {
		e, err = rc.crls.get(ctx, url, rc.now, func(ctx context.Context) (*crlEntry, time.Time, error) {
			e, err := rc.fetchCRL(ctx, url)
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
	if err := e.signedBy(issuer); err != nil {
		return Revocation{Status: RevocationUnavailable, Source: e.src, Error: fmt.Sprintf("crl %s is not signed by %q, which issued %q: %v; it is not trusted", url, certName(issuer), certName(c), err)}
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

func (rc *revocationChecker) fetchCRL(ctx context.Context, url string) (*crlEntry, error) {
	der, err := rc.get(ctx, url, "", nil, rc.maxCRL)
	if err != nil {
		return nil, err
	}
	list, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, err
	}
	e := &crlEntry{src: "crl " + url, list: list, revoked: make(map[string]x509.RevocationListEntry, len(list.RevokedCertificateEntries)), checked: make(map[string]error)}
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

// signedBy checks, once per issuer, that issuer signed the CRL and is the
// CRL's issuer.
func (e *crlEntry) signedBy(issuer *x509.Certificate) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err, ok := e.checked[string(issuer.Raw)]; ok {
		return err
	}
	var err error
	if !bytes.Equal(e.list.RawIssuer, issuer.RawSubject) {
		err = fmt.Errorf("its issuer is %q", e.list.Issuer.String())
	} else {
		err = e.list.CheckSignatureFrom(issuer)
	}
	if len(e.checked) < 64 {
		e.checked[string(issuer.Raw)] = err
	}
	return err
}

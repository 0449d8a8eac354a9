package probes

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"golang.org/x/crypto/ocsp"
)

// ocspAnswer is one OCSP response, parsed and checked against the issuer.
type ocspAnswer struct {
	resp *ocsp.Response
}

// ocspCheck asks the responder at url about c, at most once while the
// answer is current (see fetchCache).
func (rc *revocationChecker) ocspCheck(ctx context.Context, url string, c, issuer *x509.Certificate, now time.Time) Revocation {
	src := "ocsp " + url
	key := url + "\x00" + string(issuer.RawSubjectPublicKeyInfo) + "\x00" + string(c.SerialNumber.Bytes())
	a, err := rc.ocsps.get(ctx, key, rc.now, func(ctx context.Context) (*ocspAnswer, time.Time, error) {
		a, err := rc.fetchOCSP(ctx, url, c, issuer)
		until := rc.now().Add(rc.retryAfter)
		if err == nil && a.resp.NextUpdate.After(rc.now()) {
			until = a.resp.NextUpdate
		}
		return a, until, err
	})
	if err != nil {
		return Revocation{Status: RevocationUnavailable, Source: src, Error: fmt.Sprintf("ocsp %s: %v", url, err)}
	}
	return ocspStatus(a.resp, src, now)
}

func (rc *revocationChecker) fetchOCSP(ctx context.Context, url string, c, issuer *x509.Certificate) (*ocspAnswer, error) {
	req, err := ocsp.CreateRequest(c, issuer, nil)
	if err != nil {
		return nil, err
	}
	der, err := rc.get(ctx, revocationFetch{url: url, contentType: "application/ocsp-request", body: req, limit: maxOCSPBytes, what: "the OCSP response", capName: "the cap on OCSP responses"})
	if err != nil {
		return nil, err
	}
	// ParseResponseForCert checks the signature: by the issuer, or by a
	// responder certificate the issuer signed.
	resp, err := ocsp.ParseResponseForCert(der, c, issuer)
	if err != nil {
		return nil, err
	}
	return &ocspAnswer{resp: resp}, nil
}

// stapled returns the status of c from the OCSP response the server
// stapled; a staple that does not check out against issuer is unavailable.
func stapled(der []byte, c, issuer *x509.Certificate, now time.Time) Revocation {
	const src = "stapled ocsp"
	resp, err := ocsp.ParseResponseForCert(der, c, issuer)
	if err != nil {
		return Revocation{Status: RevocationUnavailable, Source: src, Error: fmt.Sprintf("stapled ocsp response: %v", err)}
	}
	return ocspStatus(resp, src, now)
}

// maxClockSkew is how far in the future an OCSP response may be dated and
// still be used.
const maxClockSkew = 5 * time.Minute

// ocspStatus turns a checked response into a Revocation at now.
func ocspStatus(resp *ocsp.Response, src string, now time.Time) Revocation {
	r := Revocation{Source: src, ThisUpdate: resp.ThisUpdate, NextUpdate: resp.NextUpdate}
	if resp.ThisUpdate.After(now.Add(maxClockSkew)) {
		r.Status, r.Error = RevocationUnavailable, fmt.Sprintf("%s: the response is not valid before %s (clock skew?)", src, resp.ThisUpdate.UTC().Format(time.RFC3339))
		return r
	}
	switch resp.Status {
	case ocsp.Revoked:
		r.Status, r.RevokedAt, r.Reason = RevocationRevoked, resp.RevokedAt, resp.RevocationReason
		return r
	case ocsp.Good:
		r.Status = RevocationGood
	default:
		r.Status, r.Error = RevocationUnavailable, src+": the responder does not know the certificate"
		return r
	}
	if !resp.NextUpdate.IsZero() && now.After(resp.NextUpdate) {
		r.Status, r.Error = RevocationStale, fmt.Sprintf("%s: the response is past its next update (%s)", src, resp.NextUpdate.UTC().Format(time.RFC3339))
	}
	return r
}

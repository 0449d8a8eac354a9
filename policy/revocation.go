package policy

import (
	"fmt"
	"time"

	"github.com/certwatch/certwatch/probes"
)

// Kinds of the revocation policy.
const (
	// Revoked: the leaf, or an intermediate on its verified path, was
	// revoked according to a CRL or OCSP response its issuer signed.
	Revoked Kind = "revoked"
	// RevocationStale: the newest revocation information (a CRL or an
	// OCSP response) is past its next update and does not list the
	// certificate.
	RevocationStale Kind = "revocation_stale"
	// RevocationUnavailable: no CRL or OCSP responder the certificate
	// names answered with information that could be trusted. At most
	// info: a flaky CRL host must never wake anyone.
	RevocationUnavailable Kind = "revocation_unavailable"
)

// crlReasons are the RFC 5280 5.3.1 reason codes.
var crlReasons = [...]string{
	0: "unspecified", 1: "key compromise", 2: "CA compromise", 3: "affiliation changed",
	4: "superseded", 5: "cessation of operation", 6: "certificate hold", 8: "remove from CRL",
	9: "privilege withdrawn", 10: "AA compromise",
}

func reasonText(code int) string {
	if code >= 0 && code < len(crlReasons) && crlReasons[code] != "" {
		return crlReasons[code]
	}
	return fmt.Sprintf("reason %d", code)
}

// judgeRevocation rates the revocation facts the probe found: a revoked
// leaf or intermediate, and, at most at info, what could not be known.
func (e *Evaluator) judgeRevocation(o *probes.Observation, fp string) {
	for i := range o.Revocation {
		r := &o.Revocation[i]
		what := "leaf certificate"
		if r.Depth > 0 {
			what = "intermediate certificate"
		}
		switch r.Status {
		case probes.RevocationRevoked:
			tier := e.rules.Revoked
			if r.Depth > 0 {
				tier = e.rules.RevokedIntermediate
			}
			e.add(Revoked, tier, fp, fp, e.now, func() string {
				return fmt.Sprintf("%s %q was revoked at %s (%s) according to the %s; clients that check revocation refuse it: replace it now and find out why it was revoked",
					what, r.Subject, r.RevokedAt.UTC().Format(time.RFC3339), reasonText(r.Reason), r.Source)
			})
		case probes.RevocationStale:
			e.add(RevocationStale, e.rules.RevocationStale, fp, fp, e.now, func() string {
				return fmt.Sprintf("revocation of %s %q cannot be confirmed: %s; the CA should publish a current CRL or OCSP response", what, r.Subject, r.Error)
			})
		case probes.RevocationUnavailable:
			e.add(RevocationUnavailable, min(e.rules.RevocationUnavailable, Info), fp, fp, e.now, func() string {
				return fmt.Sprintf("revocation of %s %q could not be checked: %s; certwatch will ask again on a later run", what, r.Subject, r.Error)
			})
		}
	}
}

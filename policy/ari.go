package policy

import (
	"crypto/x509"
	"fmt"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/probes"
)

// RenewalSuggested: the ACME CA that issued a served leaf suggests renewing
// it now (ACME Renewal Information, RFC 9773), and the endpoint still
// serves it. Its deadline is the end of the CA's window.
const RenewalSuggested Kind = "renewal_suggested"

// judgeRenewalWindow raises renewal_suggested once the window the CA
// suggests for o's leaf has started: notice in its first half, warning in
// its second, RenewalSuggested's tier (page by default) once it has ended.
// A window that starts before half the leaf's lifetime is earlier than any
// CA schedules an ordinary renewal: the CA moved it, as it does before
// revoking early, and the message says so.
func (e *Evaluator) judgeRenewalWindow(o *probes.Observation, leaf *x509.Certificate, fp string) {
	w := o.Renewal
	if e.rules.RenewalSuggested == None || w == nil || w.Error != "" || e.now.Before(w.Start) {
		return
	}
	tier := Notice
	switch {
	case !e.now.Before(w.End):
		tier = e.rules.RenewalSuggested
	case e.now.After(w.Start.Add(w.End.Sub(w.Start) / 2)):
		tier = Warning
	}
	tier = min(tier, e.rules.RenewalSuggested)
	e.add(RenewalSuggested, tier, fp, fp, w.End, func() string {
		msg := fmt.Sprintf("the CA that issued %q (%s) suggests renewing it between %s and %s", atrest.SubjectName(leaf), w.Directory, stamp(w.Start), stamp(w.End))
		if half := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2); w.Start.Before(half) {
			msg += fmt.Sprintf(", earlier than its usual schedule (the window starts before half of the certificate's lifetime, %s): the CA may be about to revoke it", stamp(half))
		}
		if w.ExplanationURL != "" {
			msg += "; the CA explains why at " + w.ExplanationURL
		}
		if !e.now.Before(w.End) {
			msg += fmt.Sprintf("; the window ended %s and the endpoint still serves it", ago(e.now.Sub(w.End)))
		} else {
			msg += "; the endpoint still serves it"
		}
		return msg + ": renew it now (an ACME client that supports ARI does so by itself) and deploy the new certificate"
	})
}

// ago says how long ago something was that ended d before now: in days,
// or hours under a day.
func ago(d time.Duration) string {
	switch {
	case d >= 2*day:
		return fmt.Sprintf("%d days ago", int(d/day))
	case d >= day:
		return "1 day ago"
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours ago", int(d/time.Hour))
	}
	return "just now"
}

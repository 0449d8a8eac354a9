package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/certwatch/certwatch/policy"
)

// kindDiscoveryDegraded is the daemon's finding for a discovery source that
// failed or shrank (daemon.DiscoveryDegraded, which this package does not
// import). Its deadline is when it was first raised, not a date to act by.
const kindDiscoveryDegraded policy.Kind = "discovery_degraded"

// Problem says in a few words what is wrong, relative to at:
// "certificate expires in 12 days", "certificate expired 3 days ago",
// "hostname mismatch".
func Problem(f policy.Finding, at time.Time) string {
	switch f.Kind {
	case policy.Expiring:
		return "certificate expires " + In(f.Deadline, at)
	case policy.Expired:
		if f.Deadline.After(at) {
			return "certificate expires " + In(f.Deadline, at)
		}
		return "certificate expired " + In(f.Deadline, at)
	case policy.ChainUntrusted:
		return "certificate chain does not verify"
	case policy.SelfSigned:
		return "self-signed certificate"
	case policy.HostnameMismatch:
		return "certificate does not match the host name"
	case policy.InconsistentDeployment:
		return "addresses serve different certificates"
	case policy.Unreachable:
		return "endpoint unreachable"
	case policy.TLSBroken:
		return "TLS handshake fails"
	case policy.BundleExpired:
		return "server sends an expired extra certificate"
	case policy.Revoked:
		return "certificate revoked"
	case policy.RevocationStale:
		return "revocation information out of date"
	case policy.RevocationUnavailable:
		return "revocation could not be checked"
	case policy.WeakKey:
		return "weak certificate key"
	case policy.WeakSignature:
		return "certificate signed with SHA-1 or MD5"
	case policy.LongValidity:
		return "certificate valid longer than the CA/Browser Forum allows"
	case policy.RenewalOverdue:
		return "ACM has not renewed the certificate, which expires " + In(f.Deadline, at)
	case policy.RenewalFailed:
		return "ACM renewal failed; the certificate expires " + In(f.Deadline, at)
	case policy.ValidationRecordMissing:
		return "DNS validation record missing; the next ACM renewal will fail"
	case policy.StaleDeployment:
		return "an old certificate is still deployed; it expires " + In(f.Deadline, at)
	case KindChannelFailing:
		return "notifications cannot be delivered"
	case KindStormSummary:
		return "many notifications at once, summarised"
	case kindDiscoveryDegraded:
		return "discovery source failed or shrank"
	}
	return strings.ReplaceAll(string(f.Kind), "_", " ")
}

// HasDeadline reports whether f's deadline is a date someone must act by
// (expiry, renewal), rather than the time of the scan, as it is for
// problems that are broken now.
func HasDeadline(f policy.Finding) bool {
	switch f.Kind {
	case policy.ChainUntrusted, policy.SelfSigned, policy.HostnameMismatch, policy.InconsistentDeployment,
		policy.Unreachable, policy.TLSBroken, KindChannelFailing, KindStormSummary, kindDiscoveryDegraded,
		policy.Revoked, policy.RevocationStale, policy.RevocationUnavailable, policy.WeakKey, policy.WeakSignature, policy.LongValidity:
		return false
	}
	return !f.Deadline.IsZero()
}

// In says how far t is from at in whole days: "in 12 days", "in 1 day",
// "today", "3 days ago".
func In(t, at time.Time) string {
	d := t.Sub(at)
	days := policy.DaysUntil(t, at) // exact where d saturates (year 9999)
	switch {
	case days == 0 && d >= 0:
		return fmt.Sprintf("in %s", hours(d))
	case days == 0:
		return fmt.Sprintf("%s ago", hours(-d))
	case days == 1:
		return "in 1 day"
	case days > 1:
		return fmt.Sprintf("in %d days", days)
	case days == -1:
		return "1 day ago"
	}
	return fmt.Sprintf("%d days ago", -days)
}

func hours(d time.Duration) string {
	h := int(d.Hours())
	if h == 1 {
		return "1 hour"
	}
	if h == 0 {
		return "less than an hour"
	}
	return fmt.Sprintf("%d hours", h)
}

// Subject names what a finding is about for a headline: the certificate's
// subject, the name, or the first endpoint, with control and format
// characters escaped (policy.Printable).
func Subject(f policy.Finding) string {
	switch {
	case f.Subject != "":
		return policy.Printable(f.Subject)
	case f.Name != "":
		return policy.Printable(f.Name)
	case len(f.Endpoints) > 0:
		return policy.Printable(f.Endpoints[0].Name)
	}
	return policy.Printable(f.ID())
}

// Headline is a one-line description of a notification, used as message
// text, incident summary and log line: "WARNING: api.example.com:
// certificate expires in 12 days". Control and format characters are
// escaped (policy.Printable).
func Headline(n Notification) string {
	return policy.Printable(headline(n))
}

func headline(n Notification) string {
	f := n.Finding
	switch n.Event {
	case EventDigest:
		return fmt.Sprintf("certwatch digest: %d %s", len(n.Items), plural(len(n.Items), "item", "items"))
	case EventSummary:
		return fmt.Sprintf("certwatch: %d %s at once (%s)", n.Total, plural(n.Total, "notification", "notifications"), n.Reason)
	case EventTest:
		return "certwatch test message for channel " + n.Channel
	case EventResolved:
		if n.Reason == "" {
			return fmt.Sprintf("RESOLVED: %s (was %s)", Subject(f), f.Tier)
		}
		return fmt.Sprintf("RESOLVED: %s (was %s): %s", Subject(f), f.Tier, n.Reason)
	case EventEscalated:
		return fmt.Sprintf("%s (was %s): %s: %s", strings.ToUpper(f.Tier.String()), n.Previous, Subject(f), Problem(f, n.At))
	case EventReminder:
		return fmt.Sprintf("Reminder, %s: %s: %s", f.Tier, Subject(f), Problem(f, n.At))
	}
	return fmt.Sprintf("%s: %s: %s", strings.ToUpper(f.Tier.String()), Subject(f), Problem(f, n.At))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

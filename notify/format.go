package notify

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/certwatch/certwatch/policy"
)

// Problem says in a few words what is wrong, relative to at:
// "certificate expires in 12 days", "certificate expired 3 days ago",
// "hostname mismatch". The words are the registry's (policy.Kind.Info); a
// kind it does not list is named by its words.
func Problem(f policy.Finding, at time.Time) string {
	k, ok := f.Kind.Info()
	if !ok {
		return strings.ReplaceAll(string(f.Kind), "_", " ")
	}
	p := k.Problem
	if k.ProblemAhead != "" && f.Deadline.After(at) {
		p = k.ProblemAhead
	}
	return strings.Replace(p, policy.When, In(f.Deadline.Time(), at), 1)
}

// HasDeadline reports whether f's deadline is a date someone must act by
// (expiry, renewal), rather than the time of the scan, as it is for
// problems that are broken now (policy.KindInfo.Deadline). A kind the
// registry does not list has one if it has a Deadline at all.
func HasDeadline(f policy.Finding) bool {
	if k, ok := f.Kind.Info(); ok && !k.Deadline {
		return false
	}
	return !f.Deadline.IsZero()
}

// fromDelivery reports whether notify itself raises findings of kind k
// (policy.OriginDelivery): a run's report never holds them, so their
// absence from one resolves nothing.
func fromDelivery(k policy.Kind) bool {
	info, _ := k.Info()
	return info.Origin == policy.OriginDelivery
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
		return fmt.Sprintf("certwatch digest: %d %s", len(n.Items), Plural(len(n.Items), "item", "items"))
	case EventSummary:
		return fmt.Sprintf("certwatch: %d %s at once (%s)", n.Total, Plural(n.Total, "notification", "notifications"), n.Reason)
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

// Plural is one when n is 1, else many: the word channels put after a
// count.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Truncate shortens s to at most n bytes, on a rune boundary, marking the
// cut with "…": for the fields a receiver caps in bytes (PagerDuty's
// summary, Alertmanager's annotations, an answer quoted in an error).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

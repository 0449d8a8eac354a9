package slack

import (
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
)

// Slack's limits: https://docs.slack.dev/reference/block-kit/blocks
const (
	maxHeader       = 150
	maxSectionText  = 3000
	maxFieldText    = 2000
	maxBlocks       = 50
	listedEndpoints = 10
)

const timeLayout = "2006-01-02 15:04 MST"

func emoji(t policy.Tier) string {
	switch t {
	case policy.Critical:
		return ":red_circle:"
	case policy.Page:
		return ":rotating_light:"
	case policy.Warning:
		return ":warning:"
	case policy.Notice:
		return ":information_source:"
	}
	return ":grey_question:"
}

func header(text string) slack.Block {
	return slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, truncate(policy.Printable(text), maxHeader), true, false))
}

func mrkdwn(text string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, truncate(text, maxSectionText), false, false)
}

// field is one of a section's two-column fields.
func field(text string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, truncate(text, maxFieldText), false, false)
}

func section(text string) slack.Block {
	return slack.NewSectionBlock(mrkdwn(text), nil, nil)
}

func contextBlock(texts ...string) slack.Block {
	var els []slack.MixedElement
	for _, t := range texts {
		els = append(els, mrkdwn(t))
	}
	return slack.NewContextBlock("", els...)
}

// code renders a name verbatim: names like "*.example" would otherwise
// turn into bold text.
func code(s string) string {
	return "`" + escape(strings.ReplaceAll(s, "`", "'")) + "`"
}

// escape makes text safe inside mrkdwn: Slack reads &, < and > as markup,
// and control and format characters (policy.Printable) could reorder or
// hide what the reader sees. Every piece of data in a message goes through
// escape (or code, which calls it); header escapes its whole text.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(policy.Printable(s))
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// findingBlocks renders the top-level message about a finding, in its
// current state: open at its tier, or resolved.
func findingBlocks(n notify.Notification, runbook string) []slack.Block {
	f := n.Finding
	var blocks []slack.Block
	if n.Event == notify.EventResolved {
		blocks = append(blocks,
			header(fmt.Sprintf(":white_check_mark: RESOLVED: %s (was %s)", notify.Subject(f), f.Tier)),
			section(fmt.Sprintf("*Resolved %s:* %s", n.At.UTC().Format(timeLayout), escape(n.Reason))))
	} else {
		prefix := ""
		if n.Event == notify.EventReminder {
			prefix = "Reminder: "
		}
		blocks = append(blocks, header(fmt.Sprintf("%s %s%s: %s: %s", emoji(f.Tier), prefix, strings.ToUpper(f.Tier.String()), notify.Subject(f), notify.Problem(f, n.At))))
	}

	tier := f.Tier.String()
	if n.Event == notify.EventEscalated && n.Previous > 0 {
		tier += " (was " + n.Previous.String() + ")"
	}
	fields := []*slack.TextBlockObject{field("*Tier*\n" + tier)}
	if notify.HasDeadline(f) {
		fields = append(fields, field(fmt.Sprintf("*Deadline*\n%s, %s", f.Deadline.UTC().Format(timeLayout), notify.In(f.Deadline.Time(), n.At))))
	}
	fields = append(fields, field("*Kind*\n"+escape(strings.ReplaceAll(string(f.Kind), "_", " "))))
	if f.Subject != "" {
		fields = append(fields, field("*Subject*\n"+code(f.Subject)))
	}
	if f.Name != "" {
		fields = append(fields, field("*Name*\n"+code(f.Name)))
	}
	if n.Issuer != "" {
		fields = append(fields, field("*Issuer*\n"+escape(n.Issuer)))
	}
	if f.Certificate != "" {
		fields = append(fields, field("*Certificate (SHA-256)*\n`"+shortSHA(f.Certificate)+"`"))
	}
	if !n.Since.IsZero() {
		fields = append(fields, field("*Open since*\n"+n.Since.UTC().Format(timeLayout)))
	}
	blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))

	if f.Message != "" {
		blocks = append(blocks, section("*What is wrong and what to do*\n"+escape(f.Message)))
	}
	if len(f.Endpoints) > 0 {
		blocks = append(blocks, section(blastRadius(f.Endpoints)))
	}
	refs := f.Refs()
	if len(refs.Locations) > 0 {
		blocks = append(blocks, section(heldAtRest(refs.Locations)))
	}
	if len(refs.ACM) > 0 {
		blocks = append(blocks, section(acmList(refs.ACM)))
	}
	blocks = append(blocks, footer(n.Key, runbook))
	return blocks
}

// acmList says which ACM certificates the finding concerns, who renews
// them, and what uses them.
func acmList(refs []policy.ACMRef) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*ACM: %d %s*", len(refs), notify.Plural(len(refs), "certificate", "certificates"))
	for _, r := range refs[:min(len(refs), 5)] {
		b.WriteString("\n• " + code(r.ARN))
		var facts []string
		if r.Type != "" {
			facts = append(facts, strings.ToLower(strings.ReplaceAll(string(r.Type), "_", " ")))
		}
		if r.Renewal != "" {
			renewal := "renewal: " + string(r.Renewal)
			if r.RenewalStatus != "" {
				renewal += " (" + string(r.RenewalStatus) + ")"
			}
			facts = append(facts, renewal)
		}
		if len(r.InUseBy) == 0 {
			facts = append(facts, "not in use")
		} else {
			var users []string
			for _, u := range r.InUseBy[:min(len(r.InUseBy), 3)] {
				users = append(users, code(u))
			}
			use := fmt.Sprintf("in use by %d: %s", len(r.InUseBy), strings.Join(users, ", "))
			if len(r.InUseBy) > 3 {
				use += ", …"
			}
			facts = append(facts, use)
		}
		b.WriteString(" · " + strings.Join(facts, " · "))
	}
	if len(refs) > 5 {
		fmt.Fprintf(&b, "\n… and %d more", len(refs)-5)
	}
	return b.String()
}

func blastRadius(eps []policy.Endpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*Blast radius: %d %s*", len(eps), notify.Plural(len(eps), "endpoint", "endpoints"))
	for _, e := range eps[:min(len(eps), listedEndpoints)] {
		b.WriteString("\n• " + code(e.String()))
	}
	if len(eps) > listedEndpoints {
		fmt.Fprintf(&b, "\n… and %d more (see the report or status page)", len(eps)-listedEndpoints)
	}
	return b.String()
}

// heldAtRest lists the places the certificate is held at rest.
func heldAtRest(locs []atrest.Location) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*Held at rest: %d %s*", len(locs), notify.Plural(len(locs), "place", "places"))
	for _, l := range locs[:min(len(locs), listedEndpoints)] {
		b.WriteString("\n• " + code(l.String()))
	}
	if len(locs) > listedEndpoints {
		fmt.Fprintf(&b, "\n… and %d more (see the report or status page)", len(locs)-listedEndpoints)
	}
	return b.String()
}

func footer(key, runbook string) slack.Block {
	texts := []string{"certwatch · " + code(shortKey(key))}
	if runbook != "" {
		texts = append(texts, "<"+runbook+"|Runbook>")
	}
	return contextBlock(texts...)
}

// threadBlocks renders a reply in the finding's thread for an update.
func threadBlocks(n notify.Notification) []slack.Block {
	f := n.Finding
	var text string
	switch n.Event {
	case notify.EventEscalated:
		text = fmt.Sprintf("%s *Escalated from %s to %s:* %s", emoji(f.Tier), n.Previous, f.Tier, notify.Problem(f, n.At))
	case notify.EventReminder:
		text = fmt.Sprintf(":alarm_clock: *Reminder, still open since %s:* %s", n.Since.UTC().Format("2006-01-02"), notify.Problem(f, n.At))
	case notify.EventResolved:
		text = ":white_check_mark: *Resolved:* " + escape(n.Reason)
	default:
		text = escape(notify.Headline(n))
	}
	if n.Event != notify.EventResolved && notify.HasDeadline(f) {
		text += fmt.Sprintf(" (deadline %s)", f.Deadline.UTC().Format(timeLayout))
	}
	if n.Event != notify.EventResolved && len(f.Endpoints) > 0 {
		text += fmt.Sprintf(". Blast radius: %d %s.", len(f.Endpoints), notify.Plural(len(f.Endpoints), "endpoint", "endpoints"))
	}
	return []slack.Block{section(text)}
}

// itemLine is one line of a digest or summary.
func itemLine(n notify.Notification) string {
	f := n.Finding
	var what string
	switch n.Event {
	case notify.EventResolved:
		what = ":white_check_mark: resolved"
	case notify.EventReminder:
		what = ":alarm_clock: still open"
	case notify.EventEscalated:
		what = emoji(f.Tier) + " now " + f.Tier.String()
	default:
		what = emoji(f.Tier) + " " + f.Tier.String()
	}
	if n.Event == notify.EventResolved {
		line := fmt.Sprintf("• %s · %s (was %s)", what, code(notify.Subject(f)), f.Tier)
		if n.Reason != "" {
			line += ": " + escape(n.Reason)
		}
		return line
	}
	line := fmt.Sprintf("• %s · %s: %s", what, code(notify.Subject(f)), notify.Problem(f, n.At))
	if notify.HasDeadline(f) {
		line += " (" + f.Deadline.UTC().Format("2006-01-02") + ")"
	}
	if len(f.Endpoints) > 0 {
		line += fmt.Sprintf(" · %d %s", len(f.Endpoints), notify.Plural(len(f.Endpoints), "endpoint", "endpoints"))
	}
	return line
}

// listBlocks packs lines into as few sections as Slack's limits allow,
// leaving room for the blocks around them, and says how many were left out.
func listBlocks(lines []string, room int, total int) []slack.Block {
	var blocks []slack.Block
	var cur strings.Builder
	shown := 0
	for _, l := range lines {
		if cur.Len()+len(l)+1 > maxSectionText-100 {
			if len(blocks) == room-1 {
				break
			}
			blocks = append(blocks, section(cur.String()))
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte('\n')
		}
		cur.WriteString(l)
		shown++
	}
	if rest := total - shown; rest > 0 {
		fmt.Fprintf(&cur, "\n… and %d more (see the report or status page)", rest)
	}
	if cur.Len() > 0 {
		blocks = append(blocks, section(cur.String()))
	}
	return blocks
}

func digestBlocks(n notify.Notification, runbook string) []slack.Block {
	blocks := []slack.Block{header(fmt.Sprintf(":calendar: certwatch digest: %d %s", len(n.Items), notify.Plural(len(n.Items), "item", "items")))}
	lines := make([]string, len(n.Items))
	for i, it := range n.Items {
		lines[i] = itemLine(it)
	}
	blocks = append(blocks, listBlocks(lines, maxBlocks-2, len(lines))...)
	return append(blocks, footer(n.Key, runbook))
}

func summaryBlocks(n notify.Notification, runbook string) []slack.Block {
	blocks := []slack.Block{
		header(fmt.Sprintf(":rotating_light: certwatch: %d %s at once", n.Total, notify.Plural(n.Total, "notification", "notifications"))),
		section(fmt.Sprintf("*%s.* Instead of one message each, here are the %d most urgent. The rest are in the report and on the status page and will not be announced one by one.", escape(capitalise(n.Reason)), len(n.Items))),
	}
	lines := make([]string, len(n.Items))
	for i, it := range n.Items {
		lines[i] = itemLine(it)
	}
	blocks = append(blocks, listBlocks(lines, maxBlocks-3, len(lines))...)
	return append(blocks, footer(n.Key, runbook))
}

func testBlocks(n notify.Notification) []slack.Block {
	return []slack.Block{
		header(":wave: certwatch test message"),
		section(escape(n.Reason)),
		contextBlock("Sent " + n.At.UTC().Format(timeLayout) + " by `certwatch notify test`"),
	}
}

func shortSHA(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// shortKey shortens a finding ID's certificate part for the footer.
func shortKey(k string) string {
	kind, rest, ok := strings.Cut(k, ":")
	if ok && len(rest) == 64 {
		return kind + ":" + rest[:16] + "…"
	}
	return k
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Package pagerduty sends notifications to a PagerDuty service through the
// Events API v2 (https://developer.pagerduty.com/docs/events-api-v2/).
//
// A finding triggers an alert whose dedup_key is derived from the finding's
// identity (kind and certificate), so a retried or repeated trigger folds
// into the same alert instead of paging twice; an escalation re-triggers it
// with the higher severity and a resolution resolves it. The routing key is
// held apart (Config prints without it) and appears in no error or log
// line.
//
// A 400 that names the routing key, and 401, 403 and 404, refuse the whole
// channel (notify.ChannelDown); any other 400 refuses one event
// (notify.Permanent); 429 and 5xx are retried.
package pagerduty

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
)

// DefaultURL is the Events API v2 enqueue endpoint.
const DefaultURL = "https://events.pagerduty.com/v2/enqueue"

// DefaultTimeout bounds one request.
const DefaultTimeout = 10 * time.Second

// MaxAnswerBytes caps how much of an answer is read. PagerDuty answers in
// a few hundred bytes; a longer answer fails the delivery (retried: the
// dedup key folds a repeat into the same alert).
const MaxAnswerBytes = 64 << 10

// maxEndpoints is how many endpoints custom_details lists; the count is
// always given.
const maxEndpoints = 50

// Sender posts events to one PagerDuty service. Set the exported fields
// before first use. It is safe for concurrent use.
type Sender struct {
	// Source is the payload's source field; "" means "certwatch".
	Source string
	// RunbookURL, when set, is linked from every alert.
	RunbookURL string

	name       string
	url        string
	routingKey string
	client     *http.Client
	timeout    time.Duration
}

// Config is a PagerDuty service as its Sender needs it: plain values, the
// routing key already read by the caller. It prints and logs without the
// routing key.
type Config struct {
	// Name is the certwatch channel's name, for errors.
	Name string
	// RoutingKey is the integration's routing key.
	RoutingKey string
	// URL is the enqueue endpoint; "" means DefaultURL.
	URL string
	// Timeout bounds one request; 0 means DefaultTimeout.
	Timeout time.Duration
}

// String describes c without its routing key.
func (c Config) String() string {
	return fmt.Sprintf("pagerduty channel %s (routing key <secret>)", c.Name)
}

// GoString is String, so that %#v does not print the routing key either.
func (c Config) GoString() string { return c.String() }

// LogValue is String, so that a logged Config carries no routing key.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// New returns a Sender for channel c. client is used for every request;
// nil means a client with no timeout of its own (each request is bounded
// by the channel's timeout). The Sender uses a copy of client that follows
// no redirect (a 307 or 308 would post the event, routing key included, to
// wherever it points) and reads at most MaxAnswerBytes of an answer
// (notify.GuardClient).
func New(c Config, client *http.Client) (*Sender, error) {
	if c.RoutingKey == "" {
		return nil, fmt.Errorf("pagerduty channel %s: empty routing key (set routing_key_env or routing_key_file)", c.Name)
	}
	s := &Sender{name: c.Name, url: c.URL, routingKey: c.RoutingKey, client: notify.GuardClient(client, MaxAnswerBytes), timeout: c.Timeout}
	if s.url == "" {
		s.url = DefaultURL
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	return s, nil
}

// DedupKey is the dedup_key for a notification key: stable across runs and
// restarts, and short whatever the key's length.
func DedupKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "certwatch-" + hex.EncodeToString(sum[:16])
}

// Severity maps a tier to a PagerDuty severity: critical → critical, page
// and warning → warning, lower → info.
func Severity(t policy.Tier) string {
	switch {
	case t >= policy.Critical:
		return "critical"
	case t >= policy.Warning:
		return "warning"
	}
	return "info"
}

type event struct {
	RoutingKey  string   `json:"routing_key"`
	EventAction string   `json:"event_action"`
	DedupKey    string   `json:"dedup_key"`
	Client      string   `json:"client,omitempty"`
	Payload     *payload `json:"payload,omitempty"`
	Links       []link   `json:"links,omitempty"`
}

type payload struct {
	Summary       string         `json:"summary"`
	Source        string         `json:"source"`
	Severity      string         `json:"severity"`
	Timestamp     string         `json:"timestamp,omitempty"`
	Component     string         `json:"component,omitempty"`
	Group         string         `json:"group,omitempty"`
	Class         string         `json:"class,omitempty"`
	CustomDetails map[string]any `json:"custom_details,omitempty"`
}

type link struct {
	Href string `json:"href"`
	Text string `json:"text,omitempty"`
}

// Send delivers n: a resolution resolves the alert, a test triggers and
// resolves one, anything else triggers (or re-triggers) the alert for
// n.Key. It returns the dedup_key as the reference.
func (s *Sender) Send(ctx context.Context, n notify.Notification) (string, error) {
	key := DedupKey(n.Key)
	switch n.Event {
	case notify.EventResolved:
		return key, s.post(ctx, "resolve", event{EventAction: "resolve", DedupKey: key})
	case notify.EventTest:
		if err := s.post(ctx, "trigger", s.trigger(n, key)); err != nil {
			return "", err
		}
		return key, s.post(ctx, "resolve", event{EventAction: "resolve", DedupKey: key})
	}
	return key, s.post(ctx, "trigger", s.trigger(n, key))
}

func (s *Sender) trigger(n notify.Notification, key string) event {
	source := s.Source
	if source == "" {
		source = "certwatch"
	}
	f := n.Finding
	p := &payload{
		Summary:   notify.Truncate(notify.Headline(n), 1024),
		Source:    source,
		Severity:  Severity(f.Tier),
		Timestamp: n.At.UTC().Format(time.RFC3339),
		Class:     string(f.Kind),
		Component: notify.Subject(f),
	}
	d := map[string]any{"event": string(n.Event)}
	switch n.Event {
	case notify.EventSummary, notify.EventDigest:
		top := policy.Tier(0)
		var items []string
		for _, it := range n.Items {
			top = max(top, it.Finding.Tier)
			items = append(items, notify.Headline(it))
		}
		p.Severity, p.Class, p.Component = Severity(top), "summary", ""
		d["reason"] = n.Reason
		d["total"] = n.Total
		d["top_items"] = items
	case notify.EventTest:
		p.Severity, p.Class, p.Component = "info", "test", ""
		d["message"] = n.Reason
	default:
		d["kind"] = string(f.Kind)
		d["tier"] = f.Tier.String()
		// Text a person reads in the incident: policy.Printable.
		d["message"] = policy.Printable(f.Message)
		if f.Certificate != "" {
			d["certificate_sha256"] = f.Certificate
		}
		if f.Subject != "" {
			d["subject"] = policy.Printable(f.Subject)
		}
		if n.Issuer != "" {
			d["issuer"] = policy.Printable(n.Issuer)
		}
		if f.Name != "" {
			d["name"] = policy.Printable(f.Name)
		}
		if notify.HasDeadline(f) {
			d["deadline"] = f.Deadline.UTC().Format(time.RFC3339)
			d["days_left"] = f.DaysLeft(n.At)
		}
		refs := f.Refs()
		if len(refs.ACM) > 0 {
			d["acm"] = acmDetails(refs.ACM)
		}
		if !n.Since.IsZero() {
			d["first_raised"] = n.Since.UTC().Format(time.RFC3339)
		}
		if n.Event == notify.EventEscalated {
			d["previous_tier"] = n.Previous.String()
		}
		d["blast_radius"] = len(f.Endpoints)
		eps := make([]string, 0, min(len(f.Endpoints), maxEndpoints))
		for _, e := range f.Endpoints[:min(len(f.Endpoints), maxEndpoints)] {
			eps = append(eps, e.String())
		}
		d["endpoints"] = eps
		if len(f.Endpoints) > maxEndpoints {
			d["endpoints_not_listed"] = len(f.Endpoints) - maxEndpoints
		}
		if at := refs.Locations; len(at) > 0 {
			locs := make([]string, 0, min(len(at), maxEndpoints))
			for _, l := range at[:min(len(at), maxEndpoints)] {
				locs = append(locs, policy.Printable(l.String()))
			}
			d["locations"] = locs
			if len(at) > maxEndpoints {
				d["locations_not_listed"] = len(at) - maxEndpoints
			}
		}
	}
	p.CustomDetails = d
	ev := event{EventAction: "trigger", DedupKey: key, Client: "certwatch", Payload: p}
	if s.RunbookURL != "" {
		ev.Links = []link{{Href: s.RunbookURL, Text: "Runbook"}}
	}
	return ev
}

// acmDetails lists the ACM certificates of a finding: where they are, who
// renews them and what uses them.
func acmDetails(refs []policy.ACMRef) []map[string]any {
	out := make([]map[string]any, 0, len(refs))
	for _, r := range refs {
		m := map[string]any{"arn": r.ARN, "region": r.Region, "type": string(r.Type), "renewal": string(r.Renewal)}
		if r.Account != "" {
			m["account"] = r.Account
		}
		if r.RenewalStatus != "" {
			m["renewal_status"] = string(r.RenewalStatus)
		}
		if r.RenewalEligibility != "" {
			m["renewal_eligibility"] = string(r.RenewalEligibility)
		}
		m["in_use_by_count"] = len(r.InUseBy)
		if len(r.InUseBy) > 0 {
			m["in_use_by"] = r.InUseBy[:min(len(r.InUseBy), maxEndpoints)]
		}
		out = append(out, m)
	}
	return out
}

// post sends one event. Errors name the channel and action but never the
// routing key or URL.
func (s *Sender) post(ctx context.Context, action string, ev event) error {
	op := fmt.Sprintf("pagerduty %s %s", s.name, action)
	ev.RoutingKey = s.routingKey
	body, err := json.Marshal(ev)
	if err != nil {
		return notify.Permanent(fmt.Errorf("%s: encode event: %w", op, err))
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, fmt.Errorf("%s: no answer within %v", op, s.timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return notify.Permanent(fmt.Errorf("%s: invalid url in channel settings", op))
	}
	req.Header.Set("Content-Type", "application/json")
	// A 2xx whose body is over the cap is not an answer PagerDuty gives:
	// retried, as a lost answer is.
	return notify.Send(ctx, s.client, req, notify.Answer{
		Op: op,
		Redirected: func(redirect *notify.RedirectError) error {
			// Every event would be redirected alike: hold the channel.
			return notify.ChannelDown(fmt.Errorf("%s: %s: check pagerduty.url in the channel's configuration (the Events API v2 enqueue endpoint, by default %s)",
				op, strings.ReplaceAll(redirect.Error(), s.routingKey, "<secret>"), DefaultURL))
		},
		Detail: func(b []byte) string { return detail(b, s.routingKey) },
		Refused: func(serr *notify.StatusError) error {
			switch serr.Status {
			case http.StatusBadRequest:
				if d := strings.ToLower(serr.Detail); strings.Contains(d, "routing_key") || strings.Contains(d, "routing key") {
					// The key, not this event, is refused: every event would be.
					serr.Hint = keyHint
					return notify.ChannelDown(serr)
				}
			case http.StatusUnauthorized, http.StatusForbidden:
				serr.Hint = keyHint
			case http.StatusNotFound:
				serr.Hint = "check pagerduty.url in the channel's configuration (the Events API v2 enqueue endpoint)"
			}
			return nil
		},
	})
}

// keyHint is what to check when PagerDuty refuses the routing key.
const keyHint = "check the routing key (routing_key_env or routing_key_file): the 32-character integration key of an Events API v2 integration on the service"

// detail extracts PagerDuty's message and errors from a response body,
// with anything resembling the routing key removed.
func detail(body []byte, key string) string {
	var r struct {
		Status  string   `json:"status"`
		Message string   `json:"message"`
		Errors  []string `json:"errors"`
	}
	var out string
	if json.Unmarshal(body, &r) == nil && (r.Message != "" || r.Status != "") {
		out = strings.TrimSpace(r.Status + ": " + r.Message)
		if len(r.Errors) > 0 {
			out += " (" + strings.Join(r.Errors, "; ") + ")"
		}
	}
	if key != "" {
		out = strings.ReplaceAll(out, key, "<secret>")
	}
	return notify.Truncate(out, 300)
}

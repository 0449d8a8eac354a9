// Package webhook posts notifications to an HTTP endpoint of the
// operator's own: one JSON body per notification (Body, version 1),
// signed with HMAC-SHA256 so the receiver can tell it comes from
// certwatch, unaltered and recent, with an idempotency key so it can tell
// a retry from a new transition.
//
// Each request carries:
//
//	Content-Type: application/json
//	X-Certwatch-Event: new | escalated | reminder | resolved | digest | summary | test
//	X-Certwatch-Idempotency-Key: 32 hex digits, the same on every attempt
//	                             to deliver one transition (restarts included)
//	X-Certwatch-Timestamp: Unix seconds at the attempt
//	X-Certwatch-Signature: sha256=hex(HMAC-SHA256(secret, timestamp + "." + body))
//
// The secret signs and is never sent. A receiver recomputes the signature
// over the exact bytes it received, compares it in constant time, refuses
// a timestamp more than five minutes from its clock, and answers 2xx once
// it has stored the body. Only the timestamp and the body are signed: the
// event and idempotency key headers are copies of the body's event and id,
// for routing and logs, and a replay within the five minutes can carry any
// values in them. A receiver acts on, and deduplicates by, the body's id
// and event (a repeated id is answered 2xx and not acted on again), and
// may refuse a request whose headers disagree with its body (certwatch
// never sends one).
//
// Any 2xx delivers. 408, 429 (with its Retry-After) and 5xx are retried
// with backoff; 401, 403, 404 and a redirect (never followed) refuse the
// channel (notify.ChannelDown: held and retried every retry.max); another
// 4xx refuses the one notification (notify.Permanent).
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
)

// Version is the version of Body this package sends.
const Version = 1

// Headers of every request.
const (
	HeaderEvent          = "X-Certwatch-Event"
	HeaderIdempotencyKey = "X-Certwatch-Idempotency-Key"
	HeaderTimestamp      = "X-Certwatch-Timestamp"
	HeaderSignature      = "X-Certwatch-Signature"
)

// DefaultTimeout bounds one request.
const DefaultTimeout = 10 * time.Second

// MaxAnswerBytes caps how much of an answer is read.
const MaxAnswerBytes = 64 << 10

// MaxEndpoints is how many endpoints a body lists; EndpointsTotal always
// counts them all.
const MaxEndpoints = 500

// Sender posts signed bodies to one endpoint. Set the exported fields
// before first use. It is safe for concurrent use.
type Sender struct {
	// StatusURL and RunbookURL, when set, are carried in every body.
	StatusURL  string
	RunbookURL string
	// Now is the clock of the timestamp header; nil means time.Now.
	Now func() time.Time

	name    string
	url     string
	secret  string
	client  *http.Client
	timeout time.Duration
}

// Config is a webhook endpoint as its Sender needs it: plain values, the
// signing secret already read by the caller. It prints and logs without
// the secret.
type Config struct {
	// Name is the certwatch channel's name, for errors and bodies.
	Name string
	// URL is where bodies are posted.
	URL string
	// Secret is the HMAC-SHA256 signing secret; it is never sent.
	Secret string
	// Timeout bounds one request; 0 means DefaultTimeout.
	Timeout time.Duration
}

// String describes c without its secret.
func (c Config) String() string {
	return fmt.Sprintf("webhook channel %s (signing secret <secret>)", c.Name)
}

// GoString is String, so that %#v does not print the secret either.
func (c Config) GoString() string { return c.String() }

// LogValue is String, so that a logged Config carries no secret.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// New returns a Sender for channel c. client is used for every request;
// nil means a client with no timeout of its own (each request is bounded
// by the channel's timeout). The Sender uses a copy of client that follows
// no redirect (a redirect is not an acknowledgement, and would carry the
// body elsewhere) and reads at most MaxAnswerBytes of an answer
// (notify.GuardClient).
func New(c Config, client *http.Client) (*Sender, error) {
	if c.URL == "" {
		return nil, fmt.Errorf("webhook channel %s: no webhook url", c.Name)
	}
	if c.Secret == "" {
		return nil, fmt.Errorf("webhook channel %s: empty signing secret (set secret_env or secret_file)", c.Name)
	}
	s := &Sender{name: c.Name, url: c.URL, secret: c.Secret, client: notify.GuardClient(client, MaxAnswerBytes), timeout: c.Timeout}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	return s, nil
}

// Body is the JSON body of version 1. Fields are added to a version, never
// renamed, removed or given another meaning; a change that would is a new
// version. Empty fields are left out.
type Body struct {
	// Version is 1.
	Version int `json:"version,omitempty"`
	// ID is the idempotency key, signed; X-Certwatch-Idempotency-Key
	// carries a copy that is not. Receivers deduplicate by this one.
	ID string `json:"id,omitempty"`
	// Event is new, escalated, reminder, resolved, digest, summary or test.
	Event string `json:"event"`
	// Channel is the certwatch channel's name.
	Channel string `json:"channel"`
	// At is when the transition happened (not when it was delivered).
	At time.Time `json:"at"`
	// AlertID identifies the alert across notifications (kind and
	// certificate or name): a new, its escalations, reminders and its
	// resolution share it.
	AlertID string `json:"alert_id,omitempty"`
	// Headline is one line for people.
	Headline string `json:"headline"`
	// Tier is the finding's tier (notice, warning, page, critical);
	// PreviousTier, for escalated, the tier the channel was told before.
	Tier         string `json:"tier,omitempty"`
	PreviousTier string `json:"previous_tier,omitempty"`
	// Finding is the finding as of At, for per-finding events.
	Finding *Finding `json:"finding,omitempty"`
	// FirstRaised is when the alert was first raised.
	FirstRaised time.Time `json:"first_raised,omitzero"`
	// Reason says why a resolution or a summary happened, or is the text
	// of a test.
	Reason string `json:"reason,omitempty"`
	// Items are, for digest and summary, the notifications they stand
	// for (bodies without version and id); Total counts them all, listed
	// or not.
	Items []Body `json:"items,omitempty"`
	Total int    `json:"total,omitempty"`
	// StatusURL and RunbookURL are certwatch's status page and runbook,
	// when configured.
	StatusURL  string `json:"status_url,omitempty"`
	RunbookURL string `json:"runbook_url,omitempty"`
}

// Finding is what a body says of a finding.
type Finding struct {
	Kind string `json:"kind"`
	Tier string `json:"tier"`
	// CertificateSHA256 is the leaf's fingerprint, hex; empty for findings
	// about a name.
	CertificateSHA256 string `json:"certificate_sha256,omitempty"`
	Subject           string `json:"subject,omitempty"`
	Issuer            string `json:"issuer,omitempty"`
	// Name is set for findings about a name ("name:port", a source, an
	// ARN) rather than a certificate.
	Name string `json:"name,omitempty"`
	// Message says what is wrong and what to do.
	Message string `json:"message"`
	// Deadline is the date to act by, with DaysLeft until it, for kinds
	// that have one (expiry, renewal); absent for problems broken now.
	Deadline *time.Time `json:"deadline,omitempty"`
	DaysLeft *int       `json:"days_left,omitempty"`
	// Endpoints is the blast radius (at most 500), EndpointsTotal its size.
	Endpoints      []policy.Endpoint `json:"endpoints"`
	EndpointsTotal int               `json:"endpoints_total"`
	// ACM lists the ACM certificates concerned, IAM the IAM ones.
	ACM []policy.ACMRef `json:"acm,omitempty"`
	IAM []policy.IAMRef `json:"iam,omitempty"`
	// Labels are the routing labels of the finding (zones, targets).
	Labels map[string]string `json:"labels,omitempty"`
}

// NewBody is the body of n, without Version and ID.
func NewBody(n notify.Notification) Body {
	b := Body{
		Event: string(n.Event), Channel: n.Channel, At: n.At.UTC(), Headline: notify.Headline(n),
		FirstRaised: n.Since.UTC(), Reason: n.Reason, Total: n.Total,
	}
	switch n.Event {
	case notify.EventDigest, notify.EventSummary:
		for _, it := range n.Items {
			b.Items = append(b.Items, NewBody(it))
		}
		return b
	case notify.EventTest:
		return b
	}
	f := n.Finding
	b.AlertID, b.Tier = n.Key, f.Tier.String()
	if n.Event == notify.EventEscalated && n.Previous > 0 {
		b.PreviousTier = n.Previous.String()
	}
	bf := &Finding{
		Kind: string(f.Kind), Tier: f.Tier.String(), Subject: f.Subject, Issuer: n.Issuer, Name: f.Name,
		Message: f.Message, Endpoints: f.Endpoints[:min(len(f.Endpoints), MaxEndpoints)], EndpointsTotal: len(f.Endpoints),
		ACM: f.Refs().ACM, IAM: f.Refs().IAM, Labels: n.Labels,
	}
	if bf.Endpoints == nil {
		bf.Endpoints = []policy.Endpoint{}
	}
	if f.Certificate != "" && f.Kind != policy.InconsistentDeployment {
		bf.CertificateSHA256 = f.Certificate
	}
	if notify.HasDeadline(f) {
		d, left := f.Deadline.UTC(), f.DaysLeft(n.At)
		bf.Deadline, bf.DaysLeft = &d, &left
	}
	b.Finding = bf
	return b
}

// Sign returns the X-Certwatch-Signature value of body sent at timestamp
// (the X-Certwatch-Timestamp value): "sha256=" and the hex HMAC-SHA256,
// keyed with secret, of timestamp, ".", and body.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Send posts n's body. The idempotency key is n.DeliveryKey; a
// notification that has none (a test) gets a random one.
func (s *Sender) Send(ctx context.Context, n notify.Notification) (string, error) {
	key := n.DeliveryKey
	if key == "" {
		var r [16]byte
		_, _ = crand.Read(r[:]) // never fails (crypto/rand)
		key = hex.EncodeToString(r[:])
	}
	b := NewBody(n)
	b.Version, b.ID, b.StatusURL, b.RunbookURL = Version, key, s.StatusURL, s.RunbookURL
	body, err := json.Marshal(b)
	if err != nil {
		return "", notify.Permanent(fmt.Errorf("webhook %s %s: encode body: %w", s.name, n.Event, err))
	}
	return "", s.post(ctx, string(n.Event), key, body)
}

// post sends one body. Errors name the channel, never the URL.
func (s *Sender) post(ctx context.Context, event, key string, body []byte) error {
	op := fmt.Sprintf("webhook %s %s", s.name, event)
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, fmt.Errorf("%s: no answer within %v", op, s.timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return notify.ChannelDown(fmt.Errorf("%s: invalid url in channel settings", op))
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "certwatch")
	req.Header.Set(HeaderEvent, event)
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign([]byte(s.secret), ts, body))
	// A 2xx whose body is over the cap is not a receiver's answer: it is
	// retried under the same key.
	return notify.Send(ctx, s.client, req, notify.Answer{
		Op: op,
		Redirected: func(redirect *notify.RedirectError) error {
			return notify.ChannelDown(fmt.Errorf("%s: %s: a redirect is not an acknowledgement; check webhook.url in the channel's configuration (the receiver's own address)", op, redirect.Error()))
		},
		Detail: detail,
		Refused: func(serr *notify.StatusError) error {
			switch serr.Status {
			case http.StatusUnauthorized, http.StatusForbidden:
				serr.Hint = "the receiver refuses the signature: check that it verifies with the same secret (secret_env or secret_file) and that its clock is within 5 minutes of certwatch's"
			case http.StatusNotFound:
				serr.Hint = "check webhook.url in the channel's configuration"
			}
			return nil
		},
	})
}

// detail is the start of an answer's body, printable, for the error.
func detail(b []byte) string {
	s := policy.Printable(strings.TrimSpace(string(b)))
	if len(s) > 300 {
		i := 300
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		s = s[:i] + "…"
	}
	return s
}

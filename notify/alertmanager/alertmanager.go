// Package alertmanager sends notifications to a Prometheus Alertmanager
// through its v2 API (POST /api/v2/alerts, a JSON array of postableAlert:
// https://github.com/prometheus/alertmanager/blob/main/api/v2/openapi.yaml).
//
// Each alert open on the channel is one Alertmanager alert, identified as
// Alertmanager identifies alerts, by its label set: alertname (per kind,
// CertwatchExpiring, CertwatchChainUntrusted, ...), kind, severity (the
// tier the channel was told), the certificate's SHA-256 or the name the
// finding is about, the subject, and the finding's routing labels (zone,
// target and Route 53 labels). Posting the same alert again, from a retry,
// a re-send or a restarted certwatch, updates that one alert.
//
// Alertmanager resolves an alert whose endsAt has passed, so an open alert
// is posted with an endsAt EndsAfter ahead of the post, and posted again
// every ResendInterval (the dispatcher's Refresher re-send) for as long
// as it is open; a resolution posts it with endsAt at the resolution, and
// an escalation resolves the alert of the lower tier as it posts the
// higher one. Should certwatch stop, its alerts resolve EndsAfter after
// the last post; an Alertmanager that restarts (it keeps no alerts) has
// them back at the next re-send. Silences are Alertmanager's: certwatch
// keeps posting a silenced alert and Alertmanager keeps it quiet.
//
// 400 refuses the alerts posted (notify.Permanent); 401, 403, 404 and a
// redirect refuse the channel (notify.ChannelDown); 408, 429 (with its
// Retry-After) and 5xx are retried.
package alertmanager

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
)

// APIPath is where alerts are posted, below the channel's URL.
const APIPath = "/api/v2/alerts"

// DefaultTimeout bounds one request.
const DefaultTimeout = 10 * time.Second

// MaxAnswerBytes caps how much of an answer is read: Alertmanager answers
// a post with an empty body, or an error of a few hundred bytes.
const MaxAnswerBytes = 64 << 10

// maxBatch is how many alerts one re-send request carries.
const maxBatch = 500

// maxEndpoints is how many endpoints an alert's annotation lists; the
// count is always given.
const maxEndpoints = 20

// Sender posts alerts to one Alertmanager. Set the exported fields before
// first use. It is safe for concurrent use.
type Sender struct {
	// StatusURL, when set, is every alert's generatorURL: certwatch's
	// status page.
	StatusURL string
	// RunbookURL, when set, is every alert's runbook_url annotation.
	RunbookURL string
	// Now is the clock that endsAt is reckoned from; nil means time.Now.
	Now func() time.Time

	name      string
	url       string
	client    *http.Client
	timeout   time.Duration
	every     time.Duration
	endsAfter time.Duration
}

// Defaults of Config's zero values.
const (
	// DefaultResendInterval is how often open alerts are posted again.
	DefaultResendInterval = time.Minute
	// DefaultEndsFactor times the resend interval is the default EndsAfter.
	DefaultEndsFactor = 4
)

// Config is an Alertmanager as its Sender needs it: plain values.
type Config struct {
	// Name is the certwatch channel's name, for errors and labels.
	Name string
	// URL is Alertmanager's base URL (a path prefix is kept).
	URL string
	// ResendInterval is how often open alerts are posted again; 0 means
	// DefaultResendInterval.
	ResendInterval time.Duration
	// EndsAfter is how far ahead of each post an open alert's endsAt is;
	// 0 means DefaultEndsFactor × ResendInterval. It must exceed
	// ResendInterval, or open alerts resolve between posts.
	EndsAfter time.Duration
	// Timeout bounds one request; 0 means DefaultTimeout.
	Timeout time.Duration
}

// New returns a Sender for channel c. client is used for every request;
// nil means a client with no timeout of its own (each request is bounded
// by the channel's timeout). The Sender uses a copy of client that follows
// no redirect and reads at most MaxAnswerBytes of an answer
// (notify.GuardClient).
func New(c Config, client *http.Client) (*Sender, error) {
	if c.URL == "" {
		return nil, fmt.Errorf("alertmanager channel %s: no alertmanager url", c.Name)
	}
	every, ends := c.ResendInterval, c.EndsAfter
	if every <= 0 {
		every = DefaultResendInterval
	}
	if ends <= 0 {
		ends = DefaultEndsFactor * every
	}
	if ends <= every {
		return nil, fmt.Errorf("alertmanager channel %s: ends_after (%v) must be longer than resend_interval (%v), or open alerts resolve between posts", c.Name, ends, every)
	}
	s := &Sender{
		name: c.Name, url: strings.TrimSuffix(c.URL, "/") + APIPath,
		client: notify.GuardClient(client, MaxAnswerBytes), timeout: c.Timeout,
		every: every, endsAfter: ends,
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	return s, nil
}

func (s *Sender) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Alert is a postableAlert of Alertmanager's v2 API.
type Alert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// RefreshEvery is the channel's resend_interval.
func (s *Sender) RefreshEvery() time.Duration { return s.every }

// Send posts the alerts of n: a new, reminded or escalated finding fires
// (an escalation also resolves the alert of the tier before), a resolution
// resolves, a storm summary fires an alert of its own (resolved by a later
// resolution of its key), and a test fires a CertwatchTest alert that ends
// EndsAfter later. A digest is refused: validation keeps digest routes
// away from Alertmanager channels.
func (s *Sender) Send(ctx context.Context, n notify.Notification) (string, error) {
	now := s.now()
	var alerts []Alert
	switch n.Event {
	case notify.EventDigest:
		return "", notify.Permanent(fmt.Errorf("alertmanager %s: a digest cannot be posted as alerts (digest routes do not take alertmanager channels)", s.name))
	case notify.EventTest:
		alerts = []Alert{{
			Labels:       map[string]string{"alertname": "CertwatchTest", "channel": n.Channel, "severity": "info"},
			Annotations:  map[string]string{"summary": notify.Headline(n), "description": n.Reason},
			StartsAt:     now,
			EndsAt:       now.Add(s.endsAfter),
			GeneratorURL: s.StatusURL,
		}}
	case notify.EventResolved:
		a := s.alert(n, told(n))
		a.EndsAt = n.At
		if a.EndsAt.Before(a.StartsAt) {
			a.EndsAt = a.StartsAt
		}
		alerts = []Alert{a}
	case notify.EventEscalated:
		if n.Previous > 0 && n.Previous != n.Finding.Tier {
			old := s.alert(n, n.Previous)
			old.EndsAt = n.At
			alerts = append(alerts, old)
		}
		a := s.alert(n, n.Finding.Tier)
		a.EndsAt = now.Add(s.endsAfter)
		alerts = append(alerts, a)
	default:
		a := s.alert(n, told(n))
		a.EndsAt = now.Add(s.endsAfter)
		alerts = []Alert{a}
	}
	return "", s.post(ctx, alerts)
}

// Refresh posts notes, open alerts, again with an endsAt EndsAfter from
// now, in batches of at most 500.
func (s *Sender) Refresh(ctx context.Context, notes []notify.Notification) error {
	ends := s.now().Add(s.endsAfter)
	for len(notes) > 0 {
		chunk := notes[:min(len(notes), maxBatch)]
		notes = notes[len(chunk):]
		alerts := make([]Alert, len(chunk))
		for i, n := range chunk {
			alerts[i] = s.alert(n, told(n))
			alerts[i].EndsAt = ends
		}
		if err := s.post(ctx, alerts); err != nil {
			return err
		}
	}
	return nil
}

// told is the tier n's alert stands at on the channel.
func told(n notify.Notification) policy.Tier {
	switch {
	case n.Event == notify.EventSummary:
		top := policy.Tier(0)
		for _, it := range n.Items {
			top = max(top, it.Finding.Tier)
		}
		return top
	case n.Told > 0:
		return n.Told
	}
	return n.Finding.Tier
}

// Labels returns the label set that identifies the alert of n at tier
// tier. Routing labels whose names Alertmanager would refuse are renamed
// (every character other than a letter, digit or '_' becomes '_'); they
// never replace certwatch's own.
func Labels(n notify.Notification, tier policy.Tier) map[string]string {
	f := n.Finding
	l := map[string]string{}
	if info, _ := f.Kind.Info(); info.Origin != policy.OriginDelivery && n.Event != notify.EventSummary {
		// Alerts about delivery itself (channel_failing, storm summaries)
		// are about no zone or target.
		for k, v := range n.Labels {
			l[labelName(k)] = v
		}
	}
	if n.Event == notify.EventSummary || f.Kind == policy.StormSummary {
		l["alertname"] = "CertwatchStormSummary"
		l["kind"] = string(policy.StormSummary)
		l["summary_key"] = n.Key
		l["severity"] = tier.String()
		return l
	}
	kind := f.Kind
	if kind == policy.Expired && f.Certificate != "" {
		// An expired certificate continues the alert of its expiry
		// (notify.AlertID): the same labels, the same Alertmanager alert.
		kind = policy.Expiring
	}
	l["alertname"] = AlertName(kind)
	l["kind"] = string(kind)
	l["severity"] = tier.String()
	if f.Certificate != "" && kind != policy.InconsistentDeployment {
		l["certificate_sha256"] = f.Certificate
	} else {
		delete(l, "certificate_sha256")
	}
	if f.Name != "" {
		l["name"] = policy.Printable(f.Name)
	} else {
		delete(l, "name")
	}
	if f.Subject != "" {
		l["subject"] = policy.Printable(f.Subject)
	} else {
		delete(l, "subject")
	}
	return l
}

// AlertName is the alertname of findings of kind k: "Certwatch" and the
// kind in camel case (expiring: CertwatchExpiring, chain_untrusted:
// CertwatchChainUntrusted).
func AlertName(k policy.Kind) string {
	var b strings.Builder
	b.WriteString("Certwatch")
	for w := range strings.SplitSeq(string(k), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return labelName(b.String())
}

var invalidLabelChar = regexp.MustCompile(`[^A-Za-z0-9_]`)

// labelName makes k a label name Alertmanager accepts
// ([a-zA-Z_][a-zA-Z0-9_]*).
func labelName(k string) string {
	k = invalidLabelChar.ReplaceAllString(k, "_")
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		k = "_" + k
	}
	return k
}

// alert is n's alert at tier, without EndsAt.
func (s *Sender) alert(n notify.Notification, tier policy.Tier) Alert {
	f := n.Finding
	a := Alert{Labels: Labels(n, tier), GeneratorURL: s.StatusURL, StartsAt: n.Since}
	if a.StartsAt.IsZero() {
		a.StartsAt = n.At
	}
	ann := map[string]string{}
	if n.Event == notify.EventSummary || f.Kind == policy.StormSummary {
		ann["summary"] = notify.Truncate(notify.Headline(n), 1024)
		if n.Reason != "" {
			ann["description"] = notify.Truncate(n.Reason, 4096)
		} else {
			ann["description"] = notify.Truncate(policy.Printable(f.Message), 4096)
		}
		var items []string
		for _, it := range n.Items {
			items = append(items, notify.Headline(it))
		}
		if len(items) > 0 {
			ann["items"] = notify.Truncate(strings.Join(items, "\n"), 4096)
		}
	} else {
		ann["summary"] = notify.Truncate(notify.Subject(f)+": "+notify.Problem(f, n.At), 1024)
		// The finding's message says what is wrong and what to do.
		ann["description"] = notify.Truncate(policy.Printable(f.Message), 4096)
		ann["tier"] = f.Tier.String()
		if f.Kind != "" {
			ann["finding_kind"] = string(f.Kind)
		}
		if notify.HasDeadline(f) {
			ann["deadline"] = f.Deadline.UTC().Format(time.RFC3339)
		}
		if n.Issuer != "" {
			ann["issuer"] = notify.Truncate(policy.Printable(n.Issuer), 1024)
		}
		if len(f.Endpoints) > 0 {
			eps := make([]string, 0, min(len(f.Endpoints), maxEndpoints))
			for _, e := range f.Endpoints[:min(len(f.Endpoints), maxEndpoints)] {
				eps = append(eps, policy.Printable(e.String()))
			}
			if len(f.Endpoints) > maxEndpoints {
				eps = append(eps, fmt.Sprintf("and %d more", len(f.Endpoints)-maxEndpoints))
			}
			ann["endpoints"] = strings.Join(eps, "\n")
			ann["blast_radius"] = strconv.Itoa(len(f.Endpoints))
		}
		if n.Event == notify.EventResolved && n.Reason != "" {
			ann["resolution"] = notify.Truncate(n.Reason, 1024)
		}
	}
	if s.RunbookURL != "" {
		ann["runbook_url"] = s.RunbookURL
	}
	a.Annotations = ann
	return a
}

// post sends alerts in one request. Errors name the channel, never the URL.
func (s *Sender) post(ctx context.Context, alerts []Alert) error {
	op := fmt.Sprintf("alertmanager %s post %d alert(s)", s.name, len(alerts))
	body, err := json.Marshal(alerts)
	if err != nil {
		return notify.Permanent(fmt.Errorf("%s: encode alerts: %w", op, err))
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, fmt.Errorf("%s: no answer within %v", op, s.timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return notify.ChannelDown(fmt.Errorf("%s: invalid url in channel settings", op))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "certwatch")
	return notify.Send(ctx, s.client, req, notify.Answer{
		Op: op,
		Redirected: func(redirect *notify.RedirectError) error {
			return notify.ChannelDown(fmt.Errorf("%s: %s: check alertmanager.url in the channel's configuration (Alertmanager's base URL, e.g. http://alertmanager:9093; %s is appended)", op, redirect.Error(), APIPath))
		},
		Detail: func(b []byte) string { return notify.Truncate(policy.Printable(strings.TrimSpace(string(b))), 300) },
		Refused: func(serr *notify.StatusError) error {
			switch serr.Status {
			case http.StatusNotFound:
				serr.Hint = "check alertmanager.url in the channel's configuration (Alertmanager's base URL with its --web.route-prefix, if any; " + APIPath + " is appended)"
			case http.StatusUnauthorized, http.StatusForbidden:
				serr.Hint = "Alertmanager, or a proxy in front of it, refuses certwatch: allow it to post to " + APIPath
			}
			return nil
		},
	})
}

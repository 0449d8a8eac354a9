// Package pagerdutytest is a local PagerDuty Events API v2 for tests: it
// accepts POST /v2/enqueue on a loopback port, validates events as
// PagerDuty does (routing key, action, dedup key, payload fields and
// severities), answers 202 with the dedup key, and keeps the alerts it
// opened and resolved, so tests assert on what an on-call engineer would
// see. Scripted responses (400, 429 with Retry-After, 5xx) test retries.
package pagerdutytest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

// Event is one event as the server received and accepted or refused it.
type Event struct {
	RoutingKey  string  `json:"routing_key"`
	EventAction string  `json:"event_action"`
	DedupKey    string  `json:"dedup_key,omitempty"`
	Client      string  `json:"client,omitempty"`
	ClientURL   string  `json:"client_url,omitempty"`
	Payload     Payload `json:"payload"`
	Links       []Link  `json:"links,omitempty"`
	// Status is the HTTP status the server answered.
	Status int `json:"-"`
}

// Payload is a trigger's payload.
type Payload struct {
	Summary       string         `json:"summary"`
	Source        string         `json:"source"`
	Severity      string         `json:"severity"`
	Timestamp     string         `json:"timestamp,omitempty"`
	Component     string         `json:"component,omitempty"`
	Group         string         `json:"group,omitempty"`
	Class         string         `json:"class,omitempty"`
	CustomDetails map[string]any `json:"custom_details,omitempty"`
}

// Link is a link attached to an alert.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text,omitempty"`
}

// Alert is what PagerDuty holds for one dedup key.
type Alert struct {
	DedupKey string
	// Status is "triggered", "acknowledged" or "resolved".
	Status   string
	Severity string
	Summary  string
	// Triggers counts trigger events folded into the alert.
	Triggers int
	// Opened counts how often the alert went from not triggered to
	// triggered: how many times someone was paged.
	Opened int
}

// Response is a scripted answer to one request.
type Response struct {
	Status int
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Body replaces the default body.
	Body string
}

// Server is a fake Events API v2. It is safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu     sync.Mutex
	keys   []string
	script []Response
	events []Event
	alerts map[string]*Alert
	order  []string
}

// New starts a server on 127.0.0.1 accepting the given routing keys and
// closes it when the test ends.
func New(t testing.TB, routingKeys ...string) *Server {
	s := &Server{keys: routingKeys, alerts: map[string]*Alert{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// Close stops the server; requests then fail to connect.
func (s *Server) Close() { s.srv.Close() }

// URL is the enqueue endpoint, for the sender's URL setting.
func (s *Server) URL() string { return s.srv.URL + "/v2/enqueue" }

// Script queues responses for the next requests, in order, instead of
// processing them. Once the script is used up the server works normally.
func (s *Server) Script(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, rs...)
}

// Events returns every request the server received, in order, including
// refused ones (with their Status).
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Alerts returns the alerts the accepted events produced, in the order they
// were first triggered.
func (s *Server) Alerts() []Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Alert, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, *s.alerts[k])
	}
	return out
}

var severities = []string{"critical", "error", "warning", "info"}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v2/enqueue" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 512*1024+1))
	if err != nil {
		http.Error(w, "read error", http.StatusBadRequest)
		return
	}
	var ev Event
	jsonErr := json.Unmarshal(body, &ev)

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) > 0 {
		resp := s.script[0]
		s.script = s.script[1:]
		ev.Status = resp.Status
		s.events = append(s.events, ev)
		if resp.RetryAfter != "" {
			w.Header().Set("Retry-After", resp.RetryAfter)
		}
		b := resp.Body
		if b == "" {
			switch {
			case resp.Status == http.StatusTooManyRequests:
				b = `{"status":"throttle event","message":"Requests for this service are arriving too quickly.  Please retry later."}`
			case resp.Status >= 500:
				b = "<html><body>Service Unavailable</body></html>"
			default:
				b = `{"status":"invalid event","message":"Event object is invalid","errors":["scripted failure"]}`
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.Status)
		io.WriteString(w, b)
		return
	}

	var problems []string
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		problems = append(problems, "Content-Type must be application/json")
	}
	if len(body) > 512*1024 {
		problems = append(problems, "Event object is larger than 512KB")
	}
	if jsonErr != nil {
		problems = append(problems, "Event object is not valid JSON")
	}
	if !slices.Contains(s.keys, ev.RoutingKey) || len(ev.RoutingKey) != 32 {
		problems = append(problems, "'routing_key' is invalid")
	}
	switch ev.EventAction {
	case "trigger":
		if ev.Payload.Summary == "" || len(ev.Payload.Summary) > 1024 {
			problems = append(problems, "'payload.summary' is missing or longer than 1024 characters")
		}
		if ev.Payload.Source == "" {
			problems = append(problems, "'payload.source' is missing or blank")
		}
		if !slices.Contains(severities, ev.Payload.Severity) {
			problems = append(problems, "'payload.severity' is invalid (must be one of critical, error, warning, info)")
		}
	case "acknowledge", "resolve":
		if ev.DedupKey == "" {
			problems = append(problems, "'dedup_key' is required for "+ev.EventAction)
		}
	default:
		problems = append(problems, "'event_action' is invalid (must be one of trigger, acknowledge, resolve)")
	}
	if len(ev.DedupKey) > 255 {
		problems = append(problems, "'dedup_key' is longer than 255 characters")
	}
	w.Header().Set("Content-Type", "application/json")
	if len(problems) > 0 {
		ev.Status = http.StatusBadRequest
		s.events = append(s.events, ev)
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]any{"status": "invalid event", "message": "Event object is invalid", "errors": problems})
		return
	}
	if ev.DedupKey == "" {
		var b [16]byte
		rand.Read(b[:])
		ev.DedupKey = hex.EncodeToString(b[:])
	}
	ev.Status = http.StatusAccepted
	s.events = append(s.events, ev)
	s.apply(ev)
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, `{"status":"success","message":"Event processed","dedup_key":%q}`, ev.DedupKey)
}

// apply folds an accepted event into the alerts, as PagerDuty does: a
// trigger on an open alert adds to it, a trigger on a resolved one opens it
// again, and acknowledge or resolve of an unknown key is dropped.
func (s *Server) apply(ev Event) {
	a, ok := s.alerts[ev.DedupKey]
	switch ev.EventAction {
	case "trigger":
		if !ok {
			a = &Alert{DedupKey: ev.DedupKey}
			s.alerts[ev.DedupKey] = a
			s.order = append(s.order, ev.DedupKey)
		}
		if a.Status != "triggered" && a.Status != "acknowledged" {
			a.Opened++
			a.Status = "triggered"
			a.Severity, a.Summary = ev.Payload.Severity, ev.Payload.Summary
		}
		a.Triggers++
	case "acknowledge":
		if ok && a.Status == "triggered" {
			a.Status = "acknowledged"
		}
	case "resolve":
		if ok {
			a.Status = "resolved"
		}
	}
}

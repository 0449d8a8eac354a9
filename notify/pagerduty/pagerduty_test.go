package pagerduty_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/internal/pagerdutytest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/pagerduty"
	"github.com/certwatch/certwatch/policy"
)

const routingKey = "R0UTINGKEY0123456789abcdefABCDEF"

var now = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func newSender(t *testing.T, url string) *pagerduty.Sender {
	t.Helper()
	c := pagerduty.Config{Name: "oncall", RoutingKey: routingKey, URL: url}
	s, err := pagerduty.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.RunbookURL = "https://wiki.example/certs"
	return s
}

func finding(tier policy.Tier) policy.Finding {
	eps := []policy.Endpoint{{Name: "a.internal.example", Port: 443, Address: "10.0.0.1"}}
	for i := range 60 {
		eps = append(eps, policy.Endpoint{Name: "svc.internal.example", Port: 8443 + i, Address: "10.0.0.2"})
	}
	return policy.Finding{
		Kind: policy.Expiring, Tier: tier, Certificate: strings.Repeat("ab", 32), Subject: "*.internal.example",
		Deadline: policy.At(now.AddDate(0, 0, 6)), Endpoints: eps, Message: "renew the wildcard and deploy it everywhere",
	}
}

func TestTriggerEscalateResolve(t *testing.T) {
	ctx := context.Background()
	pd := pagerdutytest.New(t, routingKey)
	s := newSender(t, pd.URL())
	f := finding(policy.Page)

	ref, err := s.Send(ctx, notify.Notification{Event: notify.EventNew, Channel: "oncall", At: now, Key: f.ID(), Finding: f, Since: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := pagerduty.DedupKey(f.ID()); ref != want {
		t.Errorf("ref = %q, want the dedup key %q", ref, want)
	}
	// A retry after a lost answer, then the escalation to critical.
	if _, err := s.Send(ctx, notify.Notification{Event: notify.EventNew, Channel: "oncall", At: now, Key: f.ID(), Finding: f, Since: now}); err != nil {
		t.Fatal(err)
	}
	f.Tier = policy.Critical
	if _, err := s.Send(ctx, notify.Notification{Event: notify.EventEscalated, Channel: "oncall", At: now.AddDate(0, 0, 5), Key: f.ID(), Finding: f, Previous: policy.Page}); err != nil {
		t.Fatal(err)
	}

	evs := pd.Events()
	if len(evs) != 3 {
		t.Fatalf("server got %d events, want 3", len(evs))
	}
	first := evs[0]
	if first.RoutingKey != routingKey || first.EventAction != "trigger" || first.DedupKey != ref || first.Status != http.StatusAccepted {
		t.Errorf("first event = %+v, want an accepted trigger with the routing key and dedup key", first)
	}
	if first.Payload.Severity != "warning" || evs[2].Payload.Severity != "critical" {
		t.Errorf("severities = %q, %q, want warning for page and critical for critical", first.Payload.Severity, evs[2].Payload.Severity)
	}
	if got, want := first.Payload.Summary, "PAGE: *.internal.example: certificate expires in 6 days"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	d := first.Payload.CustomDetails
	if d["blast_radius"] != float64(61) || d["endpoints_not_listed"] != float64(11) || len(d["endpoints"].([]any)) != 50 {
		t.Errorf("custom_details blast radius = %v / %v / %d listed, want 61 / 11 / 50", d["blast_radius"], d["endpoints_not_listed"], len(d["endpoints"].([]any)))
	}
	if d["certificate_sha256"] != f.Certificate || d["message"] != f.Message || d["days_left"] != float64(6) {
		t.Errorf("custom_details = %v, want certificate, message and days_left", d)
	}
	if len(first.Links) != 1 || first.Links[0].Href != "https://wiki.example/certs" {
		t.Errorf("links = %v, want the runbook", first.Links)
	}

	if _, err := s.Send(ctx, notify.Notification{Event: notify.EventResolved, Channel: "oncall", At: now.AddDate(0, 0, 6), Key: f.ID(), Finding: f, Reason: "certificate replaced"}); err != nil {
		t.Fatal(err)
	}
	alerts := pd.Alerts()
	if len(alerts) != 1 || alerts[0].Opened != 1 || alerts[0].Triggers != 3 || alerts[0].Status != "resolved" {
		t.Errorf("alerts = %+v, want one alert, paged once, three triggers folded in, resolved", alerts)
	}
}

func TestACMAndBrokenNowDetails(t *testing.T) {
	pd := pagerdutytest.New(t, routingKey)
	s := newSender(t, pd.URL())
	f := policy.Finding{Kind: policy.HostnameMismatch, Tier: policy.Page, Certificate: strings.Repeat("cd", 32), Subject: "old.example.com", Deadline: policy.At(now),
		Records: &policy.Records{ACM: []policy.ACMRef{{ARN: "arn:aws:acm:eu-west-1:123456789012:certificate/1", Region: "eu-west-1", Type: "IMPORTED", Renewal: policy.RenewalManual,
			InUseBy: []string{"arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/app/a/1"}}}}}
	if _, err := s.Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f}); err != nil {
		t.Fatal(err)
	}
	d := pd.Events()[0].Payload.CustomDetails
	if _, ok := d["days_left"]; ok {
		t.Errorf("custom_details has days_left %v for a problem that is broken now", d["days_left"])
	}
	acm, _ := d["acm"].([]any)
	if len(acm) != 1 {
		t.Fatalf("custom_details acm = %v, want one certificate", d["acm"])
	}
	a := acm[0].(map[string]any)
	if a["arn"] != f.Refs().ACM[0].ARN || a["renewal"] != "manual" || a["in_use_by_count"] != float64(1) {
		t.Errorf("acm details = %v, want the ARN, manual renewal and its user", a)
	}
}

// errClass is how the dispatcher treats a sender's error.
func errClass(err error) string {
	switch {
	case notify.IsChannelDown(err):
		return "down"
	case notify.IsPermanent(err):
		return "refused"
	}
	return "retry"
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		script  pagerdutytest.Response
		class   string // retry, refused (this event) or down (the channel)
		retryIn time.Duration
		mention string
	}{
		{"invalid event", pagerdutytest.Response{Status: 400}, "refused", 0, "scripted failure"},
		{"invalid routing key", pagerdutytest.Response{Status: 400, Body: `{"status":"invalid event","message":"Event object is invalid","errors":["'routing_key' is invalid"]}`}, "down", 0, "check the routing key"},
		{"throttled with retry-after", pagerdutytest.Response{Status: 429, RetryAfter: "7"}, "retry", 7 * time.Second, "http 429"},
		{"throttled", pagerdutytest.Response{Status: 429}, "retry", 0, "http 429"},
		{"server error", pagerdutytest.Response{Status: 500}, "retry", 0, "http 500"},
		{"unavailable", pagerdutytest.Response{Status: 503, RetryAfter: "2"}, "retry", 2 * time.Second, "http 503"},
		{"unauthorized", pagerdutytest.Response{Status: 401, Body: `{"status":"unauthorized","message":"bad key"}`}, "down", 0, "check the routing key"},
		{"forbidden", pagerdutytest.Response{Status: 403, Body: `{"status":"forbidden","message":"key ` + routingKey + ` disabled"}`}, "down", 0, "check the routing key"},
		{"wrong url", pagerdutytest.Response{Status: 404, Body: `{"status":"not found"}`}, "down", 0, "pagerduty.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pd := pagerdutytest.New(t, routingKey)
			pd.Script(tt.script)
			f := finding(policy.Page)
			_, err := newSender(t, pd.URL()).Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
			if err == nil {
				t.Fatal("Send = nil, want an error")
			}
			if got := errClass(err); got != tt.class {
				t.Errorf("Send = %v, treated as %s, want %s", err, got, tt.class)
			}
			d, ok := notify.RetryDelay(err)
			if tt.retryIn > 0 && (!ok || d != tt.retryIn) {
				t.Errorf("RetryDelay(%v) = %v, %v, want %v", err, d, ok, tt.retryIn)
			}
			if strings.Contains(err.Error(), routingKey) || strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("error %q reveals the routing key or the URL", err)
			}
			if !strings.Contains(err.Error(), "pagerduty oncall trigger") || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not name the channel and action or mention %q", err, tt.mention)
			}
		})
	}
}

func TestRefusedByRealValidation(t *testing.T) {
	pd := pagerdutytest.New(t, "SOMEOTHERKEY00000000000000000000")
	f := finding(policy.Page)
	_, err := newSender(t, pd.URL()).Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
	if !notify.IsChannelDown(err) || !strings.Contains(err.Error(), "routing_key") || strings.Contains(err.Error(), routingKey) {
		t.Errorf("Send with an unknown key = %v, want a channel-down error about the routing key that does not show it", err)
	}
}

func TestUnreachable(t *testing.T) {
	pd := pagerdutytest.New(t, routingKey)
	url := pd.URL()
	s := newSender(t, url)
	// Closing the fake leaves a loopback port nobody listens on.
	pd.Close()
	f := finding(policy.Page)
	_, err := s.Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
	if err == nil || notify.IsPermanent(err) {
		t.Fatalf("Send to a closed port = %v, want a retryable error", err)
	}
	if strings.Contains(err.Error(), url) {
		t.Errorf("error %q contains the URL", err)
	}
}

func TestTestEventTriggersAndResolves(t *testing.T) {
	pd := pagerdutytest.New(t, routingKey)
	if _, err := newSender(t, pd.URL()).Send(context.Background(), notify.Notification{Event: notify.EventTest, Channel: "oncall", At: now, Key: "test:oncall", Reason: "hello"}); err != nil {
		t.Fatal(err)
	}
	a := pd.Alerts()
	if len(a) != 1 || a[0].Status != "resolved" || a[0].Severity != "info" {
		t.Errorf("alerts after a test = %+v, want one info alert, already resolved", a)
	}
}

func TestNewNeedsKey(t *testing.T) {
	c := pagerduty.Config{Name: "oncall"}
	if _, err := pagerduty.New(c, nil); err == nil {
		t.Error("New with an empty routing key = nil error")
	}
	var _ notify.Sender = (*pagerduty.Sender)(nil)
}

// TestAtRestLocations: a finding about a certificate held at rest lists
// its places in custom_details, as many as endpoints are, with how many
// more there are.
func TestAtRestLocations(t *testing.T) {
	pd := pagerdutytest.New(t, routingKey)
	s := newSender(t, pd.URL())
	f := policy.Finding{Kind: policy.Expiring, Tier: policy.Page, Certificate: strings.Repeat("cd", 32), Subject: "client.internal.example",
		Deadline: policy.At(now.AddDate(0, 0, 4)), Endpoints: []policy.Endpoint{}, Message: "certificate held at rest expires in 4 days", Records: &policy.Records{}}
	for i := range 52 {
		f.Records.Locations = append(f.Records.Locations, atrest.Location{Kind: atrest.Secret, Where: fmt.Sprintf("ns-%02d/client", i), Key: "tls.crt"})
	}
	if _, err := s.Send(context.Background(), notify.Notification{Event: notify.EventNew, Channel: "oncall", At: now, Key: f.ID(), Finding: f, Since: now}); err != nil {
		t.Fatal(err)
	}
	d := pd.Events()[0].Payload.CustomDetails
	locs, _ := d["locations"].([]any)
	if len(locs) != 50 || locs[0] != "secret ns-00/client tls.crt" || d["locations_not_listed"] != float64(2) || d["blast_radius"] != float64(0) {
		t.Errorf("custom_details locations = %v (%d) / %v, blast radius %v; want 50 listed from secret ns-00/client tls.crt, 2 not listed, 0 endpoints",
			locs[:min(2, len(locs))], len(locs), d["locations_not_listed"], d["blast_radius"])
	}
}

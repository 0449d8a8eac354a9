package slack_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/certwatch/certwatch/discovery/atrest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/notify/slack"
	"github.com/certwatch/certwatch/policy"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

const token = "xoxb-111-222-NOTAREALTOKENxyz"

var now = time.Date(2030, 3, 1, 9, 0, 0, 0, time.UTC)

func newSender(t *testing.T, api *slacktest.Server) *slack.Sender {
	t.Helper()
	c := slack.Config{Name: "certs", Channel: "#certs", Token: token, APIURL: api.URL()}
	s, err := slack.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.RunbookURL = "https://wiki.example/runbooks/certificates"
	return s
}

func wildcard(tier policy.Tier, endpoints int) policy.Finding {
	var eps []policy.Endpoint
	for i := range endpoints {
		eps = append(eps, policy.Endpoint{Name: fmt.Sprintf("svc%03d.internal.example", i), Port: 443, Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)})
	}
	return policy.Finding{
		Kind: policy.Expiring, Tier: tier, Certificate: strings.Repeat("5e", 32), Subject: "*.internal.example",
		Deadline:  policy.At(now.AddDate(0, 0, 12)),
		Endpoints: eps,
		Message:   "The wildcard certificate for *.internal.example expires on 2030-03-13. Renew it with the internal CA and deploy it to every endpoint below; restart services that cache it.",
	}
}

// golden compares got with testdata/name.golden, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from %s (run go test -update if the change is intended):\n%s", name, path, got)
	}
}

func indent(t *testing.T, raw string) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("blocks are not JSON: %v\n%s", err, raw)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// TestRendering posts each kind of message to the fake API and compares the
// blocks Slack received with golden files.
func TestRendering(t *testing.T) {
	f := wildcard(policy.Warning, 412)
	failing := policy.Finding{Kind: policy.ChannelFailing, Tier: policy.Warning, Name: "oncall", Subject: "notification channel oncall",
		Message: "certwatch cannot deliver to channel oncall: it refused a notification: pagerduty oncall trigger: http 400. Nothing is lost."}
	item := func(ev notify.Event, f policy.Finding) notify.Notification {
		return notify.Notification{Event: ev, At: now, Key: f.ID(), Finding: f, Reason: "certificate replaced on a.example:443 by a.example (0123456789ab), valid until 2031-03-01"}
	}
	notice := func(name string, days int) policy.Finding {
		return policy.Finding{Kind: policy.Expiring, Tier: policy.Notice, Certificate: strings.Repeat(name[:1], 64), Subject: name, Deadline: policy.At(now.AddDate(0, 0, days)),
			Endpoints: []policy.Endpoint{{Name: name, Port: 443, Address: "10.1.0.1"}}}
	}
	acmFinding := policy.Finding{
		Kind: policy.RenewalFailed, Tier: policy.Page, Certificate: strings.Repeat("ac", 32), Subject: "shop.example.com",
		Deadline: policy.At(now.AddDate(0, 0, 5)), Endpoints: []policy.Endpoint{{Name: "shop.example.com", Port: 443, Address: "203.0.113.7"}},
		Message: "ACM renewal is PENDING_VALIDATION: the DNS validation record _x1.shop.example.com is missing; add it to the public zone.",
		Records: &policy.Records{ACM: []policy.ACMRef{{
			ARN: "arn:aws:acm:eu-west-1:123456789012:certificate/0f0e", Region: "eu-west-1", Account: "123456789012",
			Type: "AMAZON_ISSUED", RenewalStatus: "PENDING_VALIDATION", RenewalEligibility: "ELIGIBLE", Renewal: policy.RenewalStateFailed,
			InUseBy: []string{"arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/app/shop/1", "arn:aws:cloudfront::123456789012:distribution/E1", "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/app/shop/2", "arn:aws:apigateway:eu-west-1::/domainnames/shop"},
		}}},
	}
	mismatch := policy.Finding{Kind: policy.HostnameMismatch, Tier: policy.Page, Certificate: strings.Repeat("0d", 32), Subject: "old.example.com",
		Deadline: policy.At(now), Endpoints: []policy.Endpoint{{Name: "new.example.com", Port: 443, Address: "10.9.0.1"}},
		Message: `certificate "old.example.com" is valid for old.example.com, not for new.example.com; reissue it with new.example.com among its names or point the record elsewhere`}
	stale := policy.Finding{Kind: policy.StaleDeployment, Tier: policy.Page, Certificate: strings.Repeat("5e", 32), Subject: "api.example.com",
		Deadline: policy.At(now.AddDate(0, 0, 3)), Endpoints: []policy.Endpoint{{Name: "api.example.com", Port: 443, Address: "10.0.0.7"}},
		Records: &policy.Records{Locations: []atrest.Location{{Kind: atrest.File, Where: "/etc/ssl/old/api.pem"}, {Kind: atrest.Secret, Where: "payments/api-tls-old", Key: "tls.crt"}}},
		Message: "renewed in file /etc/ssl/api.pem on 2030-02-26 (serial 1f, not after 2030-11-20); api.example.com:443 (10.0.0.7) still serves the old one (serial 0e), which expires in 3 days (2030-03-04): reload or restart what serves it so that it reads the renewed certificate"}
	tests := []struct {
		name string
		n    notify.Notification
	}{
		{"new_stale_at_rest", notify.Notification{Event: notify.EventNew, Channel: "certs", At: now, Key: stale.ID(), Finding: stale, Since: now}},
		{"new_acm_renewal_failed", notify.Notification{Event: notify.EventNew, Channel: "certs", At: now, Key: acmFinding.ID(), Finding: acmFinding, Since: now}},
		{"new_hostname_mismatch", notify.Notification{Event: notify.EventNew, Channel: "certs", At: now, Key: mismatch.ID(), Finding: mismatch, Since: now}},
		{"new_warning", notify.Notification{Event: notify.EventNew, Channel: "certs", At: now, Key: f.ID(), Finding: f, Since: now, Issuer: "Example Internal Issuing CA 2"}},
		{"new_channel_failing", notify.Notification{Event: notify.EventNew, Channel: "certs", At: now, Key: failing.ID(), Finding: failing, Since: now.Add(-20 * time.Minute)}},
		{"digest", notify.Notification{Event: notify.EventDigest, Channel: "certs", At: now, Key: "digest:certs", Total: 3, Items: []notify.Notification{
			item(notify.EventNew, notice("a.example", 29)), item(notify.EventReminder, notice("b.example", 21)), item(notify.EventResolved, notice("c.example", 25)),
		}}},
		{"summary", notify.Notification{Event: notify.EventSummary, Channel: "certs", At: now, Key: "summary:2030-03-01T09:00:00Z", Total: 500,
			Reason: "500 new findings in one run (more than 20)", Items: []notify.Notification{
				item(notify.EventNew, wildcard(policy.Critical, 3)), item(notify.EventNew, notice("b.example", 1)),
			}}},
		{"test", notify.Notification{Event: notify.EventTest, Channel: "certs", At: now, Key: "test:certs", Reason: "certwatch test message: if you can read this, channel certs works."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := slacktest.New(t, token, "#certs")
			ref, err := newSender(t, api).Send(context.Background(), tt.n)
			if err != nil {
				t.Fatal(err)
			}
			msgs := api.Messages("#certs")
			if len(msgs) != 1 {
				t.Fatalf("channel has %d messages, want 1", len(msgs))
			}
			if want := api.ChannelID("#certs") + ":" + msgs[0].TS; ref != want {
				t.Errorf("ref = %q, want %q", ref, want)
			}
			if msgs[0].Text != notify.Headline(tt.n) {
				t.Errorf("fallback text = %q, want the headline %q", msgs[0].Text, notify.Headline(tt.n))
			}
			golden(t, tt.name, indent(t, msgs[0].Blocks))
		})
	}
}

// TestThreadUpdates walks one finding through escalation, reminder and
// resolution: one top-level message whose header follows the tier, and the
// updates in its thread.
func TestThreadUpdates(t *testing.T) {
	ctx := context.Background()
	api := slacktest.New(t, token, "#certs")
	s := newSender(t, api)
	f := wildcard(policy.Warning, 3)
	ref, err := s.Send(ctx, notify.Notification{Event: notify.EventNew, Channel: "certs", At: now, Key: f.ID(), Finding: f, Since: now})
	if err != nil {
		t.Fatal(err)
	}
	f.Tier = policy.Page
	later := now.AddDate(0, 0, 6)
	steps := []notify.Notification{
		{Event: notify.EventEscalated, Previous: policy.Warning},
		{Event: notify.EventReminder},
		{Event: notify.EventResolved, Reason: "certificate replaced on svc000.internal.example:443 (10.0.0.1) by *.internal.example (77aa00000000), valid until 2031-03-01"},
	}
	for _, n := range steps {
		n.Channel, n.At, n.Key, n.Finding, n.Since, n.Ref = "certs", later, f.ID(), f, now, ref
		got, err := s.Send(ctx, n)
		if err != nil {
			t.Fatalf("Send(%s): %v", n.Event, err)
		}
		if got != ref {
			t.Errorf("Send(%s) ref = %q, want the original %q", n.Event, got, ref)
		}
	}
	_, ts, _ := strings.Cut(ref, ":")
	top := api.TopLevel("#certs")
	if len(top) != 3 || top[0].TS != ts || !top[1].Broadcast || !top[2].Broadcast {
		t.Fatalf("top-level messages = %d, want the original plus the broadcast escalation and reminder", len(top))
	}
	if top[0].Edits != 3 || !strings.HasPrefix(top[0].Text, "RESOLVED: *.internal.example (was page)") {
		t.Errorf("original edited %d times, text %q, want 3 edits ending resolved", top[0].Edits, top[0].Text)
	}
	golden(t, "resolved_original", indent(t, top[0].Blocks))
	thread := api.Thread("#certs", ts)
	var texts []string
	for _, m := range thread {
		texts = append(texts, m.Text)
	}
	want := []string{
		"PAGE (was warning): *.internal.example: certificate expires in 6 days",
		"Reminder, page: *.internal.example: certificate expires in 6 days",
		"RESOLVED: *.internal.example (was page): certificate replaced on svc000.internal.example:443 (10.0.0.1) by *.internal.example (77aa00000000), valid until 2031-03-01",
	}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("thread = %q, want %q", texts, want)
	}
	golden(t, "escalated_reply", indent(t, thread[0].Blocks))
}

func TestUpdateOfDeletedOriginalPostsAnew(t *testing.T) {
	api := slacktest.New(t, token, "#certs")
	f := wildcard(policy.Page, 1)
	stale := api.ChannelID("#certs") + ":1600000000.000001"
	ref, err := newSender(t, api).Send(context.Background(), notify.Notification{Event: notify.EventEscalated, Previous: policy.Warning, At: now, Key: f.ID(), Finding: f, Ref: stale})
	if err != nil {
		t.Fatal(err)
	}
	top := api.TopLevel("#certs")
	if len(top) != 1 || ref == stale || ref != api.ChannelID("#certs")+":"+top[0].TS {
		t.Errorf("after a lost original: ref %q, %d top-level messages, want one new message and its ref", ref, len(top))
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
		script  slacktest.Response
		class   string // retry, refused (this message) or down (the channel)
		retryIn time.Duration
		mention string
	}{
		{"rate limited", slacktest.Response{Status: 429, RetryAfter: "3"}, "retry", 3 * time.Second, "rate limited"},
		{"server error", slacktest.Response{Status: 500}, "retry", 0, "http 500"},
		{"bad gateway", slacktest.Response{Status: 502}, "retry", 0, "http 502"},
		{"ratelimited body", slacktest.Response{Error: "ratelimited"}, "retry", 0, "ratelimited"},
		{"bad request", slacktest.Response{Status: 400}, "refused", 0, "http 400"},
		{"invalid blocks", slacktest.Response{Error: "invalid_blocks"}, "refused", 0, "layout"},
		{"message too long", slacktest.Response{Error: "msg_too_long"}, "refused", 0, "too long"},
		{"not in channel", slacktest.Response{Error: "not_in_channel"}, "down", 0, "invite the bot"},
		{"invalid auth", slacktest.Response{Error: "invalid_auth"}, "down", 0, "check the bot token"},
		{"not authed", slacktest.Response{Error: "not_authed"}, "down", 0, "check the bot token"},
		{"account inactive", slacktest.Response{Error: "account_inactive"}, "down", 0, "deactivated"},
		{"token revoked", slacktest.Response{Error: "token_revoked"}, "down", 0, "install the app again"},
		{"channel not found", slacktest.Response{Error: "channel_not_found"}, "down", 0, "check the channel name"},
		{"archived", slacktest.Response{Error: "is_archived"}, "down", 0, "unarchive"},
		{"missing scope", slacktest.Response{Error: "missing_scope"}, "down", 0, "chat:write"},
		{"http unauthorized", slacktest.Response{Status: 401}, "down", 0, "check the bot token"},
		{"http forbidden", slacktest.Response{Status: 403}, "down", 0, "check the bot token"},
		{"http not found", slacktest.Response{Status: 404}, "down", 0, "api_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := slacktest.New(t, token, "#certs")
			api.Script(tt.script)
			f := wildcard(policy.Warning, 1)
			_, err := newSender(t, api).Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
			if err == nil {
				t.Fatal("Send = nil, want an error")
			}
			if got := errClass(err); got != tt.class {
				t.Errorf("Send = %v, treated as %s, want %s", err, got, tt.class)
			}
			if d, ok := notify.RetryDelay(err); tt.retryIn > 0 && (!ok || d != tt.retryIn) {
				t.Errorf("RetryDelay(%v) = %v, %v, want %v", err, d, ok, tt.retryIn)
			}
			if !strings.Contains(err.Error(), tt.mention) || !strings.Contains(err.Error(), "slack certs chat.postMessage #certs") {
				t.Errorf("error %q should name the call and mention %q", err, tt.mention)
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("error %q contains the token", err)
			}
		})
	}
}

func TestWrongTokenAndChannel(t *testing.T) {
	api := slacktest.New(t, "xoxb-the-right-one", "#other")
	f := wildcard(policy.Warning, 1)
	_, err := newSender(t, api).Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
	if !notify.IsChannelDown(err) || !strings.Contains(err.Error(), "invalid_auth") || strings.Contains(err.Error(), token) {
		t.Errorf("Send with a wrong token = %v, want a channel-down invalid_auth error without the token", err)
	}
	api = slacktest.New(t, token, "#other")
	_, err = newSender(t, api).Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
	if !notify.IsChannelDown(err) || !strings.Contains(err.Error(), "channel_not_found") {
		t.Errorf("Send to a missing channel = %v, want a channel-down channel_not_found error", err)
	}
}

func TestUnreachable(t *testing.T) {
	api := slacktest.New(t, token, "#certs")
	s := newSender(t, api)
	url := api.URL()
	api.Close()
	f := wildcard(policy.Warning, 1)
	_, err := s.Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f})
	if err == nil || notify.IsPermanent(err) {
		t.Fatalf("Send to a closed port = %v, want a retryable error", err)
	}
	if strings.Contains(err.Error(), url) {
		t.Errorf("error %q contains the URL", err)
	}
}

var _ notify.Sender = (*slack.Sender)(nil)

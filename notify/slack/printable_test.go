package slack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/slacktest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
)

// TestControlCharactersEscaped sends a finding whose subject, name and
// message carry a right-to-left override and terminal escapes (as a
// finding kept in state, or quoting a certificate, may): Slack receives
// them as visible escapes, in the fallback text and in every block.
func TestControlCharactersEscaped(t *testing.T) {
	bidi := "pay\u202etxt.exe\x1b[2J.example"
	f := policy.Finding{Kind: policy.HostnameMismatch, Tier: policy.Page, Certificate: strings.Repeat("0e", 32), Subject: bidi,
		Name: bidi + ":443", Deadline: policy.At(now), Endpoints: []policy.Endpoint{{Name: bidi, Port: 443, Address: "10.9.0.1"}},
		Message: "certificate " + bidi + " is not valid\u2066 here\u2069"}
	api := slacktest.New(t, token, "#certs")
	if _, err := newSender(t, api).Send(context.Background(), notify.Notification{Event: notify.EventNew, Channel: "certs", At: now, Key: f.ID(), Finding: f, Since: now}); err != nil {
		t.Fatal(err)
	}
	msgs := api.Messages("#certs")
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	var v any
	if err := json.Unmarshal([]byte(msgs[0].Blocks), &v); err != nil {
		t.Fatal(err)
	}
	blocks := strings.Join(texts(v), "\n") // as Slack reads them
	for what, s := range map[string]string{"text": msgs[0].Text, "blocks": blocks} {
		if strings.ContainsAny(s, "\u202e\u2066\u2069\x1b") {
			t.Errorf("%s carries raw control or format characters: %q", what, s)
		}
		if !strings.Contains(s, `pay\u202etxt.exe\x1b[2J.example`) {
			t.Errorf("%s does not show the subject with visible escapes: %q", what, s)
		}
	}
}

// texts returns every string in a decoded JSON value.
func texts(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, texts(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range v {
			out = append(out, texts(e)...)
		}
		return out
	}
	return nil
}

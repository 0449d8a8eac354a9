package pagerduty_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/internal/pagerdutytest"
	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
)

// TestControlCharactersEscaped: the incident PagerDuty receives shows a
// right-to-left override and terminal escapes in a finding's subject,
// name and message as visible escapes.
func TestControlCharactersEscaped(t *testing.T) {
	pd := pagerdutytest.New(t, routingKey)
	s := newSender(t, pd.URL())
	bidi := "pay\u202etxt.exe\x1b]0;x\x07.example"
	f := policy.Finding{Kind: policy.HostnameMismatch, Tier: policy.Page, Certificate: strings.Repeat("cd", 32), Subject: bidi, Name: bidi + ":443",
		Deadline: policy.At(now), Message: "certificate " + bidi + " is not valid"}
	if _, err := s.Send(context.Background(), notify.Notification{Event: notify.EventNew, At: now, Key: f.ID(), Finding: f, Issuer: "CA\u202e"}); err != nil {
		t.Fatal(err)
	}
	p := pd.Events()[0].Payload
	got := fmt.Sprint(p.Summary, p.Component, p.CustomDetails)
	if strings.ContainsAny(got, "\u202e\x1b\x07") {
		t.Errorf("the incident carries raw control or format characters: %q", got)
	}
	for _, s := range []string{p.Summary, p.Component, p.CustomDetails["subject"].(string), p.CustomDetails["message"].(string), p.CustomDetails["name"].(string)} {
		if !strings.Contains(s, `pay\u202etxt.exe\x1b]0;x\x07.example`) {
			t.Errorf("%q does not show the subject with visible escapes", s)
		}
	}
	if p.CustomDetails["issuer"] != `CA\u202e` {
		t.Errorf("issuer = %q, want CA\\u202e", p.CustomDetails["issuer"])
	}
}

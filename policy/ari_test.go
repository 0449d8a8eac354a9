package policy_test

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// TestRenewalSuggested: a leaf whose CA suggests renewing it is
// renewal_suggested from the window's start, notice then warning as its
// end nears and page once it has passed; a window the CA moved before half
// the lifetime is said to be early; none before the window, none without
// one, none when the CA could not be asked.
func TestRenewalSuggested(t *testing.T) {
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	// A 90-day leaf, 60 days in.
	l := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"www.example"}, NotBefore: now.Add(-60 * day), NotAfter: now.Add(30 * day)})
	const dir = "https://acme.example/directory"
	cases := []struct {
		name   string
		info   *probes.RenewalInfo
		tier   policy.Tier // None: no finding
		phrase []string
	}{
		{"window ahead", &probes.RenewalInfo{Directory: dir, Start: now.Add(day), End: now.Add(3 * day)}, policy.None, nil},
		{"window opened", &probes.RenewalInfo{Directory: dir, Start: now.Add(-day), End: now.Add(3 * day)}, policy.Notice,
			[]string{"suggests renewing it between 2030-05-31 and 2030-06-04", "the endpoint still serves it"}},
		{"second half", &probes.RenewalInfo{Directory: dir, Start: now.Add(-3 * day), End: now.Add(day)}, policy.Warning, nil},
		{"window ended", &probes.RenewalInfo{Directory: dir, Start: now.Add(-5 * day), End: now.Add(-2 * day)}, policy.Page,
			[]string{"the window ended 2 days ago"}},
		{"moved early, with an explanation", &probes.RenewalInfo{Directory: dir, Start: now.Add(-50 * day), End: now.Add(-49 * day), ExplanationURL: "https://acme.example/incident"},
			policy.Page, []string{"earlier than its usual schedule", "may be about to revoke", "explains why at https://acme.example/incident"}},
		{"no window", nil, policy.None, nil},
		{"CA could not be asked", &probes.RenewalInfo{Directory: dir, Error: "http status 500"}, policy.None, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := observe("www.example", "10.0.0.1", []*x509.Certificate{l.Cert}, root.Pool(), now)
			o.Renewal = c.info
			var got *policy.Finding
			r := policy.Evaluate([]probes.Observation{o}, policy.DefaultRules(), now)
			for i := range r.Findings {
				if r.Findings[i].Kind == policy.RenewalSuggested {
					got = &r.Findings[i]
				}
			}
			if c.tier == policy.None {
				if got != nil {
					t.Fatalf("unexpected renewal_suggested: %s", got.Message)
				}
				return
			}
			if got == nil {
				t.Fatal("no renewal_suggested finding")
			}
			if got.Tier != c.tier || !got.Deadline.Equal(c.info.End) {
				t.Errorf("tier %v, deadline %v; want %v, %v", got.Tier, got.Deadline, c.tier, c.info.End)
			}
			if len(r.Endpoints) != 1 || r.Endpoints[0].Renewal != c.info {
				t.Errorf("report endpoint's renewal = %+v, want the observation's", r.Endpoints[0].Renewal)
			}
			for _, p := range c.phrase {
				if !strings.Contains(got.Message, p) {
					t.Errorf("message %q lacks %q", got.Message, p)
				}
			}
		})
	}
}

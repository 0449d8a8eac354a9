package notify

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/certwatch/certwatch/policy"
)

func TestRouterTargets(t *testing.T) {
	r, err := newRouter([]Route{
		{Tiers: []policy.Tier{policy.Notice}, Channels: []string{"certs"}, Digest: true},
		{Tiers: []policy.Tier{policy.Warning}, Channels: []string{"certs"}},
		{Tiers: []policy.Tier{policy.Page, policy.Critical}, Channels: []string{"oncall"}},
		{Tiers: []policy.Tier{policy.Critical}, Channels: []string{"incidents"}},
		{Tiers: []policy.Tier{policy.Notice, policy.Warning}, Channels: []string{"team-a"}, Zones: []string{"a.example"}},
		{Tiers: []policy.Tier{policy.Notice}, Channels: []string{"payments"}, Names: []string{"*.pay.*"}},
		{Tiers: []policy.Tier{policy.Notice}, Channels: []string{"payments"}, Digest: true, Names: []string{"checkout.*"}},
		{Tiers: []policy.Tier{policy.Page}, Channels: []string{"db-oncall"}, Labels: map[string]string{"team": "db"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	at := func(name string) policy.Finding {
		return policy.Finding{Kind: policy.Expiring, Subject: name, Endpoints: []policy.Endpoint{{Name: name, Port: 443}}}
	}
	tests := []struct {
		name   string
		f      policy.Finding
		tier   policy.Tier
		labels map[string]string
		want   map[string]bool
	}{
		{"notice goes to the digest", at("x.example"), policy.Notice, nil, map[string]bool{"certs": true}},
		{"warning at once", at("x.example"), policy.Warning, nil, map[string]bool{"certs": false}},
		{"critical to two channels", at("x.example"), policy.Critical, nil, map[string]bool{"oncall": false, "incidents": false}},
		{"zone override replaces the default", at("api.a.example"), policy.Warning, nil, map[string]bool{"team-a": false}},
		{"zone apex matches", at("a.example"), policy.Notice, nil, map[string]bool{"team-a": false}},
		{"zone suffix is not a zone", at("xa.example"), policy.Warning, nil, map[string]bool{"certs": false}},
		{"override only for its tiers", at("api.a.example"), policy.Page, nil, map[string]bool{"oncall": false}},
		{"name pattern across dots", at("www.pay.eu.example"), policy.Notice, nil, map[string]bool{"payments": false}},
		{"immediate wins over digest", policy.Finding{Subject: "checkout.pay.example", Endpoints: []policy.Endpoint{{Name: "checkout.pay.example"}}}, policy.Notice, nil, map[string]bool{"payments": false}},
		{"name finding by host", policy.Finding{Kind: policy.Unreachable, Name: "db.pay.example:5432"}, policy.Notice, nil, map[string]bool{"payments": false}},
		{"label match", at("x.example"), policy.Page, map[string]string{"team": "db", "env": "prod"}, map[string]bool{"db-oncall": false}},
		{"label mismatch", at("x.example"), policy.Page, map[string]string{"team": "web"}, map[string]bool{"oncall": false}},
		{"no route", at("x.example"), policy.Info, nil, map[string]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.targets(tt.f, tt.tier, tt.labels)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRouterRoute: where a finding goes (route) is targets' answer, with
// its channels sorted, at every tier: kept once per tier when no route
// selects findings (and labels are then not asked for), worked out for
// each finding when one does.
func TestRouterRoute(t *testing.T) {
	general := []Route{
		{Tiers: []policy.Tier{policy.Notice}, Channels: []string{"certs"}, Digest: true},
		{Tiers: []policy.Tier{policy.Warning, policy.Page}, Channels: []string{"certs", "a-team"}},
		{Tiers: []policy.Tier{policy.Critical}, Channels: []string{"oncall", "incidents"}},
	}
	specific := append(slices.Clone(general), Route{Tiers: []policy.Tier{policy.Page}, Channels: []string{"db-oncall"}, Labels: map[string]string{"team": "db"}})
	f := policy.Finding{Kind: policy.Expiring, Subject: "x.example", Endpoints: []policy.Endpoint{{Name: "x.example", Port: 443}}}
	for name, routes := range map[string][]Route{"general": general, "specific": specific} {
		r, err := newRouter(routes)
		if err != nil {
			t.Fatal(err)
		}
		asked := 0
		labels := func(policy.Finding) map[string]string { asked++; return map[string]string{"team": "db"} }
		for tier := policy.None; tier <= policy.Critical; tier++ {
			f.Tier = tier
			got := r.route(f, labels)
			want := r.targets(f, tier, map[string]string{"team": "db"})
			if diff := cmp.Diff(want, got.targets, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s, tier %v: route's channels (-targets +route):\n%s", name, tier, diff)
			}
			if !slices.Equal(got.channels, slices.Sorted(maps.Keys(want))) {
				t.Errorf("%s, tier %v: route's channels in order %q, want %q", name, tier, got.channels, slices.Sorted(maps.Keys(want)))
			}
		}
		if (asked > 0) != (name == "specific") {
			t.Errorf("%s: labels asked for %d times", name, asked)
		}
	}
}

func TestBackoff(t *testing.T) {
	n := &Notifier{cfg: Config{Retry: Retry{Initial: 2e9, Max: 60e9}}}
	n.Rand = func() float64 { return 1 }
	var got []float64
	for attempt := 1; attempt <= 7; attempt++ {
		got = append(got, n.backoff(attempt, nil).Seconds())
	}
	if diff := cmp.Diff([]float64{2, 4, 8, 16, 32, 60, 60}, got); diff != "" {
		t.Errorf("backoff ceilings (-want +got):\n%s", diff)
	}
	n.Rand = func() float64 { return 0 }
	if d := n.backoff(3, RetryAfter(7e9, nil)); d != 7e9 {
		t.Errorf("backoff with Retry-After 7s and no jitter = %v, want 7s", d)
	}
	if d := n.backoff(3, RetryAfter(5*3600e9, nil)); d != maxRetryAfter {
		t.Errorf("backoff with Retry-After 5h = %v, want the cap %v", d, maxRetryAfter)
	}
}

package policy_test

import (
	"testing"
	"time"

	"github.com/certwatch/certwatch/policy"
)

func TestTierFor(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	def := policy.DefaultRules().Tiers
	withFraction := []policy.TierRule{
		{Tier: policy.Notice, Within: 30 * 24 * time.Hour},
		{Tier: policy.Warning, Within: 14 * 24 * time.Hour, LifetimeFraction: 1.0 / 3},
		{Tier: policy.Critical, Within: 2 * 24 * time.Hour},
	}
	tests := []struct {
		name     string
		rules    []policy.TierRule
		lifetime time.Duration
		left     time.Duration
		want     policy.Tier
	}{
		{"healthy", def, 365 * day, 60 * day, policy.None},
		{"just outside notice", def, 365 * day, 30*day + time.Minute, policy.None},
		{"at notice boundary", def, 365 * day, 30 * day, policy.Notice},
		{"inside warning window", def, 365 * day, 10 * day, policy.Warning},
		{"inside page window", def, 365 * day, 5 * day, policy.Page},
		{"inside critical window", def, 365 * day, 36 * time.Hour, policy.Critical},
		{"expired", def, 365 * day, -time.Minute, policy.Critical},
		{"expired exactly now", def, 365 * day, 0, policy.Critical},
		// A 36-day certificate renewed at 2/3 of its life has 12 days left at
		// renewal time: with both limits the warning waits until 1/3 is left.
		{"short-lived, days hit but fraction not", withFraction, 36 * day, 14 * day, policy.Notice},
		{"short-lived, both hit", withFraction, 36 * day, 10 * day, policy.Warning},
		{"long-lived, fraction hit but days not", withFraction, 365 * day, 20 * day, policy.Notice},
		{"no rules", nil, 365 * day, 10 * day, policy.None},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notAfter := now.Add(tt.left)
			notBefore := notAfter.Add(-tt.lifetime)
			if got := policy.TierFor(notBefore, notAfter, tt.rules, now); got != tt.want {
				t.Errorf("TierFor(left=%v, lifetime=%v) = %v, want %v", tt.left, tt.lifetime, got, tt.want)
			}
		})
	}
}

const day = 24 * time.Hour

func TestParseTier(t *testing.T) {
	for _, s := range []string{"notice", "WARNING", "page", "critical", "info", "none"} {
		tier, err := policy.ParseTier(s)
		if err != nil {
			t.Errorf("ParseTier(%q): %v", s, err)
			continue
		}
		if back, _ := policy.ParseTier(tier.String()); back != tier {
			t.Errorf("round trip of %q gave %v", s, back)
		}
	}
	if _, err := policy.ParseTier("urgent"); err == nil {
		t.Error("ParseTier(urgent) = nil error")
	}
}

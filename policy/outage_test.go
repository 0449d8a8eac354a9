package policy_test

import (
	"testing"

	"github.com/certwatch/certwatch/policy"
)

func TestUnanswered(t *testing.T) {
	for _, f := range []string{"resolve", "no_route", "timeout", "reset", "not_probed"} {
		if !policy.Unanswered(f) {
			t.Errorf("Unanswered(%q) = false, want true", f)
		}
	}
	for _, f := range []string{"refused", "not_tls", "tls_alert", "handshake", "no_starttls", ""} {
		if policy.Unanswered(f) {
			t.Errorf("Unanswered(%q) = true, want false: the server answered", f)
		}
	}
}

func TestFailureShareExceeded(t *testing.T) {
	tests := []struct {
		name                      string
		failed, unanswered, total int
		share                     float64
		want                      bool
	}{
		{"every one of a small run: too small to tell", 9, 9, 9, 0.5, false},
		{"just above the share", 6, 6, 10, 0.5, true},
		{"at the share", 5, 5, 10, 0.5, false},
		{"refused ports are answers", 9, 0, 10, 0.5, false},
		{"just above the share, some refused", 9, 6, 10, 0.5, true},
		{"every one failed, all refused", 10, 0, 10, 0.5, true},
		{"every one failed, whatever the share", 10, 10, 10, 1, true},
		{"share 1 otherwise never", 9, 9, 10, 1, false},
		{"large run, small share", 101, 101, 1000, 0.1, true},
		{"no endpoints", 0, 0, 0, 0.5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.FailureShareExceeded(tt.failed, tt.unanswered, tt.total, tt.share); got != tt.want {
				t.Errorf("FailureShareExceeded(%d, %d, %d, %g) = %v, want %v", tt.failed, tt.unanswered, tt.total, tt.share, got, tt.want)
			}
		})
	}
}

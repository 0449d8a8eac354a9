package policy_test

import (
	"testing"

	"github.com/certwatch/certwatch/policy"
)

func TestFailureShareExceeded(t *testing.T) {
	tests := []struct {
		name          string
		failed, total int
		share         float64
		want          bool
	}{
		{"every one of a small run: too small to tell", 9, 9, 0.5, false},
		{"just above the share", 6, 10, 0.5, true},
		{"at the share", 5, 10, 0.5, false},
		{"share 1 never", 10, 10, 1, false},
		{"large run, small share", 101, 1000, 0.1, true},
		{"no endpoints", 0, 0, 0.5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.FailureShareExceeded(tt.failed, tt.total, tt.share); got != tt.want {
				t.Errorf("FailureShareExceeded(%d, %d, %g) = %v, want %v", tt.failed, tt.total, tt.share, got, tt.want)
			}
		})
	}
}

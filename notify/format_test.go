package notify_test

import (
	"testing"
	"time"

	"github.com/certwatch/certwatch/notify"
	"github.com/certwatch/certwatch/policy"
)

func TestHasDeadlineAndProblem(t *testing.T) {
	t.Parallel()
	at := t0
	tests := []struct {
		name    string
		f       policy.Finding
		want    bool
		problem string
	}{
		{"expiring", policy.Finding{Kind: policy.Expiring, Deadline: at.Add(12 * day)}, true, "certificate expires in 12 days"},
		{"hostname mismatch is broken now", policy.Finding{Kind: policy.HostnameMismatch, Deadline: at}, false, "certificate does not match the host name"},
		{"tls broken is broken now", policy.Finding{Kind: policy.TLSBroken, Deadline: at}, false, "TLS handshake fails"},
		{"revoked is broken now", policy.Finding{Kind: policy.Revoked, Deadline: at}, false, "certificate revoked"},
		{"weak signature", policy.Finding{Kind: policy.WeakSignature, Deadline: at}, false, "certificate signed with SHA-1 or MD5"},
		// Beyond the ±292 years a time.Duration holds, days stay exact.
		{"expired in 1700", policy.Finding{Kind: policy.Expired, Deadline: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)}, true, "certificate expired 120530 days ago"},
		{"channel failing", policy.Finding{Kind: notify.KindChannelFailing, Deadline: at}, false, "notifications cannot be delivered"},
		// The daemon's discovery_degraded finding carries the time it was
		// first raised as its deadline; that is no date to act by.
		{"discovery degraded", policy.Finding{Kind: "discovery_degraded", Name: "zone internal.example", Deadline: at.Add(-3 * day)}, false, "discovery source failed or shrank"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := notify.HasDeadline(tt.f); got != tt.want {
				t.Errorf("HasDeadline(%s) = %v, want %v", tt.f.Kind, got, tt.want)
			}
			if got := notify.Problem(tt.f, at); got != tt.problem {
				t.Errorf("Problem(%s) = %q, want %q", tt.f.Kind, got, tt.problem)
			}
		})
	}
}

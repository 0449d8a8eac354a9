package notify_test

import (
	"cmp"
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
		{"expiring", policy.Finding{Kind: policy.Expiring, Deadline: policy.At(at.Add(12 * day))}, true, "certificate expires in 12 days"},
		{"hostname mismatch is broken now", policy.Finding{Kind: policy.HostnameMismatch, Deadline: policy.At(at)}, false, "certificate does not match the host name"},
		{"tls broken is broken now", policy.Finding{Kind: policy.TLSBroken, Deadline: policy.At(at)}, false, "TLS handshake fails"},
		{"revoked is broken now", policy.Finding{Kind: policy.Revoked, Deadline: policy.At(at)}, false, "certificate revoked"},
		{"weak signature", policy.Finding{Kind: policy.WeakSignature, Deadline: policy.At(at)}, false, "certificate signed with SHA-1 or MD5"},
		{"distrusted CA is broken now", policy.Finding{Kind: policy.DistrustedCA, Deadline: policy.At(at)}, false, "browsers distrust the certificate's CA"},
		// Beyond the ±292 years a time.Duration holds, days stay exact.
		{"expired in 1700", policy.Finding{Kind: policy.Expired, Deadline: policy.At(time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC))}, true, "certificate expired 120530 days ago"},
		{"channel failing", policy.Finding{Kind: policy.ChannelFailing, Deadline: policy.At(at)}, false, "notifications cannot be delivered"},
		// The daemon's discovery_degraded finding carries the time it was
		// first raised as its deadline; that is no date to act by.
		{"discovery degraded", policy.Finding{Kind: "discovery_degraded", Name: "zone internal.example", Deadline: policy.At(at.Add(-3 * day))}, false, "discovery source failed or shrank"},
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

// TestProblemOfEveryKind pins the words and the deadline of every kind, as
// the registry gives them (policy.Kind.Info), a deadline ahead and one
// past, and of a kind the registry does not list.
func TestProblemOfEveryKind(t *testing.T) {
	t.Parallel()
	at := t0
	tests := []struct {
		kind         policy.Kind
		ahead, past  string
		withDeadline bool
	}{
		{"expired", "certificate expires in 12 days", "certificate expired 3 days ago", true},
		{"expiring", "certificate expires in 12 days", "certificate expires 3 days ago", true},
		{"chain_untrusted", "certificate chain does not verify", "", false},
		{"self_signed", "self-signed certificate", "", false},
		{"hostname_mismatch", "certificate does not match the host name", "", false},
		{"inconsistent_deployment", "addresses serve different certificates", "", false},
		{"unreachable", "endpoint unreachable", "", false},
		{"tls_broken", "TLS handshake fails", "", false},
		{"bundle_expired", "server sends an expired extra certificate", "", true},
		{"revoked", "certificate revoked", "", false},
		{"revocation_stale", "revocation information out of date", "", false},
		{"revocation_unavailable", "revocation could not be checked", "", false},
		{"weak_key", "weak certificate key", "", false},
		{"weak_signature", "certificate signed with SHA-1 or MD5", "", false},
		{"long_validity", "certificate valid longer than the CA/Browser Forum allows", "", false},
		{"renewal_overdue", "ACM has not renewed the certificate, which expires in 12 days", "ACM has not renewed the certificate, which expires 3 days ago", true},
		{"renewal_failed", "ACM renewal failed; the certificate expires in 12 days", "ACM renewal failed; the certificate expires 3 days ago", true},
		{"validation_record_missing", "DNS validation record missing; the next ACM renewal will fail", "", true},
		{"stale_deployment", "an old certificate is still deployed; it expires in 12 days", "an old certificate is still deployed; it expires 3 days ago", true},
		{"discovery_failed", "discovery failed", "", true},
		{"discovery_degraded", "discovery source failed or shrank", "", false},
		{"probe_cut_short", "probe cut short", "", true},
		{"state_created", "state created", "", true},
		{"site_stale", "site stale", "", true},
		{"channel_failing", "notifications cannot be delivered", "", false},
		{"storm_summary", "many notifications at once, summarised", "", false},
		{"from_a_later_version", "from a later version", "", true},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			past := cmp.Or(tt.past, tt.ahead)
			for _, c := range []struct {
				deadline time.Time
				want     string
			}{{at.Add(12 * day), tt.ahead}, {at.Add(-3 * day), past}} {
				f := policy.Finding{Kind: tt.kind, Deadline: policy.At(c.deadline)}
				if got := notify.Problem(f, at); got != c.want {
					t.Errorf("Problem(%s, deadline %v) = %q, want %q", tt.kind, c.deadline, got, c.want)
				}
				if got := notify.HasDeadline(f); got != tt.withDeadline {
					t.Errorf("HasDeadline(%s) = %v, want %v", tt.kind, got, tt.withDeadline)
				}
			}
			if notify.HasDeadline(policy.Finding{Kind: tt.kind}) {
				t.Errorf("HasDeadline(%s) with no deadline = true", tt.kind)
			}
		})
	}
}

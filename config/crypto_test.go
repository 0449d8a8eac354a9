package config_test

import (
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
)

func TestCryptoPolicyKeys(t *testing.T) {
	c, err := config.Decode(strings.NewReader("policy:\n  weak_signature: page\n  long_validity: none\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.WeakKey != policy.Warning || c.Policy.WeakSignature != policy.Page || c.Policy.LongValidity != policy.None {
		t.Errorf("weak_key, weak_signature, long_validity = %q, %q, %q; want warning (default), page, none", c.Policy.WeakKey, c.Policy.WeakSignature, c.Policy.LongValidity)
	}
	_, err = config.Decode(strings.NewReader("policy:\n  weak_key: loud\n"))
	if err == nil || !strings.Contains(err.Error(), "policy: weak_key") || !strings.Contains(err.Error(), `unknown tier "loud"`) {
		t.Errorf("weak_key: loud: error %v, want one naming policy: weak_key and the tier", err)
	}
}

func TestRevocationKeys(t *testing.T) {
	c, err := config.Decode(strings.NewReader("revocation:\n  stale: warning\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Revocation
	if !r.Enabled || r.Stale != policy.Warning || r.Revoked != policy.Critical || r.RevokedIntermediate != policy.Page || r.Unavailable != policy.Info {
		t.Errorf("revocation = %+v; want enabled, stale warning, defaults kept", r)
	}
	if c, err := config.Decode(strings.NewReader("revocation:\n  enabled: false\n")); err != nil || c.Revocation.Enabled {
		t.Errorf("enabled: false: %+v, %v", c.Revocation, err)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"revocation:\n  unavailable: page\n", "revocation: unavailable: at most info, got page"},
		{"revocation:\n  stale: critical\n", "revocation: stale: at most warning"},
		{"revocation:\n  timeout: 0s\n", "revocation: timeout must be positive"},
		{"revocation:\n  revoked: loud\n", `revocation: revoked: unknown tier "loud"`},
	} {
		if _, err := config.Decode(strings.NewReader(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.yaml, err, tt.want)
		}
	}
}

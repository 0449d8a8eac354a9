package config_test

import (
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
)

func TestCryptoPolicyKeys(t *testing.T) {
	c, err := config.Decode(strings.NewReader("policy:\n  weak_signature: page\n  long_validity: none\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.WeakKey != "warning" || c.Policy.WeakSignature != "page" || c.Policy.LongValidity != "none" {
		t.Errorf("weak_key, weak_signature, long_validity = %q, %q, %q; want warning (default), page, none", c.Policy.WeakKey, c.Policy.WeakSignature, c.Policy.LongValidity)
	}
	_, err = config.Decode(strings.NewReader("policy:\n  weak_key: loud\n"))
	if err == nil || !strings.Contains(err.Error(), "policy: weak_key") || !strings.Contains(err.Error(), `unknown tier "loud"`) {
		t.Errorf("weak_key: loud: error %v, want one naming policy: weak_key and the tier", err)
	}
}

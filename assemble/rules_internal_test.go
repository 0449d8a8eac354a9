package assemble

import (
	"testing"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
)

// TestRulesRenewalMissed: the configuration's policy.renewal_missed reaches
// the rules (page by default, none turns the check off): rules start from
// nothing, so a key left unwired would turn the check off unseen.
func TestRulesRenewalMissed(t *testing.T) {
	c := config.Default()
	r, err := rules(c.Policy)
	if err != nil || r.RenewalMissed != policy.Page {
		t.Errorf("default renewal_missed = %v, %v; want page", r.RenewalMissed, err)
	}
	c.Policy.RenewalMissed = policy.None
	if r, err := rules(c.Policy); err != nil || r.RenewalMissed != policy.None {
		t.Errorf("renewal_missed: none = %v, %v; want none", r.RenewalMissed, err)
	}
}

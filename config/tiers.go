package config

import (
	"cmp"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/policy"
)

// Tiers maps notice, warning, page and critical to when each starts.
type Tiers map[string]TierRule

// ByTier returns the rules of t by tier. Load has checked every name.
func (t Tiers) ByTier() map[policy.Tier]TierRule {
	out := make(map[policy.Tier]TierRule, len(t))
	for name, r := range t {
		if tier, err := policy.ParseTier(name); err == nil {
			out[tier] = r
		}
	}
	return out
}

// ordered returns the names of t's known tiers from least to most urgent,
// then any unknown names alphabetically.
func (t Tiers) ordered() []string {
	names := make([]string, 0, len(t))
	for name := range t {
		names = append(names, name)
	}
	rank := func(name string) int {
		if tier, err := policy.ParseTier(name); err == nil && tier >= policy.Notice {
			return int(tier)
		}
		return 1 << 20
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b)) })
	return names
}

// checkOrder reports tiers whose windows are not ordered: a more urgent
// tier starts closer to the deadline (less time left, a smaller share of
// the lifetime) than a less urgent one, or it would hide it.
func (t Tiers) checkOrder() []error {
	var errs []error
	names := t.ordered()
	for i, urgent := range names {
		for _, calmer := range names[:i] {
			u, c := t[urgent], t[calmer]
			if u.Within > 0 && c.Within > 0 && u.Within >= c.Within {
				errs = append(errs, fieldf("policy.tiers."+urgent+".within", "policy: tiers: %s: within (%v) must be shorter than %s's (%v): a more urgent tier starts closer to the deadline",
					urgent, u.Within, calmer, c.Within))
			}
			if u.LifetimeFraction > 0 && c.LifetimeFraction > 0 && u.LifetimeFraction >= c.LifetimeFraction {
				errs = append(errs, fieldf("policy.tiers."+urgent+".lifetime_fraction", "policy: tiers: %s: lifetime_fraction (%g) must be below %s's (%g): a more urgent tier starts closer to the deadline",
					urgent, u.LifetimeFraction, calmer, c.LifetimeFraction))
			}
		}
	}
	return errs
}

// MarshalYAML writes the tiers from least to most urgent (notice, warning,
// page, critical), not alphabetically.
func (t Tiers) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range t.ordered() {
		var v yaml.Node
		if err := v.Encode(t[name]); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, &v)
	}
	return n, nil
}

package assemble

import (
	"time"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/policy"
)

// Rules returns the evaluation rules of c: the tiers of its policy,
// distrust lists, renewal (ACME's and ACM's), revocation, coverage and CT
// settings.
func Rules(c config.Config) (policy.Rules, error) {
	r, err := rules(c.Policy)
	if err != nil {
		return r, err
	}
	r.RenewalSuggested = c.ACME.RenewalSuggested
	return ctRules(coverageRules(revocationRules(renewalRules(r, c.AWS), c.Revocation), c.Coverage), c), nil
}

func rules(p config.Policy) (policy.Rules, error) {
	r := policy.Rules{}
	for t, tr := range p.Tiers.ByTier() {
		r.Tiers = append(r.Tiers, policy.TierRule{Tier: t, Within: time.Duration(tr.Within), LifetimeFraction: tr.LifetimeFraction})
	}
	r.Broken, r.Inconsistent, r.Unreachable, r.TLSBroken = p.Broken, p.Inconsistent, p.Unreachable, p.TLSBroken
	r.WeakKey, r.WeakSignature, r.LongValidity, r.DistrustedCA = p.WeakKey, p.WeakSignature, p.LongValidity, p.DistrustedCA
	if p.BuiltinDistrust {
		r.Distrust = policy.BuiltinDistrust()
	}
	if p.DistrustFile != "" {
		entries, err := config.LoadDistrust(p.DistrustFile)
		if err != nil {
			return r, err
		}
		for _, e := range entries {
			after, _ := time.Parse(time.DateOnly, e.After) // checked by LoadDistrust
			r.Distrust = append(r.Distrust, policy.Distrust{CA: e.CA, SPKISHA256: e.SPKISHA256, Browsers: e.Browsers,
				Rule: policy.DistrustRule(e.Rule), After: after, Reference: e.Reference})
		}
	}
	r.CoverageDelegation, r.CoverageNames, r.CoverageUnverified = p.CoverageDelegation, p.CoverageNames, p.CoverageUnverified
	r.RenewalMissed = p.RenewalMissed
	return r, nil
}

// renewalRules sets the ACM renewal margin of c on r.
func renewalRules(r policy.Rules, c config.AWS) policy.Rules {
	r.RenewalMargin = time.Duration(c.RenewalMargin)
	return r
}

// coverageRules sets the zones out of scope of c on r.
func coverageRules(r policy.Rules, c config.Coverage) policy.Rules {
	r.OutOfScope = c.OutOfScopeZones()
	return r
}

// revocationRules sets the tiers of the revocation kinds of c on r.
func revocationRules(r policy.Rules, c config.Revocation) policy.Rules {
	r.Revoked, r.RevokedIntermediate = c.Revoked, c.RevokedIntermediate
	r.RevocationStale, r.RevocationUnavailable = c.Stale, c.Unavailable
	return r
}

// ctRules sets the rules of the reconciliation with CT of c on r.
func ctRules(r policy.Rules, c config.Config) policy.Rules {
	r.CT = policy.CTRules{
		Grace:           time.Duration(c.CT.Grace),
		ExpectedIssuers: c.CT.ExpectedIssuers,
		Domains:         c.CTDomains(),
	}
	r.CT.UnexpectedIssuer = c.CT.UnexpectedIssuer
	return r
}

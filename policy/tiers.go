package policy

import "time"

// TierRule says when Tier starts: when at most Within is left before the
// deadline and, if LifetimeFraction is set, when at most that fraction of
// the certificate's lifetime is left. When both are set the later of the two
// points wins (both conditions must hold), so a healthy short-lived
// certificate is not announced before its normal renewal point. A rule with
// neither set never applies.
type TierRule struct {
	Tier             Tier
	Within           time.Duration
	LifetimeFraction float64
}

// Rules are the policy knobs.
type Rules struct {
	// Tiers are the expiry tiers, in any order.
	Tiers []TierRule
	// Broken is the tier of chain_untrusted, self_signed and
	// hostname_mismatch.
	Broken Tier
	// Inconsistent is the tier of inconsistent_deployment.
	Inconsistent Tier
	// Unreachable is the tier of unreachable explicit targets.
	Unreachable Tier
	// TLSBroken is the tier of tls_broken: a discovered name that accepts
	// connections and fails TLS. None turns the check off.
	TLSBroken Tier
	// WeakKey, WeakSignature and LongValidity are the tiers of the crypto
	// policy (see crypto.go); None turns a check off.
	WeakKey       Tier
	WeakSignature Tier
	LongValidity  Tier
	// Revoked and RevokedIntermediate are the tiers of a revoked leaf and
	// of a revoked intermediate; RevocationStale of revocation information
	// past its next update; RevocationUnavailable of revocation that could
	// not be checked, never above Info (see revocation.go).
	Revoked               Tier
	RevokedIntermediate   Tier
	RevocationStale       Tier
	RevocationUnavailable Tier
	// CoverageDelegation, CoverageNames and CoverageUnverified are the
	// tiers of coverage_gap findings (see CoverageGap): a delegated zone
	// not transferred, names under a zone no source watches, a certificate
	// in use that no probed endpoint serves or a cert-manager Certificate
	// whose Secret was not read. None turns one off.
	CoverageDelegation Tier
	CoverageNames      Tier
	CoverageUnverified Tier
	// OutOfScope are zones (normalised apexes) for which no coverage_gap
	// is raised: names at or below them are out of scope.
	OutOfScope []string
	// RenewalMargin: an ACM certificate that ACM renews and that is still
	// not renewed when less than this is left is renewal_overdue. Zero
	// means DefaultRenewalMargin (ACM starts renewing ACMRenewalWindow
	// before expiry).
	RenewalMargin time.Duration
	// DistrustedCA is the tier of distrusted_ca; None turns the check
	// off. Distrust is the table it checks (BuiltinDistrust, plus
	// policy.distrust_file).
	DistrustedCA Tier
	// RenewalSuggested is the tier of renewal_suggested once the window
	// the CA suggests has ended (notice and then warning before); None
	// turns the check off.
	RenewalSuggested Tier
	Distrust         []Distrust
	// RenewalMissed is the tier of renewal_missed once the certificate is
	// in the most urgent expiry tier (warning before, never above this);
	// None turns the check off.
	RenewalMissed Tier
	// CT are the rules of the reconciliation with Certificate
	// Transparency (AddCT).
	CT CTRules
}

const day = 24 * time.Hour

// DefaultRules are the tiers of a fresh configuration: notice ≤30d,
// warning ≤14d, page ≤7d, critical ≤2d or expired; broken-now problems page;
// weak keys and signatures warn, an over-long public validity is a notice.
func DefaultRules() Rules {
	return Rules{
		Tiers: []TierRule{
			{Tier: Notice, Within: 30 * day},
			{Tier: Warning, Within: 14 * day},
			{Tier: Page, Within: 7 * day},
			{Tier: Critical, Within: 2 * day},
		},
		Broken:                Page,
		Inconsistent:          Warning,
		Unreachable:           Warning,
		TLSBroken:             Warning,
		WeakKey:               Warning,
		WeakSignature:         Warning,
		LongValidity:          Notice,
		Revoked:               Critical,
		RevokedIntermediate:   Page,
		RevocationStale:       Info,
		DistrustedCA:          Page,
		RenewalSuggested:      Page,
		RenewalMissed:         Page,
		Distrust:              BuiltinDistrust(),
		RevocationUnavailable: Info,
		CoverageDelegation:    Warning,
		CoverageNames:         Notice,
		CoverageUnverified:    Warning,
		RenewalMargin:         DefaultRenewalMargin,
	}
}

// TierFor returns the expiry tier of a certificate valid from notBefore to
// notAfter at time now: Critical once it has expired, otherwise the most
// urgent rule that applies, or None.
func TierFor(notBefore, notAfter time.Time, rules []TierRule, now time.Time) Tier {
	left := notAfter.Sub(now)
	if left <= 0 {
		return Critical
	}
	lifetime := notAfter.Sub(notBefore)
	best := None
	for _, r := range rules {
		if r.Tier <= best || (r.Within <= 0 && r.LifetimeFraction <= 0) {
			continue
		}
		if r.Within > 0 && left > r.Within {
			continue
		}
		if r.LifetimeFraction > 0 && float64(left) > r.LifetimeFraction*float64(lifetime) {
			continue
		}
		best = r.Tier
	}
	return best
}

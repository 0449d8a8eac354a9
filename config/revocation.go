package config

import (
	"github.com/certwatch/certwatch/policy"
)

// Revocation configures the CRL and OCSP checks of verified chains and the
// tiers of what they find.
type Revocation struct {
	// Enabled turns revocation checking on (the default) or off.
	Enabled bool `yaml:"enabled"`
	// Timeout bounds one HTTP request for a CRL or an OCSP response.
	Timeout Duration `yaml:"timeout"`
	// MaxCRLBytes caps the size of one CRL; a larger one is unavailable.
	// OCSP responses have a fixed cap of 64 KiB.
	MaxCRLBytes int64 `yaml:"max_crl_bytes"`
	// RetryAfter is how long a CRL or responder that failed, or whose
	// answer is past its next update, is left alone before it is asked
	// again. A current answer is kept until its next update.
	RetryAfter Duration `yaml:"retry_after"`
	// Revoked is the tier of a revoked leaf, RevokedIntermediate of a
	// revoked intermediate.
	Revoked             policy.Tier `yaml:"revoked"`
	RevokedIntermediate policy.Tier `yaml:"revoked_intermediate"`
	// Stale is the tier of revocation information past its next update
	// (info, or up to warning); Unavailable of revocation that could not
	// be checked (none or info: an unreachable CRL host never pages).
	Stale       policy.Tier `yaml:"stale"`
	Unavailable policy.Tier `yaml:"unavailable"`
}

func (r *Revocation) applyDefaults() {
	*r = Revocation{
		Enabled:             true,
		Timeout:             Duration(5e9),
		MaxCRLBytes:         10 << 20,
		RetryAfter:          Duration(600e9),
		Revoked:             policy.Critical,
		RevokedIntermediate: policy.Page,
		Stale:               policy.Info,
		Unavailable:         policy.Info,
	}
}

func (r *Revocation) validate() []error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, fieldf(join("revocation", path), "revocation: "+format, args...))
	}
	if r.Timeout <= 0 {
		add("timeout", "timeout must be positive, got %v", r.Timeout)
	}
	if r.MaxCRLBytes < 1024 {
		add("max_crl_bytes", "max_crl_bytes must be at least 1024, got %d", r.MaxCRLBytes)
	}
	if r.RetryAfter <= 0 {
		add("retry_after", "retry_after must be positive, got %v", r.RetryAfter)
	}
	tier := func(key string, t, most policy.Tier) {
		if t > most {
			add(key, "%s: at most %s, got %s", key, most, t)
		}
	}
	tier("revoked", r.Revoked, policy.Critical)
	tier("revoked_intermediate", r.RevokedIntermediate, policy.Critical)
	tier("stale", r.Stale, policy.Warning)
	tier("unavailable", r.Unavailable, policy.Info)
	return errs
}

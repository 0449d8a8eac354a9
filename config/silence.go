package config

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
)

// Silence is a silence declared in the configuration file, for teams that
// keep them in version control: the findings it matches are not announced,
// up to a tier, until it ends (see `certwatch silence`, which keeps
// silences in the state instead).
type Silence struct {
	// Match selects the findings; at least one matcher is required.
	Match SilenceMatch `yaml:"match"`
	// UpTo is the highest tier it covers (notice to critical); a matching
	// finding above it is announced. Nil means page.
	UpTo *policy.Tier `yaml:"up_to,omitempty" tier:"alert"`
	// Until is when it ends: a date (2030-05-01, midnight UTC at its
	// start) or an RFC 3339 time. At most notify.silence_max from when
	// the file is loaded.
	Until Date `yaml:"until"`
	// Reason says why the findings may wait (a ticket, a date).
	Reason string `yaml:"reason"`
	// Author is who decided; empty means "config".
	Author string `yaml:"author,omitempty"`
}

// SilenceMatch selects findings. Every matcher set must match.
type SilenceMatch struct {
	// FindingID is a finding's ID, as the JSON report and `certwatch
	// alerts --output json` give it ("expiring:<sha256>").
	FindingID string `yaml:"finding_id,omitempty"`
	// Kind is a finding kind ("expiring", "tls_broken").
	Kind string `yaml:"kind,omitempty"`
	// Name is a glob ("*" spans dots) matched against a finding's
	// endpoint names, subject and name.
	Name string `yaml:"name,omitempty"`
	// Zone matches findings with a name in the zone.
	Zone string `yaml:"zone,omitempty"`
	// Labels must all be on the finding with these values.
	Labels map[string]string `yaml:"labels,omitempty"`
	// Certificate is the leaf's SHA-256 fingerprint, or at least its first
	// 8 hex digits.
	Certificate string `yaml:"certificate,omitempty"`
}

// Empty reports whether m sets no matcher.
func (m SilenceMatch) Empty() bool {
	return m.FindingID == "" && m.Kind == "" && m.Name == "" && m.Zone == "" && len(m.Labels) == 0 && m.Certificate == ""
}

// DefaultSilenceMax is the longest a silence may last (notify.silence_max).
const DefaultSilenceMax = 90 * 24 * time.Hour

// Date is a point in time written as a date (2030-05-01, midnight UTC at
// its start) or an RFC 3339 time.
type Date struct{ time.Time }

// ParseDate reads a date or an RFC 3339 time.
func ParseDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("invalid date %q (want 2030-05-01 or 2030-05-01T17:00:00Z)", s)
}

// UnmarshalYAML parses the date, reporting the YAML line on error.
func (d *Date) UnmarshalYAML(n *yaml.Node) error {
	t, err := ParseDate(n.Value)
	if err != nil {
		return lineError(n, err)
	}
	d.Time = t
	return nil
}

// MarshalYAML writes the date as RFC 3339.
func (d Date) MarshalYAML() (any, error) {
	if d.IsZero() {
		return "", nil
	}
	return d.UTC().Format(time.RFC3339), nil
}

// UpToTier is the tier the silence covers up to: UpTo, page when empty.
func (s Silence) UpToTier() policy.Tier {
	if s.UpTo == nil {
		return policy.Page
	}
	return *s.UpTo
}

// validateSilences checks the silences of c against now: a silence may
// end in the past (it no longer holds), not further than
// notify.silence_max from now.
func validateSilences(silences []Silence, max time.Duration, now time.Time) []error {
	var errs []error
	for i, s := range silences {
		at := fmt.Sprintf("silences[%d]", i)
		add := func(key, format string, args ...any) {
			errs = append(errs, fieldf(join(at, key), at+": "+format, args...))
		}
		m := s.Match
		if m.Empty() {
			add("match", "match: at least one of finding_id, kind, name, zone, labels or certificate is required")
		}
		if m.Kind != "" {
			if _, ok := policy.KindNamed(m.Kind); !ok {
				add("match.kind", "match: kind: unknown finding kind %q", m.Kind)
			}
		}
		if m.Name != "" {
			if _, err := discovery.NewFilter([]string{m.Name}, nil); err != nil {
				add("match.name", "match: name: %v", err)
			}
		}
		if m.Zone != "" && discovery.NormalizeName(m.Zone) == "" {
			add("match.zone", "match: zone: empty zone")
		}
		for k := range m.Labels {
			if k == "" {
				add("match.labels", "match: labels: empty label name")
			}
		}
		if c := strings.ToLower(strings.ReplaceAll(m.Certificate, ":", "")); c != "" {
			if len(c) < 8 || len(c) > 64 || strings.Trim(c, "0123456789abcdef") != "" {
				add("match.certificate", "match: certificate: want a SHA-256 fingerprint in hex, or at least its first 8 digits")
			}
		}
		if t := s.UpTo; t != nil && (*t < policy.Notice || *t > policy.Critical) {
			add("up_to", "up_to: unknown tier %q (want notice, warning, page or critical)", *t)
		}
		if strings.TrimSpace(s.Reason) == "" {
			add("reason", "reason: required: say why the findings may stay unannounced (a ticket, a date)")
		}
		switch {
		case s.Until.IsZero():
			add("until", "until: required: the date the silence ends (2030-05-01)")
		case max > 0 && s.Until.Sub(now) > max:
			add("until", "until: %s is more than notify.silence_max (%v) from now: silence for at most that long, and extend it when it ends if the findings still may wait",
				s.Until.UTC().Format(time.RFC3339), Duration(max))
		}
	}
	return errs
}

// MinSilenceToken is the fewest bytes serve's silence token may have:
// with failed attempts limited (serve answers 429 past a few a minute),
// 16 random bytes are beyond guessing. `openssl rand -hex 16` makes one
// of 32.
const MinSilenceToken = 16

// SilenceToken reads the bearer token of serve's silence endpoints from
// serve.silence_token_file or serve.silence_token_env, as run does at
// start (surrounding whitespace trimmed); "" when neither is set. A file
// that cannot be read or is empty, a variable that is not set, and a
// token shorter than MinSilenceToken bytes are errors (*FieldError)
// naming the key; the token itself is never in them.
func (s Serve) SilenceToken() (Secret, error) {
	key := "serve.silence_token_file"
	if s.SilenceTokenFile == "" {
		key = "serve.silence_token_env"
	}
	tok, err := ReadSecret(key, "", s.SilenceTokenFile, s.SilenceTokenEnv)
	if err != nil {
		return "", &FieldError{Path: key, Err: err}
	}
	if n := len(tok.Reveal()); n > 0 && n < MinSilenceToken {
		return "", fieldf(key, "%s: the token has %d bytes, fewer than the %d required: make a random one (openssl rand -hex 16)", key, n, MinSilenceToken)
	}
	return tok, nil
}

package config

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/discovery"
)

// Secret holds a token, key or password. It prints, marshals and logs as
// "<secret>" so it cannot leak through a log line, an error or
// `certwatch check-config`. Use Reveal to get the value.
type Secret string

const redacted = "<secret>"

// Reveal returns the secret value. Call it only where the value is sent to
// the service that needs it.
func (s Secret) Reveal() string { return string(s) }

// String returns "<secret>" (or "" when empty).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return s.String() }

// Format keeps every fmt verb (%s, %v, %q, %x, ...) from printing the value.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }

// MarshalText returns "<secret>" (or "" when empty).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML returns "<secret>" (or "" when empty).
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Duration is a time.Duration that YAML writes as "10s", "5m", "12h" or,
// beyond Go's units, "30d" (days) and "2w" (weeks).
type Duration time.Duration

// ParseDuration parses Go durations plus the day ("d") and week ("w")
// suffixes: "30d", "1w", "36h", "1.5d".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if num, ok := strings.CutSuffix(s, suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			// ParseFloat also takes "NaN", "Inf" and 1e300, none of which
			// converts to a Duration.
			if err != nil || math.IsNaN(f) || math.Abs(f*float64(unit)) > math.MaxInt64 {
				return 0, fmt.Errorf("invalid duration %q (want e.g. 30s, 5m, 12h, 30d)", s)
			}
			return time.Duration(f * float64(unit)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if f, ferr := strconv.ParseFloat(s, 64); ferr == nil && f != 0 {
			return 0, fmt.Errorf("a duration needs a unit, e.g. %ss", s)
		}
		return 0, fmt.Errorf("invalid duration %q (want e.g. 30s, 5m, 12h, 30d)", s)
	}
	return d, nil
}

// UnmarshalYAML parses the duration, reporting the YAML line on error.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		if !strings.Contains(err.Error(), strconv.Quote(n.Value)) {
			err = fmt.Errorf("%s: %w", shorten(strconv.Quote(n.Value)), err)
		}
		return lineError(n, err)
	}
	*d = Duration(v)
	return nil
}

// Set parses the duration as ParseDuration does: Duration is the
// flag.Value of duration flags (--timeout), so a flag and the file take
// the same forms and fail in the same words.
func (d *Duration) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration in the shortest form that parses back.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String formats whole days as "30d" and anything else as Go does.
func (d Duration) String() string {
	v := time.Duration(d)
	if v != 0 && v%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", v/(24*time.Hour))
	}
	return v.String()
}

// HostPort is a "host:port" network address, checked when the config is
// decoded so a typo fails with its line number. IPv6 literals need brackets:
// "[::1]:53".
type HostPort string

// UnmarshalYAML checks the address, reporting the YAML line on error.
func (h *HostPort) UnmarshalYAML(n *yaml.Node) error {
	if err := CheckHostPort(n.Value); err != nil {
		return lineError(n, err)
	}
	*h = HostPort(n.Value)
	return nil
}

// CheckHostPort reports whether s is a valid "host:port" with a port in
// 1..65535.
func CheckHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("invalid address %q: want HOST:PORT (IPv6 as [::1]:53)", s)
	}
	if host == "" {
		return fmt.Errorf("invalid address %q: empty host", s)
	}
	if _, err := ParsePort(port); err != nil {
		return fmt.Errorf("invalid address %q: %w", s, err)
	}
	return nil
}

// ParsePort parses a TCP port number in 1..65535.
func ParsePort(s string) (int, error) {
	p, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("invalid port %s: want a number from 1 to 65535", shorten(strconv.Quote(s)))
	}
	return p, nil
}

// lineError wraps err as a YAML type error so the decoder collects it with
// the others instead of stopping at the first.
func lineError(n *yaml.Node, err error) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
}

// Target is one static target. In YAML it is a string, "host",
// "host:port" or "host:port/protocol" (see static.New), or a mapping
// {address: host:port, protocol: postgres, labels: {team: payments}},
// whose address and protocol make the Spec "host:port/postgres".
type Target struct {
	// Spec is the target as static.New parses it: HOST[:PORT][/PROTOCOL].
	Spec string `yaml:"-"`
	// Labels are attached to the findings of the target's endpoints, for
	// notify routes that match on labels, as zones[].labels are.
	Labels map[string]string `yaml:"labels,omitempty"`
}

// String returns the Spec.
func (t Target) String() string { return t.Spec }

// MarshalYAML writes the string form, or the mapping form when the target
// has labels.
func (t Target) MarshalYAML() (any, error) {
	if len(t.Labels) == 0 {
		return t.Spec, nil
	}
	return struct {
		Address string            `yaml:"address"`
		Labels  map[string]string `yaml:"labels"`
	}{t.Spec, t.Labels}, nil
}

// UnmarshalYAML accepts a string or an {address, protocol, labels}
// mapping, reporting unknown keys with their line.
func (t *Target) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*t = Target{Spec: n.Value}
		return nil
	case yaml.MappingNode:
		var addr, proto string
		var labels map[string]string
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "labels" {
				if err := v.Decode(&labels); err != nil || v.Kind != yaml.MappingNode {
					return lineError(v, errors.New("target labels: want a mapping of names to strings, e.g. {team: payments}"))
				}
				if len(labels) == 0 {
					return lineError(v, errors.New("target labels: no labels; remove the key or give some, e.g. {team: payments}"))
				}
				continue
			}
			if v.Kind != yaml.ScalarNode {
				return lineError(v, fmt.Errorf("target %s: want a string", k.Value))
			}
			switch k.Value {
			case "address":
				addr = v.Value
			case "protocol":
				proto = v.Value
			default:
				return lineError(k, fmt.Errorf("target: %q is not a known key (want address, protocol and labels)", k.Value))
			}
		}
		if addr == "" {
			return lineError(n, errors.New("target: address is required"))
		}
		if proto != "" {
			addr += "/" + proto
		}
		*t = Target{Spec: addr, Labels: labels}
		return nil
	}
	return lineError(n, errors.New("target: want HOST[:PORT][/PROTOCOL] or {address: HOST:PORT, protocol: PROTOCOL, labels: {NAME: VALUE}}"))
}

// Protocol is how a port reaches TLS (discovery.Protocol), written by name
// in YAML: tls, smtp, imap, pop3, ftp, ldap, postgres, mysql, xmpp-client,
// xmpp-server.
type Protocol discovery.Protocol

// UnmarshalYAML parses the name, reporting the YAML line on error.
func (p *Protocol) UnmarshalYAML(n *yaml.Node) error {
	v, err := discovery.ParseProtocol(n.Value)
	if err != nil {
		return lineError(n, err)
	}
	*p = Protocol(v)
	return nil
}

// MarshalYAML writes the name.
func (p Protocol) MarshalYAML() (any, error) { return discovery.Protocol(p).String(), nil }

// String returns the name.
func (p Protocol) String() string { return discovery.Protocol(p).String() }

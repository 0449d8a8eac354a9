// Package config defines certwatch's YAML configuration: the schema, the
// defaults (in one place, Default), Load and Validate.
//
// Config types are plain data. Patterns, durations and addresses are checked
// at load time so a bad value fails start-up with its line number.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// Config is the whole configuration file.
type Config struct {
	// Zones are DNS zones to transfer (AXFR) and scan.
	Zones []Zone `yaml:"zones,omitempty"`
	// Targets are static endpoints: "host", "host:port", "10.0.0.1:8443",
	// "db.internal:6432/postgres", or {address: db.internal:6432,
	// protocol: postgres}.
	Targets []Target `yaml:"targets,omitempty"`
	// Networks are address ranges swept for TLS services no name points
	// to, at a bounded rate.
	Networks []Network `yaml:"networks,omitempty"`
	// Ports are probed on every A/AAAA/CNAME name of a zone and on targets
	// given without a port. SRV records carry their own port. An entry
	// PORT/PROTOCOL ("6432/postgres") also sets the port's protocol, as
	// --ports does.
	Ports PortList `yaml:"ports,omitempty"`
	// Protocols says how ports reach TLS where the well-known protocol of
	// the port is not the one spoken (see discovery.PortProtocols): e.g.
	// {6432: postgres, 2525: smtp, 25: tls}. Zones may override it.
	Protocols map[int]Protocol `yaml:"protocols,omitempty"`
	// CAFiles are PEM files of extra trusted roots (private CAs). System
	// roots stay trusted.
	CAFiles []string `yaml:"ca_files,omitempty"`
	// Files are certificate files to read, judged as certificates held at
	// rest: PEM bundles, DER, PKCS#12 and JKS keystores, kubeconfigs.
	Files []Files `yaml:"files,omitempty"`
	// Resolver is the DNS server (HOST:PORT) used for names that zones do not
	// answer themselves. Empty means the system resolver.
	Resolver HostPort `yaml:"resolver,omitempty"`
	// DiscoveryTimeout is each discovery source's deadline (a zone's
	// transfer with the child zones it follows, one AWS account's Route 53
	// or ACM, one Kubernetes cluster, the files, one network's sweep): a
	// source that has not finished by then fails, as any failed source
	// does, and is abandoned, whatever it is stuck on; the other sources'
	// targets are probed without waiting for it. A zone whose timeout is
	// longer gets twice its timeout, a network twice the time its sweep
	// takes at its rate. Zero means DefaultDiscoveryTimeout.
	DiscoveryTimeout Duration `yaml:"discovery_timeout,omitempty"`
	// Probe tunes connections.
	Probe Probe `yaml:"probe"`
	// Policy sets expiry tiers and the tier of each kind of problem.
	Policy Policy `yaml:"policy"`
	// Revocation configures CRL and OCSP checks.
	Revocation Revocation `yaml:"revocation"`
	// Coverage bounds following delegations and declares zones out of
	// scope for coverage gaps.
	Coverage Coverage `yaml:"coverage"`
	// ACME asks ACME CAs for the renewal windows of their leaves.
	ACME ACME `yaml:"acme"`
	// Output is the report format of `certwatch scan`: table or json.
	Output string `yaml:"output"`
	// FailOn is the lowest tier that makes `certwatch scan` exit 1.
	FailOn policy.Tier `yaml:"fail_on"`
	// AWS configures Route53 and ACM discovery.
	AWS AWS `yaml:"aws,omitempty"`
	// Kubernetes lists the clusters whose certificates at rest are read.
	Kubernetes []Kubernetes `yaml:"kubernetes,omitempty"`
	// CT reads Certificate Transparency logs for the watched domains.
	CT CT `yaml:"ct"`
	// Notify configures state, channels and routing of alerts.
	Notify Notify `yaml:"notify,omitempty"`
	// Daemon configures `certwatch run`.
	Daemon Daemon `yaml:"daemon,omitempty"`
	// Serve configures the HTTP API of `certwatch run`.
	Serve Serve `yaml:"serve,omitempty"`
	// Silences keep the findings they match from being announced until
	// they end (see Silence); `certwatch silence` keeps more in the state.
	Silences []Silence `yaml:"silences,omitempty"`

	// lines are the lines of the settings in the file c was decoded
	// from, for Validate and Report to point at; nil for a config built
	// in code.
	lines positions
}

// Serve configures the HTTP API of `certwatch run` beyond its address
// (daemon.listen).
type Serve struct {
	// SilenceTokenEnv and SilenceTokenFile say where the bearer token is
	// read from that POST /api/v1/silences and
	// POST /api/v1/silences/{id}/expire require; without one, those
	// endpoints are off (GET /api/v1/silences is always served).
	SilenceTokenEnv  string `yaml:"silence_token_env,omitempty"`
	SilenceTokenFile string `yaml:"silence_token_file,omitempty"`
}

// Files are globs of certificate files read with one passphrase.
type Files struct {
	// Paths are globs: path.Match patterns per path element, where "**"
	// spans any number of directories ("/etc/ssl/**/*.pem").
	Paths []string `yaml:"paths"`
	// PassphraseEnv or PassphraseFile give the passphrase of PKCS#12 and
	// JKS keystores among them; without either, the empty passphrase and
	// Java's default ("changeit") are tried.
	PassphraseEnv  string `yaml:"passphrase_env,omitempty"`
	PassphraseFile string `yaml:"passphrase_file,omitempty"`
}

// Zone is one DNS zone to transfer, or to read from its zone file.
type Zone struct {
	// Name is the zone apex, e.g. internal.example.
	Name string `yaml:"name"`
	// Nameserver is where to AXFR from (HOST:PORT). Empty: the zone's SOA
	// MNAME, then its NS names, found via the system resolver.
	Nameserver HostPort `yaml:"nameserver,omitempty"`
	// File is the zone in master-file format (as BIND, Knot and NSD serve
	// it), read on every pass instead of transferring the zone: where AXFR
	// is shut. Name is its origin. A regular file of at most 64 MiB;
	// $INCLUDE is refused. Not with Nameserver. Its delegations are
	// followed as a transferred zone's.
	File string `yaml:"file,omitempty"`
	// TSIG signs the transfer, when the server requires it; with File,
	// the transfers of the delegated child zones.
	TSIG *TSIG `yaml:"tsig,omitempty"`
	// Ports overrides the top-level ports for this zone; PORT/PROTOCOL
	// entries set the protocol for this zone's names.
	Ports PortList `yaml:"ports,omitempty"`
	// Protocols overrides the top-level protocols of ports for this
	// zone's names, port by port.
	Protocols map[int]Protocol `yaml:"protocols,omitempty"`
	// Include keeps only names matching one of these globs ("*" spans dots).
	Include []string `yaml:"include,omitempty"`
	// Exclude drops names matching any of these globs.
	Exclude []string `yaml:"exclude,omitempty"`
	// Timeout bounds the whole transfer, fallbacks to other servers
	// included. Zero means 60s; raise it for very large zones on slow links.
	Timeout Duration `yaml:"timeout,omitempty"`
	// Labels are attached to findings with an endpoint in this zone, for
	// notify routes that match on labels (e.g. team: payments).
	Labels map[string]string `yaml:"labels,omitempty"`
	// AllowEmpty accepts a transfer with no name to probe. Without it, such
	// a zone makes `certwatch scan` exit 3 (nothing of it was checked).
	AllowEmpty bool `yaml:"allow_empty,omitempty"`
	// FollowDelegations transfers the child zones this zone delegates (NS
	// records below its apex) from their own name servers, with this
	// zone's TSIG key, and scans them as part of it; a child that cannot
	// be transferred is a coverage_gap finding. Nil means true. A child
	// configured as a zone of its own is transferred with its own
	// settings instead. See Coverage for the bounds.
	FollowDelegations *bool `yaml:"follow_delegations,omitempty"`
}

// Follows reports whether delegations of z are followed (the default).
func (z *Zone) Follows() bool { return z.FollowDelegations == nil || *z.FollowDelegations }

// Coverage bounds following delegations and says which zones are out of
// scope for coverage gaps.
type Coverage struct {
	// MaxDelegationDepth bounds how deep delegations are followed below a
	// configured zone: 1 follows its children only.
	MaxDelegationDepth int `yaml:"max_delegation_depth"`
	// MaxDelegations bounds the children of one zone that are followed;
	// the rest are one coverage_gap finding.
	MaxDelegations int `yaml:"max_delegations"`
	// DelegationPort is the port delegated name servers are asked on.
	DelegationPort int `yaml:"delegation_port"`
	// OutOfScope are zones no coverage_gap is raised for: names under
	// them on certificates, delegations to them.
	OutOfScope []OutOfScope `yaml:"out_of_scope,omitempty"`
}

// OutOfScope is a zone declared out of scope, with why.
type OutOfScope struct {
	// Zone is the zone's apex; names at or below it are out of scope.
	Zone string `yaml:"zone"`
	// Reason says why, for whoever reads the configuration next.
	Reason string `yaml:"reason"`
}

// Coverage bounds.
const (
	MaxDelegationDepth = 10
	MaxDelegations     = 1000
)

// TSIG is a transaction signature key. The secret comes from SecretFile,
// SecretEnv or (discouraged, the file may be shared) Secret.
type TSIG struct {
	Name       string `yaml:"name"`
	Algorithm  string `yaml:"algorithm"`
	Secret     Secret `yaml:"secret,omitempty"`
	SecretFile string `yaml:"secret_file,omitempty"`
	SecretEnv  string `yaml:"secret_env,omitempty"`
}

// Probe tunes how endpoints are contacted.
type Probe struct {
	// Timeout bounds the TCP dial and, separately, the TLS handshake.
	Timeout Duration `yaml:"timeout"`
	// Concurrency is the number of connections in flight at once.
	Concurrency int `yaml:"concurrency"`
	// PerAddress caps connections in flight to one IP address.
	PerAddress int `yaml:"per_address"`
	// Retries is how often a transient failure (timeout, reset) is retried.
	Retries int `yaml:"retries"`
	// BreakAfter is how many endpoints in a row on one IP address must time
	// out before the rest of the run's endpoints on that address fail fast
	// as timeout, without connecting. 0 never gives up on an address.
	BreakAfter int `yaml:"break_after"`
	// PostQuantum offers the X25519MLKEM768 post-quantum hybrid key
	// exchange first on every connection, so the report says which
	// endpoints take it (key_exchange, post_quantum). Off by default: it
	// costs client CPU on every handshake.
	PostQuantum bool `yaml:"post_quantum"`
	// AllowLoopback lets probes dial loopback addresses (127.0.0.0/8, ::1,
	// ::ffff:127.0.0.1) that discovery found: a zone's or Route 53's
	// records, a resolver's answers for discovered names. Off by default:
	// a record must not aim certwatch at a service bound to its own host.
	// Targets listed by hand are always probed.
	AllowLoopback bool `yaml:"allow_loopback,omitempty"`
}

// TierRule says when a tier starts: when at most Within is left before the
// deadline and, if LifetimeFraction is set, when at most that fraction of
// the certificate's lifetime is left. With both, the later point wins.
type TierRule struct {
	Within           Duration `yaml:"within,omitempty"`
	LifetimeFraction float64  `yaml:"lifetime_fraction,omitempty"`
}

// Policy sets how findings are tiered.
type Policy struct {
	// Tiers maps notice, warning, page and critical to when they start.
	// Critical always includes "already expired".
	Tiers Tiers `yaml:"tiers"`
	// Broken is the tier of broken-now problems: chain_untrusted,
	// self_signed, hostname_mismatch.
	Broken policy.Tier `yaml:"broken"`
	// Inconsistent is the tier of inconsistent_deployment.
	Inconsistent policy.Tier `yaml:"inconsistent"`
	// Unreachable is the tier of unreachable explicit targets.
	Unreachable policy.Tier `yaml:"unreachable"`
	// TLSBroken is the tier of tls_broken: a discovered name that accepts
	// connections and then fails TLS. "none" turns the check off.
	TLSBroken policy.Tier `yaml:"tls_broken"`
	// WeakKey, WeakSignature and LongValidity are the tiers of the crypto
	// policy: weak_key (RSA below 2048 bits, EC below P-256),
	// weak_signature (SHA-1 or MD5 below the root) and long_validity (a
	// publicly trusted leaf valid longer than the CA/Browser Forum
	// allowed when it was issued). "none" turns a check off.
	WeakKey       policy.Tier `yaml:"weak_key"`
	WeakSignature policy.Tier `yaml:"weak_signature"`
	LongValidity  policy.Tier `yaml:"long_validity"`
	// DistrustedCA is the tier of distrusted_ca: a leaf whose every
	// verified path runs through a CA that browsers distrust for leaves
	// dated as it is. "none" turns the check off. BuiltinDistrust keeps
	// certwatch's table of public distrust events; DistrustFile adds the
	// entries of a YAML file (see DistrustEntry).
	DistrustedCA    policy.Tier `yaml:"distrusted_ca"`
	BuiltinDistrust bool        `yaml:"builtin_distrust"`
	DistrustFile    string      `yaml:"distrust_file,omitempty"`
	// CoverageDelegation, CoverageNames and CoverageUnverified are the
	// tiers of coverage_gap findings: a delegated zone that could not be
	// transferred (or was beyond a bound), names on certificates under a
	// zone no source watches, and an ACM or IAM certificate in use that no
	// probed endpoint serves (or a cert-manager Certificate whose Secret
	// was not read). "none" turns one off.
	CoverageDelegation policy.Tier `yaml:"coverage_delegation"`
	CoverageNames      policy.Tier `yaml:"coverage_names"`
	CoverageUnverified policy.Tier `yaml:"coverage_unverified"`
	// RenewalMissed is the tier renewal_missed rises to once the
	// certificate is in the most urgent expiry tier (warning before, never
	// above it): the newest certificate for a name has passed its expected
	// renewal (a third of its lifetime left, or the largest
	// lifetime_fraction of the tiers) and no newer one appeared anywhere.
	// "none" turns the check off.
	RenewalMissed policy.Tier `yaml:"renewal_missed"`
}

// Bounds of values that would otherwise be accepted however absurd:
// certwatch must not become the herd it is meant to spare.
const (
	MaxConcurrency  = 10000
	MaxPerAddress   = 64
	MaxBreakAfter   = 1000
	MaxProbeTimeout = 2 * time.Minute
	MaxZoneTimeout  = time.Hour
)

// DefaultDiscoveryTimeout is each discovery source's deadline when
// discovery_timeout is not set.
const DefaultDiscoveryTimeout = 10 * time.Minute

// Default returns the configuration every file is laid over.
func Default() Config {
	c := Config{
		Ports: PortList{{Number: 443}},
		Probe: Probe{
			Timeout:     Duration(probes.DefaultTimeout),
			Concurrency: probes.DefaultConcurrency,
			PerAddress:  probes.DefaultPerAddress,
			Retries:     probes.DefaultAttempts - 1,
			BreakAfter:  3,
		},
		Policy: Policy{
			Tiers: Tiers{
				"notice":   {Within: Duration(30 * day)},
				"warning":  {Within: Duration(14 * day)},
				"page":     {Within: Duration(7 * day)},
				"critical": {Within: Duration(2 * day)},
			},
			Broken:        policy.Page,
			Inconsistent:  policy.Warning,
			Unreachable:   policy.Warning,
			TLSBroken:     policy.Warning,
			WeakKey:       policy.Warning,
			WeakSignature: policy.Warning,
			LongValidity:  policy.Notice,

			DistrustedCA:    policy.Page,
			BuiltinDistrust: true,

			CoverageDelegation: policy.Warning,
			CoverageNames:      policy.Notice,
			CoverageUnverified: policy.Warning,

			RenewalMissed: policy.Page,
		},
		Coverage: Coverage{MaxDelegationDepth: 3, MaxDelegations: 50, DelegationPort: 53},
		Output:   "table",
		FailOn:   policy.Page,
	}
	c.AWS.applyDefaults()
	c.Notify.applyDefaults()
	c.Daemon.applyDefaults()
	c.Revocation.applyDefaults()
	c.ACME.applyDefaults()
	c.CT.applyDefaults()
	return c
}

const day = 24 * 60 * 60 * 1e9

// Load reads, decodes and validates the file at path. Unknown keys, bad
// durations and bad addresses fail with their line number; every problem is
// reported at once.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	c, err := Decode(f)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Decode reads YAML from r over Default and validates the result. Every
// problem is reported at once, each on its own line, with the YAML line it
// is at where the file has one; only a syntax error stops the rest.
func Decode(r io.Reader) (Config, error) {
	c := Default()
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, err
	}
	var errs []error
	if len(bytes.TrimSpace(data)) > 0 {
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			return Config{}, shortenQuoted(syntaxError(data, err))
		}
		if err := secondDocument(data); err != nil {
			errs = append(errs, err)
		}
		// A tier that names none would stop the decoder: it is reported
		// here and blanked in the text decoded.
		tierErrs, decodable, ok := tierText(&root, data)
		if !ok {
			return Config{}, joinSorted(append(errs, tierErrs...))
		}
		errs = append(errs, tierErrs...)
		// Decoding over Default keeps defaults for keys the file omits; a
		// tier given in the file replaces that tier's default rule whole.
		// A type error (an unknown key, a bad duration) leaves that value
		// at its default and the rest decoded, so the checks below still
		// run and every problem is reported at once.
		dec := yaml.NewDecoder(bytes.NewReader(decodable))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				return Config{}, shortenQuoted(syntaxError(data, err))
			}
			errs = append(errs, splitJoined(cleanYAMLError(err, &root))...)
		}
		errs = append(errs, wholeNumbers(&root)...)
	}
	c.lines = positionsOf(data)
	errs = append(errs, c.problems(c.lines)...)
	if err := joinSorted(errs); err != nil {
		return Config{}, err
	}
	return c, nil
}

// cleanYAMLError turns yaml.v3's multi-line type error into one error per
// problem, so errors.Join prints one per line, each in the user's words
// (userWords); root is the Config document decoded, nil for another.
func cleanYAMLError(err error, root *yaml.Node) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, 0, len(te.Errors))
		for _, e := range te.Errors {
			if root == nil { // not a Config: a distrust file
				e = strings.Replace(e, "not found in type config.", "is not a known key in ", 1)
			} else {
				e = userWords(e, root)
			}
			errs = append(errs, errors.New(e))
		}
		return errors.Join(errs...)
	}
	return err
}

// Retained returns c without what only building certwatch's parts reads:
// the static targets and the lines of the file. `certwatch run` keeps it
// to compare a reload with, for as long as it runs (100,000 static targets
// and their lines were 11 MB of a daemon's heap). Validate and Report on
// it know neither.
func (c Config) Retained() Config {
	c.Targets, c.lines = nil, nil
	return c
}

// Validate reports every problem in c at once, joined, each at its line
// in the file c was decoded from where it has one.
func (c *Config) Validate() error { return joinSorted(c.problems(c.lines)) }

// Report joins problems found with c (EnvironmentProblems, and the
// *FieldError of a part built from it) as Validate does: each at the line
// of its setting in the file c was decoded from, in file order, once
// each. It returns nil when errs holds none.
func (c *Config) Report(errs []error) error {
	var all []error
	for _, e := range errs {
		for _, e := range splitJoined(e) {
			all = append(all, c.lines.locate(e))
		}
	}
	return joinSorted(all)
}

// Warnings lists settings that are valid but unsafe, one line each, for
// check-config to print and run to log (see Notify.Warnings).
func (c *Config) Warnings() []string { return c.Notify.Warnings() }

// joinSorted joins errs by line (in file order) where known, then
// alphabetically, once each, with long quoted values cut short.
func joinSorted(errs []error) error {
	for i, e := range errs {
		errs[i] = shortenQuoted(e)
	}
	slices.SortFunc(errs, func(a, b error) int {
		return cmp.Or(cmp.Compare(lineOf(a.Error()), lineOf(b.Error())), strings.Compare(a.Error(), b.Error()))
	})
	errs = slices.CompactFunc(errs, func(a, b error) bool { return a.Error() == b.Error() })
	return errors.Join(errs...)
}

// problems is Validate with the lines of the decoded file, when known, so
// that problems found after decoding still name their line.
func (c *Config) problems(pos positions) []error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, fieldf(path, format, args...)) }

	errs = append(errs, portProblems(c.Ports, c.Protocols)...)
	errs = append(errs, filesProblems(c.Files)...)
	errs = append(errs, zonesProblems(c.Zones)...)
	errs = append(errs, checkTargets(c.Targets)...)
	errs = append(errs, c.networkProblems()...)
	if c.DiscoveryTimeout < 0 {
		add("discovery_timeout", "discovery_timeout must not be negative, got %v", c.DiscoveryTimeout)
	}
	errs = append(errs, c.Probe.problems()...)
	errs = append(errs, c.Policy.problems()...)
	errs = append(errs, c.Coverage.problems()...)
	if !slices.Contains([]string{"table", "json"}, c.Output) {
		add("output", "output: unknown format %q (want table or json)", c.Output)
	}
	errs = append(errs, c.AWS.validate()...)
	errs = append(errs, c.kubernetesProblems()...)
	errs = append(errs, c.Notify.validate()...)
	errs = append(errs, c.Daemon.validate()...)
	errs = append(errs, c.Revocation.validate()...)
	errs = append(errs, c.ACME.validate()...)
	errs = append(errs, c.ctProblems()...)
	// A silence is measured against the clock when the file is loaded:
	// one that ends further than notify.silence_max from now is refused.
	errs = append(errs, validateSilences(c.Silences, time.Duration(c.Notify.SilenceMax), time.Now())...)
	if c.Serve.SilenceTokenEnv != "" && c.Serve.SilenceTokenFile != "" {
		add("serve.silence_token_env", "serve: silence_token_env and silence_token_file: set at most one")
	}
	errs = append(errs, c.Daemon.ValidateSweep(c.Probe)...)
	for i, e := range errs {
		errs[i] = pos.locate(e)
	}
	return errs
}

// portProblems checks the top-level ports (at least one) and protocols.
func portProblems(ports PortList, protocols map[int]Protocol) []error {
	var errs []error
	for _, p := range ports.Numbers() {
		if p < 1 || p > 65535 {
			errs = append(errs, fieldf("ports", "ports: invalid port %d: want 1 to 65535", p))
		}
	}
	if len(ports) == 0 {
		errs = append(errs, fieldf("ports", "ports: at least one port is required"))
	}
	for p := range protocols {
		if p < 1 || p > 65535 {
			errs = append(errs, fieldf("protocols", "protocols: invalid port %d: want 1 to 65535", p))
		}
	}
	return errs
}

// filesProblems checks each files source: its globs and at most one way
// to give the passphrase.
func filesProblems(files []Files) []error {
	var errs []error
	for i, f := range files {
		fp := fmt.Sprintf("files[%d]", i)
		if len(f.Paths) == 0 {
			errs = append(errs, fieldf(fp+".paths", "%s: paths: at least one glob is required", fp))
		}
		for _, g := range f.Paths {
			if err := checkGlob(g); err != nil {
				errs = append(errs, fieldf(fp+".paths", "%s: paths: %v", fp, err))
			}
		}
		if f.PassphraseEnv != "" && f.PassphraseFile != "" {
			errs = append(errs, fieldf(fp, "%s: give passphrase_env or passphrase_file, not both", fp))
		}
	}
	return errs
}

// zonesProblems checks each zone, and that none is listed twice.
func zonesProblems(zones []Zone) []error {
	var errs []error
	seen := map[string]bool{}
	for i, z := range zones {
		name := discovery.NormalizeName(z.Name)
		zp := fmt.Sprintf("zones[%d]", i)
		where := zp
		if name == "" {
			errs = append(errs, fieldf(zp+".name", "%s: name is required", where))
		} else {
			where = fmt.Sprintf("zone %s", name)
		}
		if seen[name] && name != "" {
			errs = append(errs, fieldf(zp, "%s: listed twice", where))
		}
		seen[name] = true
		errs = append(errs, zoneProblems(z, zp, where)...)
	}
	return errs
}

// zoneProblems checks one zone at path zp, named where in messages: its
// timeout, ports, protocols, filters, servers and TSIG key.
func zoneProblems(z Zone, zp, where string) []error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, fieldf(path, format, args...)) }
	if z.Timeout < 0 {
		add(zp+".timeout", "%s: timeout must not be negative", where)
	}
	if z.Timeout > Duration(MaxZoneTimeout) {
		add(zp+".timeout", "%s: timeout must be at most %v, got %v", where, MaxZoneTimeout, z.Timeout)
	}
	for _, p := range z.Ports.Numbers() {
		if p < 1 || p > 65535 {
			add(zp+".ports", "%s: ports: invalid port %d: want 1 to 65535", where, p)
		}
	}
	for p := range z.Protocols {
		if p < 1 || p > 65535 {
			add(zp+".protocols", "%s: protocols: invalid port %d: want 1 to 65535", where, p)
		}
	}
	if err := checkFilter(zp, where+": ", z.Include, z.Exclude); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkZone(z, zp, where)...)
	if t := z.TSIG; t != nil {
		if t.Name == "" || t.Algorithm == "" {
			add(zp+".tsig.name", "%s: tsig: name and algorithm are required", where)
		}
		n := 0
		for _, set := range []bool{t.Secret != "", t.SecretFile != "", t.SecretEnv != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			add(zp+".tsig", "%s: tsig: set exactly one of secret_file, secret_env or secret", where)
		}
	}
	return errs
}

// problems checks the probe's limits.
func (p Probe) problems() []error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, fieldf(path, format, args...)) }
	if d := p.Timeout; d <= 0 || d > Duration(MaxProbeTimeout) {
		add("probe.timeout", "probe: timeout must be above 0 and at most %v, got %v", MaxProbeTimeout, d)
	}
	if p.Concurrency < 1 || p.Concurrency > MaxConcurrency {
		add("probe.concurrency", "probe: concurrency must be 1 to %d, got %d", MaxConcurrency, p.Concurrency)
	}
	if p.PerAddress < 1 || p.PerAddress > MaxPerAddress {
		add("probe.per_address", "probe: per_address must be 1 to %d, got %d", MaxPerAddress, p.PerAddress)
	}
	if p.Retries < 0 || p.Retries > 5 {
		add("probe.retries", "probe: retries must be 0 to 5, got %d", p.Retries)
	}
	if p.BreakAfter < 0 || p.BreakAfter > MaxBreakAfter {
		add("probe.break_after", "probe: break_after must be 0 (never give up on an address) to %d, got %d", MaxBreakAfter, p.BreakAfter)
	}
	return errs
}

// problems checks the policy: each tier's name and rule, their order, and
// that the distrust file loads.
func (p Policy) problems() []error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, fieldf(path, format, args...)) }
	for name, r := range p.Tiers {
		t, err := policy.ParseTier(name)
		if err != nil || t < policy.Notice {
			add("policy.tiers", "policy: tiers: unknown tier %q (want notice, warning, page or critical)", name)
		}
		if r.Within < 0 {
			add("policy.tiers."+name+".within", "policy: tiers: %s: within must not be negative", name)
		}
		if r.LifetimeFraction < 0 || r.LifetimeFraction > 1 {
			add("policy.tiers."+name+".lifetime_fraction", "policy: tiers: %s: lifetime_fraction must be between 0 and 1, got %g", name, r.LifetimeFraction)
		}
	}
	errs = append(errs, p.Tiers.checkOrder()...)
	if p.DistrustFile != "" {
		if _, err := LoadDistrust(p.DistrustFile); err != nil {
			errs = append(errs, fieldf("policy.distrust_file", "%v", err))
		}
	}
	return errs
}

// ReadSecret returns a secret from exactly one of: a file (trailing
// newline trimmed), an environment variable, or an inline value. what names
// the secret in errors, e.g. "zone internal.example: tsig".
// EnvironmentProblems reads every secret of a configuration the same way.
func ReadSecret(what string, inline Secret, file, env string) (Secret, error) {
	return readSecret(os.Getenv, what, inline, file, env)
}

func readSecret(getenv func(string) string, what string, inline Secret, file, env string) (Secret, error) {
	switch {
	case file != "":
		if err := readableFile(file); err != nil {
			return "", fmt.Errorf("%s: secret file %w", what, err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s: secret file %w", what, fileError(file, err))
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s: secret file %s is empty", what, file)
		}
		return Secret(s), nil
	case env != "":
		s := getenv(env)
		if s == "" {
			return "", fmt.Errorf("%s: environment variable %s is not set (or is empty)", what, env)
		}
		return Secret(s), nil
	}
	return inline, nil
}

// PortProtocols returns the port -> protocol overrides for the names of
// zone z (nil: for the static targets): the top-level protocols and the
// protocols of the top-level ports (6432/postgres), with the zone's own
// laid over them in the same order.
func (c *Config) PortProtocols(z *Zone) discovery.PortProtocols {
	layers := []map[int]Protocol{c.Protocols, c.Ports.protocols()}
	if z != nil {
		layers = append(layers, z.Protocols, z.Ports.protocols())
	}
	var out discovery.PortProtocols
	for _, m := range layers {
		for p, v := range m {
			if out == nil {
				out = discovery.PortProtocols{}
			}
			out[p] = discovery.Protocol(v)
		}
	}
	return out
}

// problems reports what is wrong with the coverage settings.
func (c *Coverage) problems() []error {
	var errs []error
	add := func(path, format string, args ...any) { errs = append(errs, fieldf(path, format, args...)) }
	if c.MaxDelegationDepth < 1 || c.MaxDelegationDepth > MaxDelegationDepth {
		add("coverage.max_delegation_depth", "coverage: max_delegation_depth must be 1 to %d, got %d (follow_delegations: false on a zone turns following off)", MaxDelegationDepth, c.MaxDelegationDepth)
	}
	if c.MaxDelegations < 1 || c.MaxDelegations > MaxDelegations {
		add("coverage.max_delegations", "coverage: max_delegations must be 1 to %d, got %d", MaxDelegations, c.MaxDelegations)
	}
	if c.DelegationPort < 1 || c.DelegationPort > 65535 {
		add("coverage.delegation_port", "coverage: delegation_port: invalid port %d: want 1 to 65535", c.DelegationPort)
	}
	for i, o := range c.OutOfScope {
		switch {
		case discovery.NormalizeName(o.Zone) == "":
			add(fmt.Sprintf("coverage.out_of_scope[%d].zone", i), "coverage: out_of_scope[%d]: zone is required", i)
		case strings.TrimSpace(o.Reason) == "":
			add(fmt.Sprintf("coverage.out_of_scope[%d].reason", i), "coverage: out_of_scope: zone %s: reason is required (say why it is not watched, for whoever reads this next)", discovery.NormalizeName(o.Zone))
		}
	}
	return errs
}

// OutOfScopeZones returns the zones declared out of scope, normalised.
func (c *Coverage) OutOfScopeZones() []string {
	out := make([]string, 0, len(c.OutOfScope))
	for _, o := range c.OutOfScope {
		out = append(out, discovery.NormalizeName(o.Zone))
	}
	return out
}

// checkGlob reports a malformed glob of files: empty, or an element
// path.Match refuses ("**" aside).
func checkGlob(glob string) error {
	if strings.TrimSpace(glob) == "" {
		return errors.New("an empty glob")
	}
	for _, el := range strings.Split(glob, "/") {
		if el == "**" {
			continue
		}
		if _, err := path.Match(el, ""); err != nil {
			return fmt.Errorf("glob %q: %w", glob, err)
		}
	}
	return nil
}

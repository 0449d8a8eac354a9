package config

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/ct"
	"github.com/certwatch/certwatch/policy"
)

// CT configures the Certificate Transparency source: Static CT API logs
// (c2sp.org/static-ct-api) read for the certificates issued for the
// watched domains, reconciled with what is deployed.
type CT struct {
	// Logs are the logs read, each with its monitoring prefix, checkpoint
	// origin and public key (as CT log lists publish them).
	Logs []CTLog `yaml:"logs,omitempty"`
	// LogList reads the logs of a CT log list (v3 schema) at each
	// discovery, besides Logs: "builtin" (the list shipped with
	// certwatch), or {url: ...} or {file: ...} for a newer one.
	LogList *CTLogList `yaml:"log_list,omitempty"`
	// Domains are watched besides the configured zones: a certificate
	// naming one of them, or a name below one, is kept.
	Domains []string `yaml:"domains,omitempty"`
	// ExpectedIssuers are the CAs expected to issue for the watched
	// domains: each the issuing CA's subject organization or common name,
	// exactly (case aside), or the hex SHA-256 of its public key
	// (SubjectPublicKeyInfo). A certificate from any other issuer is
	// unexpected_issuer. Empty: the issuer is not checked.
	ExpectedIssuers []string `yaml:"expected_issuers,omitempty"`
	// Start is where a log certwatch has no position for is first read
	// from: "end" (only what is logged from then on) or a number of
	// entries before the end. `certwatch scan` keeps no position, so it
	// always reads from here.
	Start string `yaml:"start"`
	// ProbeNames probes the names certificates in CT carry (port by
	// port of ports) although no zone or other source lists them.
	ProbeNames bool `yaml:"probe_names"`
	// Grace is how long a certificate logged in CT may go undeployed
	// while an endpoint serves an older one for its names before that
	// endpoint is a stale_deployment.
	Grace Duration `yaml:"grace"`
	// UnexpectedIssuer is the tier of unexpected_issuer; "none" turns
	// the check off.
	UnexpectedIssuer policy.Tier `yaml:"unexpected_issuer"`
	// Timeout bounds each request to a log; Parallelism is how many data
	// tiles of a log are fetched at once.
	Timeout     Duration `yaml:"timeout"`
	Parallelism int      `yaml:"parallelism"`
	// MaxBehind is how many entries of a log may be left unread at the
	// end of a discovery before it is ct_behind; 0 turns it off.
	MaxBehind int64 `yaml:"max_behind"`
}

// CTLog is one Static CT log.
type CTLog struct {
	// URL is the log's monitoring prefix, e.g.
	// https://tuscolo2026h1.sunlight.geomys.org/.
	URL string `yaml:"url"`
	// Origin is its checkpoint origin, e.g. tuscolo2026h1.sunlight.geomys.org.
	Origin string `yaml:"origin"`
	// Key is its public key: the base64 of the DER SubjectPublicKeyInfo.
	Key string `yaml:"key"`
}

// CTLogList is where a CT log list is read: the built-in list, a URL or a
// file.
type CTLogList struct {
	Builtin bool   `yaml:"-"`
	URL     string `yaml:"url,omitempty"`
	File    string `yaml:"file,omitempty"`
	// word is a scalar other than builtin, refused by Validate.
	word string
}

// ctLogListBuiltin is the word for the shipped list.
const ctLogListBuiltin = "builtin"

// UnmarshalYAML reads "builtin" or a mapping {url, file}.
func (l *CTLogList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = CTLogList{Builtin: n.Value == ctLogListBuiltin, word: n.Value}
		return nil
	}
	type plain CTLogList
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*l = CTLogList(p)
	return nil
}

// MarshalYAML writes builtin, or the mapping.
func (l CTLogList) MarshalYAML() (any, error) {
	if l.Builtin {
		return ctLogListBuiltin, nil
	}
	type plain CTLogList
	return plain(l), nil
}

// Source is where the CT source reads the list.
func (l *CTLogList) Source() *ct.LogListSource {
	return &ct.LogListSource{Builtin: l.Builtin, URL: l.URL, File: l.File}
}

// CT defaults.
const (
	DefaultCTStart       = 100000
	DefaultCTGrace       = 48 * time.Hour
	DefaultCTMaxBehind   = 1000000
	MaxCTParallelism     = 64
	ctStartEnd           = "end"
	ctIssuerKeyHexLength = 64
)

func (c *CT) applyDefaults() {
	*c = CT{
		Start:            strconv.Itoa(DefaultCTStart),
		Grace:            Duration(DefaultCTGrace),
		UnexpectedIssuer: policy.Page,
		Timeout:          Duration(ct.DefaultTimeout),
		Parallelism:      ct.DefaultParallelism,
		MaxBehind:        DefaultCTMaxBehind,
	}
}

// Enabled reports whether any log, or a log list, is configured.
func (c *CT) Enabled() bool { return len(c.Logs) > 0 || c.LogList != nil }

// StartBack is how many entries before a log's end its first read starts
// (0 for "end"); Start is validated at load.
func (c *CT) StartBack() int64 {
	if c.Start == ctStartEnd {
		return 0
	}
	n, _ := strconv.ParseInt(c.Start, 10, 64)
	return n
}

// CTDomains returns the domains CT is read for: ct.domains and the
// configured zones, normalised, once each (a zone that is not a domain of
// two labels or more is left out).
func (c *Config) CTDomains() []string {
	var out []string
	seen := map[string]bool{}
	add := func(name string) {
		n := discovery.NormalizeName(name)
		if n == "" || seen[n] {
			return
		}
		if _, err := ct.NewDomains([]string{n}); err != nil {
			return
		}
		seen[n] = true
		out = append(out, n)
	}
	for _, d := range c.CT.Domains {
		add(d)
	}
	for _, z := range c.Zones {
		add(z.Name)
	}
	return out
}

// CTLogs returns the configured logs with their keys parsed; Validate has
// checked them.
func (c *CT) CTLogs() ([]ct.Log, error) {
	out := make([]ct.Log, 0, len(c.Logs))
	for i, l := range c.Logs {
		key, err := ct.ParseKey(l.Key)
		if err != nil {
			return nil, fmt.Errorf("ct: logs[%d]: key: %w", i, err)
		}
		out = append(out, ct.Log{URL: l.URL, Origin: l.Origin, Key: key})
	}
	return out, nil
}

// IsIssuerKeyHash reports whether an expected issuer is written as the hex
// SHA-256 of the issuer's public key rather than as a name.
func IsIssuerKeyHash(s string) bool {
	if len(s) != ctIssuerKeyHexLength {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ctProblems reports what is wrong with the ct section.
func (c *Config) ctProblems() []error {
	var errs []error
	t := &c.CT
	add := func(path, format string, args ...any) {
		errs = append(errs, fieldf(join("ct", path), "ct: "+format, args...))
	}
	if !t.Enabled() && (len(t.Domains) > 0 || len(t.ExpectedIssuers) > 0 || t.ProbeNames) {
		add("logs", "logs: at least one log is required to watch domains in Certificate Transparency (url, origin and key of each, as CT log lists publish them), or log_list: builtin")
	}
	seen := map[string]bool{}
	for i, l := range t.Logs {
		p := fmt.Sprintf("logs[%d]", i)
		u, err := url.Parse(l.URL)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "":
			add(p+".url", "%s: url %q: want the log's monitoring prefix, e.g. https://tuscolo2026h1.sunlight.geomys.org/", p, shorten(l.URL))
		case seen[l.URL]:
			add(p+".url", "%s: url %s is listed twice", p, l.URL)
		}
		seen[l.URL] = true
		if strings.TrimSpace(l.Origin) == "" {
			add(p+".origin", "%s: origin is required: the first line of the log's checkpoint, e.g. tuscolo2026h1.sunlight.geomys.org", p)
		}
		if _, err := ct.ParseKey(l.Key); err != nil {
			add(p+".key", "%s: key: %v", p, err)
		}
	}
	if l := t.LogList; l != nil {
		switch {
		case l.word != "" && !l.Builtin:
			add("log_list", "log_list: want builtin (the list shipped with certwatch), or url or file, got %q", shorten(l.word))
		case l.Builtin:
		case (l.URL == "") == (l.File == ""):
			add("log_list", "log_list: give one of url or file (a CT log list in the v3 schema), or write log_list: builtin")
		case l.URL != "":
			if u, err := url.Parse(l.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				add("log_list.url", "log_list: url %q: want an http(s) URL, e.g. https://www.gstatic.com/ct/log_list/v3/log_list.json", shorten(l.URL))
			}
		default:
			// Read now as each discovery will: check-config refuses it too.
			if _, err := ct.ReadLogListFile(l.File); err != nil {
				add("log_list.file", "log_list: file: %v", err)
			}
		}
	}
	for i, d := range t.Domains {
		if _, err := ct.NewDomains([]string{d}); err != nil {
			add(fmt.Sprintf("domains[%d]", i), "domains: %v", err)
		}
	}
	if t.Enabled() && len(c.CTDomains()) == 0 {
		add("domains", "domains: no domain to watch: list ct.domains, or zones (every configured zone is watched in CT)")
	}
	for i, e := range t.ExpectedIssuers {
		if strings.TrimSpace(e) == "" {
			add(fmt.Sprintf("expected_issuers[%d]", i), "expected_issuers: an empty issuer (want the issuing CA's organization or common name, or the hex SHA-256 of its public key)")
		}
	}
	if t.Start != ctStartEnd {
		if n, err := strconv.ParseInt(t.Start, 10, 64); err != nil || n < 0 {
			add("start", "start: want end or a number of entries before the end of each log (e.g. 100000), got %q", shorten(t.Start))
		}
	}
	if t.Grace < 0 {
		add("grace", "grace must not be negative, got %v", t.Grace)
	}
	if t.Timeout <= 0 {
		add("timeout", "timeout must be positive, got %v", t.Timeout)
	}
	if t.Parallelism < 1 || t.Parallelism > MaxCTParallelism {
		add("parallelism", "parallelism must be 1 to %d, got %d", MaxCTParallelism, t.Parallelism)
	}
	if t.MaxBehind < 0 {
		add("max_behind", "max_behind must not be negative (0 turns ct_behind off), got %d", t.MaxBehind)
	}
	return errs
}

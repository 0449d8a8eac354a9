package config

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

// ACME configures the lookups of ACME Renewal Information (RFC 9773): for
// each verified leaf, the ACME CA that issued it is asked for the window in
// which it suggests renewing it (renewal_suggested).
type ACME struct {
	// Enabled turns the lookups on (the default) or off.
	Enabled bool `yaml:"enabled"`
	// BuiltinDirectories keeps the public ACME CAs certwatch knows (Let's
	// Encrypt, Google Trust Services).
	BuiltinDirectories bool `yaml:"builtin_directories"`
	// Directories are more ACME CAs (a private step-ca, say): each
	// directory URL and the issuers (the issuing certificate's subject
	// organization or common name, exactly) whose leaves it issued.
	Directories []ACMEDirectory `yaml:"directories,omitempty"`
	// Timeout bounds one request.
	Timeout Duration `yaml:"timeout"`
	// RenewalSuggested is the tier of renewal_suggested once the CA's
	// window has ended (notice, then warning, before); "none" turns the
	// check off.
	RenewalSuggested policy.Tier `yaml:"renewal_suggested"`
}

// ACMEDirectory is one ACME CA asked for renewal information.
type ACMEDirectory struct {
	// URL is the https URL of its directory, without a user or password;
	// its query is kept but never printed (probes.RedactURL).
	URL     string   `yaml:"url"`
	Issuers []string `yaml:"issuers"`
}

// MarshalYAML writes d with its URL redacted, as check-config prints it:
// a token in the URL's query stays out of the output.
func (d ACMEDirectory) MarshalYAML() (any, error) {
	type plain ACMEDirectory // without this method
	return plain{URL: probes.RedactURL(d.URL), Issuers: d.Issuers}, nil
}

func (a *ACME) applyDefaults() {
	*a = ACME{Enabled: true, BuiltinDirectories: true, Timeout: Duration(10e9), RenewalSuggested: policy.Page}
}

func (a *ACME) validate() []error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, fieldf(join("acme", path), "acme: "+format, args...))
	}
	if a.Timeout <= 0 {
		add("timeout", "timeout must be positive, got %v", a.Timeout)
	}
	for i, d := range a.Directories {
		path := fmt.Sprintf("directories[%d]", i)
		shown := probes.RedactURL(d.URL)
		switch u, err := url.Parse(d.URL); {
		case err != nil || u.Scheme != "https" || u.Host == "":
			add(path+".url", "directories[%d]: url %q: want the https URL of an ACME directory", i, shorten(shown))
		case u.User != nil:
			add(path+".url", "directories[%d]: url %q: remove the user and password: renewal information is public, asked without credentials (RFC 9773), and the URL is repeated in findings and errors", i, shorten(shown))
		}
		if len(d.Issuers) == 0 {
			add(path+".issuers", "directories[%d]: issuers: required (the issuing certificate's subject organization or common name): a CA is never guessed", i)
		}
		for j, is := range d.Issuers {
			if strings.TrimSpace(is) == "" {
				add(fmt.Sprintf("%s.issuers[%d]", path, j), "directories[%d]: issuers[%d]: empty: it would match every issuing certificate without an organization or common name; name the issuer", i, j)
			}
		}
	}
	return errs
}

package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/certwatch/certwatch/discovery/dnszone"
)

// This file is the environment step of validation: what a configuration
// names outside itself (secrets in variables and files, CA files,
// kubeconfigs, the state's directory) checked the way `certwatch run`
// reads each at start, so `certwatch check-config` refuses what run
// would. It reads; it writes, dials and resolves nothing.

// EnvironmentProblems reports every setting of c whose variable or file
// cannot be used as `certwatch run` uses it at start: a variable unset or
// empty, a file missing, unreadable or empty, a TSIG secret that is not
// base64, a CA file without a certificate, a missing kubeconfig, a SQLite
// state whose directory does not exist. getenv reads a variable (nil:
// os.Getenv); an empty value counts as unset, as at start. Each problem
// is a *FieldError at the key that names the variable or file; Report
// puts them at their lines.
func (c *Config) EnvironmentProblems(getenv func(string) string) []error {
	if getenv == nil {
		getenv = os.Getenv
	}
	var errs []error
	secret := func(ref secretRef) Secret {
		s, err := ref.read(getenv)
		if err != nil {
			errs = append(errs, err)
		}
		return s
	}
	for i, f := range c.CAFiles {
		if err := AppendCAFile(x509.NewCertPool(), f); err != nil {
			errs = append(errs, fieldf(fmt.Sprintf("ca_files[%d]", i), "ca_files: %v", err))
		}
	}
	for i, f := range c.Files {
		secret(secretRef{path: fmt.Sprintf("files[%d]", i), what: fmt.Sprintf("files[%d]: passphrase", i),
			file: f.PassphraseFile, fileKey: "passphrase_file", env: f.PassphraseEnv, envKey: "passphrase_env"})
	}
	for i, z := range c.Zones {
		errs = append(errs, zoneEnvironment(z, fmt.Sprintf("zones[%d]", i), getenv)...)
	}
	for i, k := range c.Kubernetes {
		if k.Kubeconfig == "" {
			continue // the default kubeconfig or the pod's: the source checks them when it is built
		}
		if err := readableFile(k.Kubeconfig); err != nil {
			errs = append(errs, fieldf(fmt.Sprintf("kubernetes[%d].kubeconfig", i), "kubernetes %s: kubeconfig: %v", k.ClusterName(), err))
		}
	}
	n := c.Notify
	if StateIsPostgres(n.State) {
		secret(secretRef{path: "notify", what: "notify: state password",
			file: n.StatePasswordFile, fileKey: "state_password_file", env: n.StatePasswordEnv, envKey: "state_password_env"})
	} else if dir := filepath.Dir(n.State); strings.TrimSpace(n.State) != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			errs = append(errs, fieldf("notify.state", "notify: state: directory %s does not exist: create it (certwatch creates the state file, not its directory)", dir))
		}
	}
	for i, ch := range n.Channels {
		if ref, ok := ch.secretRef(fmt.Sprintf("notify.channels[%d]", i)); ok {
			secret(ref)
		}
	}
	if h := c.Daemon.Heartbeat; h.URLFile != "" || h.URLEnv != "" {
		if u := secret(secretRef{path: "daemon.heartbeat", what: "daemon: heartbeat: url",
			file: h.URLFile, fileKey: "url_file", env: h.URLEnv, envKey: "url_env"}); u != "" && !httpURL(u.Reveal()) {
			key := "daemon.heartbeat." + cmpKey(h.URLFile != "", "url_file", "url_env")
			errs = append(errs, fieldf(key, "daemon: heartbeat: %s: not an http:// or https:// URL", strings.TrimPrefix(key, "daemon.heartbeat.")))
		}
	}
	if sv := c.Serve; sv.SilenceTokenFile != "" || sv.SilenceTokenEnv != "" {
		key := "serve." + cmpKey(sv.SilenceTokenFile != "", "silence_token_file", "silence_token_env")
		tok := secret(secretRef{path: "serve", what: key,
			file: sv.SilenceTokenFile, fileKey: "silence_token_file", env: sv.SilenceTokenEnv, envKey: "silence_token_env"})
		if n := len(tok.Reveal()); n > 0 && n < MinSilenceToken {
			errs = append(errs, fieldf(key, "%s: the token has %d bytes, fewer than the %d required: make a random one (openssl rand -hex 16)", key, n, MinSilenceToken))
		}
	}
	return errs
}

// zoneEnvironment checks the TSIG secret of zone z, at path: readable,
// and base64 that makes a key with its name and algorithm.
func zoneEnvironment(z Zone, path string, getenv func(string) string) []error {
	t := z.TSIG
	if t == nil || (t.SecretFile == "" && t.SecretEnv == "") || t.Name == "" || t.Algorithm == "" {
		return nil // no secret outside the file, or Validate says what is missing
	}
	ref := secretRef{path: path + ".tsig", what: "zone " + z.Name + ": tsig",
		file: t.SecretFile, fileKey: "secret_file", env: t.SecretEnv, envKey: "secret_env"}
	s, err := ref.read(getenv)
	if err != nil {
		return []error{err}
	}
	key := dnszone.TSIG{Name: t.Name, Algorithm: t.Algorithm, Secret: s.Reveal()}
	var errs []error
	if err := key.Check(); err != nil {
		for _, e := range splitJoined(err) {
			errs = append(errs, fieldf(ref.at(), "zone %s: %s: %v", z.Name, ref.source(), e))
		}
	}
	return errs
}

// secretRef is a secret given by a file or a variable: the section at
// path, named what in messages, and the keys of each.
type secretRef struct {
	path, what    string
	file, fileKey string
	env, envKey   string
}

// read reads the secret as ReadSecret does, with the error at the key
// that names the file or variable read.
func (r secretRef) read(getenv func(string) string) (Secret, error) {
	s, err := readSecret(getenv, r.what, "", r.file, r.env)
	if err != nil {
		return "", fieldf(r.at(), "%v", err)
	}
	return s, nil
}

// at is the path of the key read: the file's key when both are set, as
// ReadSecret reads the file.
func (r secretRef) at() string {
	return join(r.path, cmpKey(r.file != "", r.fileKey, r.envKey))
}

// source says where the secret came from, for messages about its value.
func (r secretRef) source() string {
	if r.file != "" {
		return r.fileKey + " " + r.file
	}
	return r.envKey + " " + r.env
}

func cmpKey(first bool, a, b string) string {
	if first {
		return a
	}
	return b
}

// secretRef is the reference to the channel's credential, at path; false
// for a channel without one (log, alertmanager) or without its section.
func (c Channel) secretRef(path string) (secretRef, bool) {
	what := "notify: channel " + c.Name
	switch {
	case c.Kind == ChannelSlack && c.Slack != nil:
		return secretRef{path: path + ".slack", what: what + ": slack token",
			file: c.Slack.TokenFile, fileKey: "token_file", env: c.Slack.TokenEnv, envKey: "token_env"}, true
	case c.Kind == ChannelPagerDuty && c.PagerDuty != nil:
		return secretRef{path: path + ".pagerduty", what: what + ": pagerduty routing key",
			file: c.PagerDuty.RoutingKeyFile, fileKey: "routing_key_file", env: c.PagerDuty.RoutingKeyEnv, envKey: "routing_key_env"}, true
	case c.Kind == ChannelWebhook && c.Webhook != nil:
		return secretRef{path: path + ".webhook", what: what + ": webhook secret",
			file: c.Webhook.SecretFile, fileKey: "secret_file", env: c.Webhook.SecretEnv, envKey: "secret_env"}, true
	}
	return secretRef{}, false
}

// httpURL reports whether s is an absolute http:// or https:// URL.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// readableFile reports whether path is a regular file that can be opened
// for reading. The error names path.
func readableFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fileError(path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fileError(path, err)
	}
	return f.Close()
}

// fileError says why path cannot be read, in words.
func fileError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s cannot be read by this user (permission denied)", path)
	}
	return err
}

// AppendCAFile adds the certificates of the PEM file path to pool: the
// roots of ca_files and --ca-file. A file without one is an error naming
// path.
func AppendCAFile(pool *x509.CertPool, path string) error {
	if err := readableFile(path); err != nil {
		return err
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return fileError(path, err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s: no PEM certificate found; want one or more -----BEGIN CERTIFICATE----- blocks", path)
	}
	return nil
}

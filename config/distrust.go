package config

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DistrustEntry is one CA that browsers distrust after a date, as
// policy.distrust_file lists them (a YAML list; see config.example.yaml):
// the CA's name, the SHA-256 of its keys' SubjectPublicKeyInfo (roots or
// intermediates), the browsers, the rule (earliest_sct: the leaf's earliest
// embedded SCT, as Chrome judges; not_before: its NotBefore, as Mozilla
// does) and the last day (YYYY-MM-DD, UTC) a leaf may be dated and still be
// trusted.
type DistrustEntry struct {
	CA         string   `yaml:"ca"`
	SPKISHA256 []string `yaml:"spki_sha256"`
	Browsers   []string `yaml:"browsers"`
	Rule       string   `yaml:"rule"`
	After      string   `yaml:"after"`
	Reference  string   `yaml:"reference,omitempty"`
}

// maxDistrustFile bounds policy.distrust_file.
const maxDistrustFile = 1 << 20

// LoadDistrust reads and checks a distrust file.
func LoadDistrust(path string) ([]DistrustEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: distrust_file: %w", err)
	}
	if len(b) > maxDistrustFile {
		return nil, fmt.Errorf("policy: distrust_file %s: %d bytes, more than the %d allowed", path, len(b), maxDistrustFile)
	}
	var entries []DistrustEntry
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("policy: distrust_file %s: %v (want a list of entries with ca, spki_sha256, browsers, rule and after)", path, cleanYAMLError(err))
	}
	var problems []string
	for i, e := range entries {
		where := fmt.Sprintf("entry %d", i+1)
		if e.CA != "" {
			where += fmt.Sprintf(" (%s)", shorten(e.CA))
		}
		if e.CA == "" {
			problems = append(problems, where+": ca: required (the CA's name, for messages)")
		}
		if len(e.SPKISHA256) == 0 {
			problems = append(problems, where+": spki_sha256: required (the SHA-256 of the CA certificate's SubjectPublicKeyInfo, 64 hex digits: openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | sha256sum)")
		}
		for _, h := range e.SPKISHA256 {
			if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
				problems = append(problems, fmt.Sprintf("%s: spki_sha256: %q is not 64 hex digits", where, shorten(h)))
			}
		}
		if len(e.Browsers) == 0 {
			problems = append(problems, where+": browsers: required (who distrusts it, e.g. [Chrome])")
		}
		if e.Rule != "earliest_sct" && e.Rule != "not_before" {
			problems = append(problems, fmt.Sprintf("%s: rule: %q, want earliest_sct or not_before", where, shorten(e.Rule)))
		}
		if _, err := time.Parse(time.DateOnly, e.After); err != nil {
			problems = append(problems, fmt.Sprintf("%s: after: %q is not a date (YYYY-MM-DD)", where, shorten(e.After)))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("policy: distrust_file %s: %s", path, strings.Join(problems, "; "))
	}
	return entries, nil
}

package config

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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

// LoadDistrust reads and checks a distrust file: one YAML document, a list
// of at least one entry, each entry complete. It reads at most
// maxDistrustFile bytes (and one more, to know the file is longer), from a
// regular file only. Its errors name the file, and the line and number of
// the entry at fault.
func LoadDistrust(path string) ([]DistrustEntry, error) {
	b, err := readDistrust(path)
	if err != nil {
		return nil, err
	}
	const want = "want one list of entries with ca, spki_sha256, browsers, rule and after"
	var entries []DistrustEntry
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("policy: distrust_file %s: empty (%s)", path, want)
		}
		return nil, fmt.Errorf("policy: distrust_file %s: %v (%s)", path, cleanYAMLError(err, nil), want)
	}
	// A second document would be read by no one: refuse it rather than
	// leave entries unchecked and unused.
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		line := ""
		if err == nil {
			line = fmt.Sprintf(" at line %d", second.Line)
		}
		return nil, fmt.Errorf("policy: distrust_file %s: a second YAML document%s (%s: remove the --- separator)", path, line, want)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("policy: distrust_file %s: no entries (%s; to use only the built-in list, remove policy.distrust_file)", path, want)
	}
	var root yaml.Node // the entries' lines
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("policy: distrust_file %s: %v", path, err)
	}
	var items []*yaml.Node
	if len(root.Content) == 1 && root.Content[0].Kind == yaml.SequenceNode {
		items = root.Content[0].Content
	}
	var problems []string
	for i, e := range entries {
		n := &yaml.Node{}
		if i < len(items) {
			n = items[i]
		}
		problems = append(problems, distrustProblems(i, e, n)...)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("policy: distrust_file %s: %s", path, strings.Join(problems, "; "))
	}
	return entries, nil
}

// readDistrust reads the distrust file at path, at most maxDistrustFile
// bytes of a regular file.
func readDistrust(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: distrust_file: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("policy: distrust_file %s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxDistrustFile+1))
	if err != nil {
		return nil, fmt.Errorf("policy: distrust_file %s: %w", path, err)
	}
	if len(b) > maxDistrustFile {
		return nil, fmt.Errorf("policy: distrust_file %s: more than the %d bytes allowed", path, maxDistrustFile)
	}
	return b, nil
}

// distrustProblems says what is wrong with e, entry i of the file, read
// from node n: "line 4, entry 1 (Example CA): rule: ...".
func distrustProblems(i int, e DistrustEntry, n *yaml.Node) []string {
	at := func(key string) string {
		line := n.Line
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == key {
				line = n.Content[k].Line
			}
		}
		s := fmt.Sprintf("line %d, entry %d", line, i+1)
		if e.CA != "" {
			s += fmt.Sprintf(" (%s)", shorten(e.CA))
		}
		return s
	}
	var problems []string
	if e.CA == "" {
		problems = append(problems, at("ca")+": ca: required (the CA's name, for messages)")
	}
	if len(e.SPKISHA256) == 0 {
		problems = append(problems, at("spki_sha256")+": spki_sha256: required (the SHA-256 of the CA certificate's SubjectPublicKeyInfo, 64 hex digits: openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | sha256sum)")
	}
	for _, h := range e.SPKISHA256 {
		if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
			problems = append(problems, fmt.Sprintf("%s: spki_sha256: %q is not 64 hex digits", at("spki_sha256"), shorten(h)))
		}
	}
	if len(e.Browsers) == 0 {
		problems = append(problems, at("browsers")+": browsers: required (who distrusts it, e.g. [Chrome])")
	}
	if e.Rule != "earliest_sct" && e.Rule != "not_before" {
		problems = append(problems, fmt.Sprintf("%s: rule: %q, want earliest_sct or not_before", at("rule"), shorten(e.Rule)))
	}
	if _, err := time.Parse(time.DateOnly, e.After); err != nil {
		problems = append(problems, fmt.Sprintf("%s: after: %q is not a date (YYYY-MM-DD)", at("after"), shorten(e.After)))
	}
	return problems
}

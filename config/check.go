package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/miekg/dns"
	"go.yaml.in/yaml/v3"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/dnszone"
	"github.com/certwatch/certwatch/discovery/static"
)

// positions maps a value's path in the YAML document ("targets[1]",
// "zones[0].tsig") to its line, so that checks made after decoding can
// still point at the line. A nil positions knows no lines (a config built
// from flags).
type positions map[string]int

// positionsOf returns the positions of every value in the YAML document
// data, or nil if it does not parse (the decoder reports that).
func positionsOf(data []byte) positions {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || len(root.Content) == 0 {
		return nil
	}
	p := positions{}
	p.walk(root.Content[0], "", root.Content[0].Line)
	return p
}

func (p positions) walk(n *yaml.Node, path string, line int) {
	if path != "" {
		p[path] = line
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if path != "" {
				key = path + "." + key
			}
			p.walk(n.Content[i+1], key, n.Content[i].Line)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p.walk(c, path+"["+strconv.Itoa(i)+"]", c.Line)
		}
	}
}

// checkTargets parses every target as the static source will, so that a
// target scan would reject fails validation (and check-config) instead.
func checkTargets(targets []Target) []error {
	var errs []error
	for i, t := range targets {
		// The ports only fill in targets without one; any valid list will do.
		if _, err := static.New([]string{t.Spec}, nil, nil); err != nil {
			errs = append(errs, &FieldError{Path: fmt.Sprintf("targets[%d]", i), Err: err})
		}
	}
	return errs
}

// checkZone checks what the zone transfer will need of z, the zone at
// path: a domain name, a zone file that can be read (it is not parsed
// here: a bad record fails the pass, as a refused transfer does) and not
// beside a nameserver, and a usable TSIG key. where names the zone in
// messages.
func checkZone(z Zone, path, where string) []error {
	var errs []error
	if name := discovery.NormalizeName(z.Name); name != "" {
		if _, ok := dns.IsDomainName(name); !ok {
			errs = append(errs, fieldf(path+".name", "%s: name %q is not a valid domain name", where, z.Name))
		}
	}
	if z.File != "" {
		if z.Nameserver != "" {
			errs = append(errs, fieldf(path+".file", "%s: file and nameserver: give one (file reads the zone from disk, nameserver transfers it)", where))
		}
		if err := dnszone.CheckFile(z.File); err != nil {
			errs = append(errs, fieldf(path+".file", "%s: file: %v", where, err))
		}
	}
	if t := z.TSIG; t != nil && t.Name != "" {
		key := dnszone.TSIG{Name: t.Name, Algorithm: t.Algorithm, Secret: t.Secret.Reveal()}
		if err := key.Check(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fieldf(path+".tsig", "%s: %w", where, e))
			}
		}
	}
	return errs
}

// checkFilter is discovery.NewFilter's complaint about the include or
// exclude patterns of the section at path, at the list at fault; prefix
// starts its message.
func checkFilter(path, prefix string, include, exclude []string) error {
	if _, err := discovery.NewFilter(include, nil); err != nil {
		return fieldf(join(path, "include"), "%s%v", prefix, err)
	}
	if _, err := discovery.NewFilter(nil, exclude); err != nil {
		return fieldf(join(path, "exclude"), "%s%v", prefix, err)
	}
	return nil
}

// splitJoined returns the errors joined in err, or err itself.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// lineOf returns N for an error message starting "line N: ", or 0.
func lineOf(msg string) int {
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(rest, ":")
	line, err := strconv.Atoi(n)
	if err != nil {
		return 0
	}
	return line
}

package cli

import (
	"maps"
	"net"
	"strings"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
)

// zoneLabels are the labels of one configured zone (apex) or of the Route
// 53 zones matching a glob.
type zoneLabels struct {
	apex   string
	glob   *discovery.Filter // a Route 53 zone glob; apex is then empty
	labels map[string]string
}

// in reports whether name lies in the zone: below the apex, or below (or
// at) a domain the glob matches.
func (z *zoneLabels) in(name string) bool {
	if z.glob == nil {
		return discovery.InZone(name, z.apex)
	}
	for d := name; d != ""; {
		if z.glob.Keep(d) {
			return true
		}
		_, d, _ = strings.Cut(d, ".")
	}
	return false
}

// findingLabels returns the notifier's label function: a finding carries
// the labels of every configured zone one of its endpoints (or, for name
// findings, its name) lies in. Route 53 zones get theirs from
// aws.route53_labels, by zone name glob. Nil when no zone has labels.
func findingLabels(zones []config.Zone, r53 map[string]map[string]string) func(policy.Finding) map[string]string {
	var zs []zoneLabels
	for _, z := range zones {
		if len(z.Labels) > 0 {
			zs = append(zs, zoneLabels{apex: discovery.NormalizeName(z.Name), labels: z.Labels})
		}
	}
	for _, glob := range config.ZoneGlobs(r53) {
		if f, err := discovery.NewFilter([]string{glob}, nil); err == nil { // validated at load
			zs = append(zs, zoneLabels{glob: &f, labels: r53[glob]})
		}
	}
	if len(zs) == 0 {
		return nil
	}
	return func(f policy.Finding) map[string]string {
		names := make([]string, 0, len(f.Endpoints)+1)
		for _, ep := range f.Endpoints {
			names = append(names, ep.Name)
		}
		if f.Name != "" {
			host := f.Name
			if h, _, err := net.SplitHostPort(f.Name); err == nil {
				host = h
			}
			names = append(names, host)
		}
		var out map[string]string
		for i := range zs {
			z := &zs[i]
			for _, n := range names {
				if z.in(discovery.NormalizeName(n)) {
					if out == nil {
						out = map[string]string{}
					}
					maps.Copy(out, z.labels)
					break
				}
			}
		}
		return out
	}
}

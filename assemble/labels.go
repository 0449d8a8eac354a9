package assemble

import (
	"context"
	"maps"
	"net"
	"strconv"
	"strings"

	"github.com/certwatch/certwatch/config"
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/static"
	"github.com/certwatch/certwatch/policy"
)

// Labels returns the notifier's label function of c: the labels of its
// zones, Route 53 zones and static targets a finding lies in (see
// findingLabels). Nil when nothing has labels.
func Labels(c config.Config) func(policy.Finding) map[string]string {
	return findingLabels(c.Zones, c.AWS.Route53Labels, targetLabels(&c))
}

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

// targetLabels maps the endpoints ("name:port", as discovery.Target.Key)
// of each static target with labels to its labels, parsed by the static
// source as the scan will, so a target without a port labels it on every
// default port. Targets sharing an endpoint merge their labels.
func targetLabels(c *config.Config) map[string]map[string]string {
	var out map[string]map[string]string
	for _, t := range c.Targets {
		if len(t.Labels) == 0 {
			continue
		}
		s, err := static.New([]string{t.Spec}, c.Ports.Numbers(), nil)
		if err != nil {
			continue // validated at load
		}
		ts, _ := s.Targets(context.Background()) // no I/O, never fails
		for _, dt := range ts {
			if out == nil {
				out = map[string]map[string]string{}
			}
			if out[dt.Key()] == nil {
				out[dt.Key()] = map[string]string{}
			}
			maps.Copy(out[dt.Key()], t.Labels)
		}
	}
	return out
}

// findingLabels returns the notifier's label function: a finding carries
// the labels of every configured zone one of its endpoints (or, for name
// findings, its name) lies in. Route 53 zones get theirs from
// aws.route53_labels, by zone name glob; static targets theirs from
// targets[].labels (targetLabels), by endpoint. Nil when nothing has labels.
func findingLabels(zones []config.Zone, r53 map[string]map[string]string, targets map[string]map[string]string) func(policy.Finding) map[string]string {
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
	if len(zs) == 0 && len(targets) == 0 {
		return nil
	}
	return func(f policy.Finding) map[string]string {
		var out map[string]string
		add := func(l map[string]string) {
			if len(l) > 0 && out == nil {
				out = map[string]string{}
			}
			maps.Copy(out, l)
		}
		names := make([]string, 0, len(f.Endpoints)+1)
		keys := make([]string, 0, len(f.Endpoints)+1)
		for _, ep := range f.Endpoints {
			names = append(names, ep.Name)
			keys = append(keys, net.JoinHostPort(discovery.NormalizeName(ep.Name), strconv.Itoa(ep.Port)))
		}
		if f.Name != "" {
			host := f.Name
			if h, p, err := net.SplitHostPort(f.Name); err == nil {
				host = h
				keys = append(keys, net.JoinHostPort(discovery.NormalizeName(h), p))
			}
			names = append(names, host)
		}
		for i := range zs {
			z := &zs[i]
			for _, n := range names {
				if z.in(discovery.NormalizeName(n)) {
					add(z.labels)
					break
				}
			}
		}
		// A target's own labels are the more specific: they win over its
		// zone's.
		for _, k := range keys {
			add(targets[k])
		}
		return out
	}
}

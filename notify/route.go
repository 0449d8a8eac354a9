package notify

import (
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
)

// router maps a finding and a tier to channels.
type router struct {
	routes []route
	// byTier, when no route selects findings by zone, name or label, is
	// where a finding goes at each tier (targets) and those channels
	// sorted, built once: a run asks it for every open alert, and a map
	// and a list for each were tens of megabytes a run at fleet size.
	// Callers only read them.
	byTier map[policy.Tier]routed
}

// routed is where a finding goes: targets' channels, each with whether it
// goes there in the digest, and their names sorted.
type routed struct {
	targets  map[string]bool
	channels []string
}

type route struct {
	tiers    map[policy.Tier]bool
	channels []string
	digest   bool
	specific bool
	zones    []string
	names    discovery.Filter
	hasNames bool
	labels   map[string]string
}

func newRouter(cfg []Route) (router, error) {
	var r router
	for i, c := range cfg {
		rt := route{tiers: map[policy.Tier]bool{}, channels: c.Channels, digest: c.Digest,
			specific: len(c.Zones)+len(c.Names)+len(c.Labels) > 0, labels: c.Labels}
		for _, t := range c.Tiers {
			rt.tiers[t] = true
		}
		for _, z := range c.Zones {
			rt.zones = append(rt.zones, discovery.NormalizeName(z))
		}
		if len(c.Names) > 0 {
			f, err := discovery.NewFilter(c.Names, nil)
			if err != nil {
				return router{}, fmt.Errorf("notify: routes[%d]: match: names: %w", i, err)
			}
			rt.names, rt.hasNames = f, true
		}
		r.routes = append(r.routes, rt)
	}
	if !slices.ContainsFunc(r.routes, func(rt route) bool { return rt.specific }) {
		r.byTier = map[policy.Tier]routed{}
		for t := policy.None; t <= policy.Critical; t++ {
			r.byTier[t] = r.routedAt(policy.Finding{}, t, nil)
		}
	}
	return r, nil
}

// route is where f goes at its tier; labels gives f's labels, asked only
// when a route selects by them.
func (r router) route(f policy.Finding, labels func(policy.Finding) map[string]string) routed {
	if rt, ok := r.byTier[f.Tier]; ok {
		return rt
	}
	return r.routedAt(f, f.Tier, labels(f))
}

func (r router) routedAt(f policy.Finding, tier policy.Tier, labels map[string]string) routed {
	t := r.targets(f, tier, labels)
	return routed{targets: t, channels: slices.Sorted(maps.Keys(t))}
}

// targets returns the channels a finding at tier goes to, each with whether
// it goes there in the digest. Routes whose match selects the finding win
// over routes without a match; a channel reached both ways is sent to at
// once rather than in the digest.
func (r router) targets(f policy.Finding, tier policy.Tier, labels map[string]string) map[string]bool {
	var specific, general []route
	for _, rt := range r.routes {
		if !rt.tiers[tier] {
			continue
		}
		if !rt.specific {
			general = append(general, rt)
		} else if rt.matches(f, labels) {
			specific = append(specific, rt)
		}
	}
	use := general
	if len(specific) > 0 {
		use = specific
	}
	out := map[string]bool{}
	for _, rt := range use {
		for _, c := range rt.channels {
			digest, seen := out[c]
			out[c] = rt.digest && (!seen || digest)
		}
	}
	return out
}

// names a finding is known by: its endpoint names, subject and, for name
// findings, the host part of Name.
func findingNames(f policy.Finding) []string {
	names := make([]string, 0, len(f.Endpoints)+2)
	for _, e := range f.Endpoints {
		names = append(names, e.Name)
	}
	if f.Subject != "" {
		names = append(names, f.Subject)
	}
	if f.Name != "" {
		host := f.Name
		if h, _, err := net.SplitHostPort(f.Name); err == nil {
			host = h
		}
		names = append(names, host)
	}
	return names
}

func (rt route) matches(f policy.Finding, labels map[string]string) bool {
	names := findingNames(f)
	if len(rt.zones) > 0 && !anyName(names, func(n string) bool {
		n = discovery.NormalizeName(n)
		for _, z := range rt.zones {
			if discovery.InZone(n, z) {
				return true
			}
		}
		return false
	}) {
		return false
	}
	if rt.hasNames && !anyName(names, rt.names.Keep) {
		return false
	}
	for k, v := range rt.labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func anyName(names []string, ok func(string) bool) bool {
	for _, n := range names {
		if ok(n) {
			return true
		}
	}
	return false
}

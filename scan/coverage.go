package scan

import (
	"cmp"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/ctcert"
	"github.com/certwatch/certwatch/policy"
)

// Coverage says what a pass watched and what it did not: per source, the
// targets, names and endpoints it gave and the certificates found there;
// the zones read whole; the certificates held at rest by kind of place;
// and every coverage gap with its reason. It is the
// `coverage` object of `certwatch scan --output json`, and all of
// `certwatch coverage --output json`.
type Coverage struct {
	Sources []CoverageSource `json:"sources"`
	// Zones are the DNS zones read whole: transferred, followed from a
	// delegation, or hosted in Route 53.
	Zones []CoverageZone `json:"zones"`
	// AtRest counts the certificates held at rest by kind of location
	// (file, keystore, kubeconfig, secret, configmap, webhook,
	// apiservice, crd, certificate), by kind; empty without any.
	AtRest []CoverageAtRest `json:"at_rest"`
	// Gaps are what is not watched, by reason and zone.
	Gaps []policy.Gap `json:"gaps"`
	// GapsByReason counts the gaps by reason.
	GapsByReason map[string]int `json:"gaps_by_reason"`
	// CTLogs are the Certificate Transparency logs read and how far
	// (found.Inventory.CTLogs): what ct_behind and
	// certwatch_ct_entries_behind say.
	CTLogs []ctcert.Progress `json:"ct_logs,omitempty"`
}

// CoverageSource is what one source contributed.
type CoverageSource struct {
	Name string `json:"name"`
	// Targets and Names are what its discovery gave: targets (name, port)
	// and distinct names among them.
	Targets int `json:"targets"`
	Names   int `json:"names"`
	// Endpoints are the (name, port, address) probed of its targets;
	// Certificates the distinct leaves they served plus the certificates
	// its inventory holds (ACM, IAM, at rest).
	Endpoints    int    `json:"endpoints"`
	Certificates int    `json:"certificates"`
	Error        string `json:"error,omitempty"`
}

// CoverageAtRest is what is held at rest in one kind of location.
type CoverageAtRest struct {
	// Kind is the kind of location (atrest.Kind).
	Kind string `json:"kind"`
	// Certificates are the distinct certificates held in at least one
	// location of the kind (one in a Secret and a file counts under
	// both); Locations the places of the kind holding one; Served the
	// certificates among them that a probed endpoint serves.
	Certificates int `json:"certificates"`
	Locations    int `json:"locations"`
	Served       int `json:"served"`
}

// CoverageZone is one DNS zone read whole.
type CoverageZone struct {
	Zone string `json:"zone"`
	// Via is how: "transfer" (a configured zone), "delegation" (a child
	// zone followed from Parent) or "route53" (a hosted zone). Parent is
	// set on a zone reached from a delegation: followed from it, or
	// delegated by it and read whole by another source (a Route 53 zone
	// delegating to a hosted zone read too: via route53, parent set).
	Via    string `json:"via"`
	Parent string `json:"parent,omitempty"`
	Source string `json:"source"`
	// Nameservers are the servers a followed child was transferred from.
	Nameservers []string `json:"nameservers,omitempty"`
	// Targets is how many targets the zone itself gave (Route 53: record
	// sets read).
	Targets int `json:"targets"`
}

// coverage builds the pass's coverage from the evaluation's result and
// the inventory; sources fills in the discovery side.
func coverage(res *policy.Result, inv *Inventory) *Coverage {
	c := &Coverage{Gaps: res.Gaps, Sources: []CoverageSource{}, Zones: []CoverageZone{}, AtRest: atRestByKind(res.AtRest), GapsByReason: map[string]int{}}
	if c.Gaps == nil {
		c.Gaps = []policy.Gap{}
	}
	for _, g := range c.Gaps {
		c.GapsByReason[string(g.Reason)]++
	}
	for _, s := range res.Sources {
		c.Sources = append(c.Sources, CoverageSource{Name: s.Name, Endpoints: s.Endpoints, Certificates: s.Certificates})
	}
	if inv != nil {
		c.CTLogs = inv.CTLogs
		for _, w := range inv.Watched {
			via := w.Via
			switch {
			case via != "":
			case w.Parent != "":
				via = "delegation"
			default:
				via = "transfer"
			}
			c.Zones = append(c.Zones, CoverageZone{Zone: w.Zone, Via: via, Parent: w.Parent, Source: w.Source, Nameservers: w.Nameservers, Targets: w.Targets})
		}
		for _, z := range inv.Zones {
			src := found.Route53Source // the source's name: "route53" for the default account
			if z.Account != "" {
				src += ":" + z.Account
			}
			c.Zones = append(c.Zones, CoverageZone{Zone: z.Name, Via: "route53", Source: src, Targets: z.RecordSets})
		}
	}
	slices.SortFunc(c.Zones, func(a, b CoverageZone) int {
		return cmp.Or(strings.Compare(a.Zone, b.Zone), strings.Compare(a.Via, b.Via), strings.Compare(a.Parent, b.Parent), strings.Compare(a.Source, b.Source))
	})
	// One row a zone and way: a zone listed twice (public and private
	// hosted zones of one name, a hosted zone another zone delegates to)
	// keeps the first's source, the larger count and the parent either
	// names.
	out := c.Zones[:0]
	for _, z := range c.Zones {
		if n := len(out); n > 0 && out[n-1].Zone == z.Zone && out[n-1].Via == z.Via {
			out[n-1].Parent = cmp.Or(out[n-1].Parent, z.Parent)
			out[n-1].Targets = max(out[n-1].Targets, z.Targets)
			continue
		}
		out = append(out, z)
	}
	c.Zones = out
	return c
}

// atRestByKind counts the certificates held at rest by kind of location.
func atRestByKind(certs []policy.AtRestCertificate) []CoverageAtRest {
	out := []CoverageAtRest{}
	byKind := map[atrest.Kind]int{}
	var kinds []atrest.Kind // of one certificate, counted once each
	for i := range certs {
		c := &certs[i]
		kinds = kinds[:0]
		for _, l := range c.Locations {
			at, ok := byKind[l.Kind]
			if !ok {
				at = len(out)
				byKind[l.Kind] = at
				out = append(out, CoverageAtRest{Kind: string(l.Kind)})
			}
			out[at].Locations++
			if slices.Contains(kinds, l.Kind) {
				continue
			}
			kinds = append(kinds, l.Kind)
			out[at].Certificates++
			if len(c.Endpoints) > 0 {
				out[at].Served++
			}
		}
	}
	slices.SortFunc(out, func(a, b CoverageAtRest) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// AddSources completes c with what discovery said of each source: its
// targets, names and error, and the certificates its inventory holds.
// The daemon calls it with its own results; Run does for a pass.
func (c *Coverage) AddSources(results []SourceResult) {
	if c == nil {
		return
	}
	for _, r := range results {
		i := slices.IndexFunc(c.Sources, func(s CoverageSource) bool { return s.Name == r.Name })
		if i < 0 {
			c.Sources = append(c.Sources, CoverageSource{Name: r.Name})
			i = len(c.Sources) - 1
		}
		s := &c.Sources[i]
		s.Targets, s.Names, s.Error = r.Targets, r.Names, r.Error
		s.Certificates += r.Certificates
	}
	slices.SortFunc(c.Sources, func(a, b CoverageSource) int { return strings.Compare(a.Name, b.Name) })
}

// countNames counts the distinct names of the targets not skipped: by
// runs where ts is sorted by name (a zone's, merged lists), else with a
// set.
func countNames(ts []discovery.Target) int {
	if slices.IsSortedFunc(ts, func(a, b discovery.Target) int { return strings.Compare(a.Name, b.Name) }) {
		n := 0
		for i := range ts {
			if ts[i].Skip == "" && (i == 0 || ts[i-1].Name != ts[i].Name || ts[i-1].Skip != "") {
				n++
			}
		}
		return n
	}
	seen := map[string]bool{}
	for i := range ts {
		if ts[i].Skip == "" {
			seen[ts[i].Name] = true
		}
	}
	return len(seen)
}

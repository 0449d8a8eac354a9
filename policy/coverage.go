package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
)

// CoverageGap: part of the estate certwatch knows it does not watch: a
// delegated child zone it could not transfer (or that lies beyond a
// bound), names on certificates under a zone no source watches, an ACM
// or IAM certificate in use that no probed endpoint serves, or a
// cert-manager Certificate reporting Ready whose Secret held no
// certificate certwatch read. Its Name is the zone (or the certificate's
// ARN, or "certificate namespace/name"); its Deadline the time of the run.
// The tier depends on the gap (Rules.CoverageDelegation, CoverageNames,
// CoverageUnverified).
const CoverageGap Kind = "coverage_gap"

// Gap is a coverage gap as a report lists it: what a source found it could
// not watch, or what evaluation found no source watches, with the tier of
// its finding.
type Gap struct {
	found.Gap
	// Names are the names on certificates under the zone (unmonitored
	// zones), at most maxGapNames of them; Certificates the certificates
	// naming them, by fingerprint or ARN.
	Names        []string `json:"names,omitempty"`
	Certificates []string `json:"certificates,omitempty"`
	// Tier is the tier of its coverage_gap finding; none when that kind
	// of gap is turned off.
	Tier Tier `json:"tier"`
}

// AddCoverage adds what the sources watched (zones transferred, delegated
// zones followed) and the gaps they found. Result raises a coverage_gap
// finding per gap, at most one per zone, unless the zone is out of scope
// (Rules.OutOfScope).
func (e *Evaluator) AddCoverage(watched []found.WatchedZone, gaps []found.Gap) {
	e.inv.watched = append(e.inv.watched, watched...)
	e.inv.gaps = append(e.inv.gaps, gaps...)
}

// outOfScope reports whether name lies at or below a zone declared out of
// scope.
func (e *Evaluator) outOfScope(name string) bool {
	return slices.ContainsFunc(e.rules.OutOfScope, func(z string) bool { return discovery.InZone(name, z) })
}

// judgeCoverage turns the gaps the sources found into findings, appended
// to fs, and returns the gaps as the report lists them, by reason and
// zone.
func (e *Evaluator) judgeCoverage(fs []Finding) ([]Finding, []Gap) {
	var out []Gap
	seen := map[string]bool{}
	for _, g := range e.inv.gaps {
		if seen[g.Zone] || e.outOfScope(g.Zone) {
			continue // the same gap from two parts of a shared run
		}
		seen[g.Zone] = true
		gap := Gap{Gap: g, Tier: e.rules.CoverageDelegation}
		out = append(out, gap)
		if gap.Tier == None {
			continue
		}
		fs = append(fs, Finding{Kind: CoverageGap, Tier: gap.Tier, Name: g.Zone, Subject: g.Zone, Deadline: At(e.now), Endpoints: []Endpoint{},
			Message: Printable(delegationMessage(&g))})
	}
	return fs, out
}

// delegationMessage says what a delegation gap is and what to do.
func delegationMessage(g *found.Gap) string {
	what := "could not be transferred"
	switch g.Reason {
	case found.GapDelegationRefused:
		what = "refused its transfer"
	case found.GapDelegationTimeout:
		what = "did not finish its transfer in time"
	case found.GapDelegationBroken:
		what = "sent a broken transfer"
	case found.GapDelegationLimit:
		what = "was not followed"
	}
	ns := ""
	if len(g.Nameservers) > 0 {
		ns = " (name servers " + strings.Join(g.Nameservers, ", ") + ")"
	}
	return fmt.Sprintf("zone %s, delegated by %s%s, %s: none of its names are watched, so certificates there can expire unseen: %s; %s",
		g.Zone, g.Parent, ns, what, g.Detail, g.Fix)
}

// maxGapNames bounds the names and certificates a gap lists.
const maxGapNames = 20

// ZoneOf returns the zone a name on a certificate lies in when no SOA
// lookup told otherwise: a wildcard's base ("*.svc.example" lies in
// svc.example), else the name's parent, or the name itself when its
// parent has a single label ("example.com" is its own zone).
func ZoneOf(name string) string {
	if base, ok := strings.CutPrefix(name, "*."); ok {
		return base
	}
	if _, parent, ok := strings.Cut(name, "."); ok && strings.Contains(parent, ".") {
		return parent
	}
	return name
}

// SetZonesOf tells Result the zone of names it asks about
// (UncoveredNames), as an SOA lookup found them; names not in zones lie
// in ZoneOf's guess.
func (e *Evaluator) SetZonesOf(zones map[string]string) { e.zonesOf = zones }

// uncovered is a name on a certificate that no source watches, and the
// certificates (fingerprints, ARNs) naming it.
type uncovered struct {
	name  string
	certs []string
}

// watchedZones returns the zones sources watch: zones transferred,
// delegations followed, Route 53 hosted zones.
func (e *Evaluator) watchedZones() []string {
	var zs []string
	for _, w := range e.inv.watched {
		zs = append(zs, w.Zone)
	}
	for _, z := range e.inv.zones {
		zs = append(zs, z.Name)
	}
	return zs
}

// uncoveredNames lists the DNS names on the certificates certwatch knows
// of (served leaves, at rest, ACM, IAM) that lie under no watched zone, are no
// probed name and are not out of scope, by name. A wildcard is covered
// only by a watched zone: a probed name it matches says nothing of where
// else it is deployed.
//
// Names are judged only where certwatch watches some zone (transferred or
// Route 53): a scan of static targets alone, or of ACM alone, claims no
// namespace, and every name would be a gap.
func (e *Evaluator) uncoveredNames() []uncovered {
	zones := e.watchedZones()
	if len(zones) == 0 {
		return nil
	}
	// UncoveredNames runs before Result, which merges the certificates
	// held at rest: their names are asked about too.
	e.mergeAtRest()
	// The names probed, made when first needed: most names of a fleet's
	// certificates lie in a watched zone, and need not be looked up.
	var probed map[string]bool
	isProbed := func(name string) bool {
		if probed == nil {
			probed = map[string]bool{}
			for i := range e.probed {
				if e.probed[i].Via == "" { // a name asked of a resource: its DNS is not watched
					probed[e.probed[i].Name] = true
				}
			}
		}
		return probed[name]
	}
	byName := map[string][]string{}
	consider := func(name, cert string) {
		name = discovery.NormalizeName(name)
		base := strings.TrimPrefix(name, "*.")
		switch {
		case !strings.Contains(base, "."), isIPLiteral(base), Printable(name) != name:
			return
		case slices.ContainsFunc(zones, func(z string) bool { return discovery.InZone(base, z) }):
			return
		case name == base && isProbed(name):
			return
		case e.outOfScope(base):
			return
		}
		if !slices.Contains(byName[name], cert) {
			byName[name] = append(byName[name], cert)
		}
	}
	for i := range e.certs {
		if !e.certMatched[i] {
			continue // hostname_mismatch says what is wrong there
		}
		for _, n := range e.certs[i].DNSNames {
			consider(n, e.certs[i].SHA256)
		}
	}
	for i := range e.rest {
		for _, n := range e.rest[i].DNSNames {
			consider(n, e.rest[i].SHA256)
		}
	}
	for i := range e.inv.acm {
		c := &e.inv.acm[i]
		consider(c.DomainName, c.ARN)
		for _, n := range c.SubjectAlternativeNames {
			consider(n, c.ARN)
		}
	}
	for i := range e.inv.iam {
		for _, n := range e.inv.iam[i].DNSNames {
			consider(n, e.inv.iam[i].ARN)
		}
	}
	out := make([]uncovered, 0, len(byName))
	for n, certs := range byName {
		slices.Sort(certs)
		out = append(out, uncovered{name: n, certs: certs})
	}
	slices.SortFunc(out, func(a, b uncovered) int { return strings.Compare(a.name, b.name) })
	return out
}

// UncoveredNames returns the names, sorted (wildcards without their
// "*."), whose
// zone Result will ask: the names on certificates under no watched zone.
// A caller that can look zones up (an SOA query through a resolver) hands
// what it found to SetZonesOf before Result. Call it after the last Add
// and the inventory.
func (e *Evaluator) UncoveredNames() []string {
	var out []string
	for _, u := range e.uncoveredNames() {
		if n := strings.TrimPrefix(u.name, "*."); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// judgeUncovered raises one coverage_gap per zone that names on
// certificates lie under and no source watches, appended to fs; gaps
// are the gaps so far (a zone that already has one, a delegation that
// failed, gets no second).
func (e *Evaluator) judgeUncovered(fs []Finding, gaps []Gap) ([]Finding, []Gap) {
	us := e.uncoveredNames()
	if len(us) == 0 {
		return fs, gaps
	}
	type zoneGap struct {
		names, certs []string
	}
	byZone := map[string]*zoneGap{}
	var order []string
	for _, u := range us {
		base := strings.TrimPrefix(u.name, "*.")
		z, ok := e.zonesOf[base]
		if !ok || z == "" {
			z = ZoneOf(u.name)
		} else if u.name != base && !discovery.InZone(base, z) {
			z = ZoneOf(u.name)
		}
		if e.outOfScope(z) || slices.ContainsFunc(gaps, func(g Gap) bool { return g.Zone == z }) {
			continue
		}
		g := byZone[z]
		if g == nil {
			g = &zoneGap{}
			byZone[z] = g
			order = append(order, z)
		}
		g.names = append(g.names, u.name)
		for _, c := range u.certs {
			if !slices.Contains(g.certs, c) {
				g.certs = append(g.certs, c)
			}
		}
	}
	slices.Sort(order)
	sv := e.servedIndex()
	for _, z := range order {
		g := byZone[z]
		// Served leaves first, by subject, then those held at rest, then
		// ARNs: fingerprints alone would order them at random between
		// runs of a test.
		key := func(c string) string {
			if cert := e.cert(c); cert != nil {
				return "0" + cert.Subject + " " + c
			}
			if r := e.atRest(c); r != nil {
				return "1" + r.Subject + " " + c
			}
			return "2" + c
		}
		slices.SortFunc(g.certs, func(a, b string) int { return strings.Compare(key(a), key(b)) })
		gap := Gap{Gap: found.Gap{Reason: found.GapUnmonitoredZone, Zone: z,
			Detail: fmt.Sprintf("%d names on %d certificates lie under %s, which no source watches", len(g.names), len(g.certs), z),
			Fix:    "add the zone (zones: with its nameserver/tsig, or its Route 53 account) so that every place these certificates are deployed is seen, or declare it out of scope (coverage.out_of_scope) with a reason"},
			Names: clip(g.names), Certificates: clip(g.certs), Tier: e.rules.CoverageNames}
		gaps = append(gaps, gap)
		if gap.Tier == None {
			continue
		}
		var eps []Endpoint
		var locs []atrest.Location
		var described []string
		for _, c := range g.certs {
			if cert := e.cert(c); cert != nil {
				eps = append(eps, sv.endpoints(c)...)
				described = append(described, fmt.Sprintf("%q (sha256 %s…)", cert.Subject, c[:12]))
			} else if r := e.atRest(c); r != nil {
				described = append(described, fmt.Sprintf("%q (held at rest in %s)", r.Subject, atrest.Where(r.Locations, 2)))
				locs = append(locs, r.Locations...)
			} else {
				described = append(described, c) // an ARN
			}
		}
		sortEndpoints(eps)
		eps = slices.Compact(eps)
		if eps == nil {
			eps = []Endpoint{}
		}
		slices.SortFunc(locs, atrest.Location.Compare)
		fs = append(fs, Finding{Kind: CoverageGap, Tier: gap.Tier, Name: z, Subject: z, Deadline: At(e.now), Endpoints: eps, Records: recordsOf(Records{Locations: clipLocations(slices.Compact(locs))}),
			Message: Printable(fmt.Sprintf("zone %s is watched by no source (no zone transferred, delegation followed, Route 53 zone or static target covers it), yet certificates name it: %s on %s. certwatch cannot see where else these certificates are deployed; %s",
				z, listNames(g.names, 10), listNames(described, 5), gap.Fix))})
	}
	return fs, gaps
}

// judgeUnverified raises a coverage_gap for each ACM or IAM certificate in
// use by AWS resources that no probed endpoint serves: its deployed copy
// is unverified. It judges only where the resources themselves were read
// (AddConsumers), and so probed under their own names: without them,
// nothing reaching an in-use certificate was looked for.
func (e *Evaluator) judgeUnverified(fs []Finding, gaps []Gap, acm []ACMCertificate, iam []IAMCertificate) ([]Finding, []Gap) {
	if len(e.inv.consumers) == 0 {
		return fs, gaps
	}
	raise := func(arn, fp, subject string, users []string, names []string, consumers []ConsumerRef) {
		if len(names) > 0 && e.outOfScope(strings.TrimPrefix(discovery.NormalizeName(names[0]), "*.")) {
			return
		}
		gap := Gap{Gap: found.Gap{Reason: found.GapUnverifiedInUse, Zone: arn,
			Detail: fmt.Sprintf("%s is in use by %s, and no probed endpoint serves it", arn, listNames(users, 5)),
			Fix:    "probe the names that reach those resources (targets:, or the zones or Route 53 accounts holding them), or reach them from where certwatch runs"},
			Certificates: []string{arn}, Names: clip(names), Tier: e.rules.CoverageUnverified}
		msg := fmt.Sprintf("certificate %q (%s) is in use by %s, but no endpoint certwatch probed serves it: the copy those resources serve is unverified (an internal load balancer certwatch cannot reach, a distribution not probed); %s",
			subject, arn, listNames(users, 5), gap.Fix)
		eps, instead := e.servedInstead(consumers, names)
		if len(eps) > 0 {
			// The listener was asked for the certificate's names at its
			// own addresses and answered with another.
			gap.Detail += fmt.Sprintf("; asked for its names, %s served another certificate: %s", endpointList(eps, 3), instead)
			gap.Fix = "check the certificates attached to that listener (aws elbv2 describe-listener-certificates): another one covering these names is chosen over this one, or this one is no longer attached; detach the certificate served instead, or attach this one"
			msg = fmt.Sprintf("certificate %q (%s) is attached to %s, but asked for its names there, %s served another certificate: %s. Clients asking for these names get that one, not this; %s",
				subject, arn, listNames(users, 5), endpointList(eps, 3), instead, gap.Fix)
		}
		gaps = append(gaps, gap)
		if gap.Tier == None {
			return
		}
		if eps == nil {
			eps = []Endpoint{}
		}
		fs = append(fs, Finding{Kind: CoverageGap, Tier: gap.Tier, Name: arn, Certificate: fp, Subject: subject, Deadline: At(e.now), Endpoints: eps,
			Message: Printable(msg)})
	}
	for i := range acm {
		c := &acm[i]
		users := slices.Clone(c.InUseBy)
		for _, k := range c.Consumers {
			if !slices.Contains(users, k.ARN) {
				users = append(users, k.ARN)
			}
		}
		if len(users) > 0 && len(c.Endpoints) == 0 {
			raise(c.ARN, c.SHA256, cmp.Or(c.Subject, c.DomainName), users, append([]string{c.DomainName}, c.SubjectAlternativeNames...), c.Consumers)
		}
	}
	for i := range iam {
		c := &iam[i]
		var users []string
		for _, k := range c.Consumers {
			users = append(users, k.ARN)
		}
		if len(users) > 0 && len(c.Endpoints) == 0 {
			raise(c.ARN, c.SHA256, c.Name, users, c.DNSNames, c.Consumers)
		}
	}
	return fs, gaps
}

// clipLocations returns at most maxGapNames of locs.
func clipLocations(locs []atrest.Location) []atrest.Location {
	if len(locs) > maxGapNames {
		return locs[:maxGapNames:maxGapNames]
	}
	return locs
}

// clip returns at most maxGapNames of names.
func clip(names []string) []string {
	if len(names) > maxGapNames {
		return names[:maxGapNames:maxGapNames]
	}
	return names
}

// listNames lists at most n names, then how many more.
func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

// SourceCoverage is what was observed of one source's targets: the
// endpoints (name, port, address) probed and the distinct leaf
// certificates they served.
type SourceCoverage struct {
	Name         string `json:"name"`
	Endpoints    int    `json:"endpoints"`
	Certificates int    `json:"certificates"`
}

// sourceCount counts one source's endpoints and leaves while evaluating:
// the leaves as a bit per description (by its index in the Evaluator's
// certs), where a set of fingerprints cost 20-40 bytes a leaf.
type sourceCount struct {
	endpoints int
	leaves    []uint64
	nLeaves   int
}

// countSources counts an endpoint of each of sources, which served the
// leaf described at index cert of e.certs (-1 for none).
func (e *Evaluator) countSources(sources []string, cert int32) {
	if e.sources == nil {
		e.sources = map[string]*sourceCount{}
	}
	for _, s := range sources {
		c := e.sources[s]
		if c == nil {
			c = &sourceCount{}
			e.sources[s] = c
		}
		c.endpoints++
		if cert < 0 {
			continue
		}
		w, bit := int(cert/64), uint64(1)<<(cert%64)
		if w >= len(c.leaves) {
			c.leaves = slices.Grow(c.leaves, w+1-len(c.leaves))[:w+1]
		}
		if c.leaves[w]&bit == 0 {
			c.leaves[w] |= bit
			c.nLeaves++
		}
	}
}

// sourceCoverage returns the counts by source name.
func (e *Evaluator) sourceCoverage() []SourceCoverage {
	out := make([]SourceCoverage, 0, len(e.sources))
	for name, c := range e.sources {
		out = append(out, SourceCoverage{Name: name, Endpoints: c.endpoints, Certificates: c.nLeaves})
	}
	slices.SortFunc(out, func(a, b SourceCoverage) int { return strings.Compare(a.Name, b.Name) })
	e.sources = nil
	return out
}

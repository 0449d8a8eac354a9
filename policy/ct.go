package policy

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/ctcert"
)

// UnexpectedIssuer: Certificate Transparency shows a certificate for a
// watched name from a CA that is not among the expected issuers
// (CTRules.ExpectedIssuers): a mis-issuance, a team buying certificates
// elsewhere, or an attacker who passed a CA's validation. One finding per
// issuance (a precertificate and its certificate are one); its Name is
// "ct:" and the issuance's ID, its Deadline when the certificate was first
// logged, and CTLogged names the log entries.
const UnexpectedIssuer Kind = "unexpected_issuer"

// CTRules are the rules of the reconciliation with Certificate
// Transparency (see AddCT).
type CTRules struct {
	// Grace is how long a certificate logged in CT may go undeployed while
	// an endpoint serves an older one for its names before that endpoint
	// is a stale_deployment.
	Grace time.Duration
	// ExpectedIssuers are the CAs expected to issue for the watched
	// domains: an issuing CA's subject organization or common name
	// (compared without case), or the hex SHA-256 of its public key.
	// Empty: the issuer is not checked.
	ExpectedIssuers []string
	// UnexpectedIssuer is the tier of unexpected_issuer; None turns it
	// off.
	UnexpectedIssuer Tier
	// Domains are the watched domains, normalised: a name in CT at or
	// below one that no source lists is a coverage_gap.
	Domains []string
}

// ctInventory is what AddCT gave: the certificates, one per issuance, and
// the names probed only because CT shows them.
type ctInventory struct {
	certs []ctcert.Certificate
	ids   map[string]bool
	// only are the names whose observations came from the CT source alone.
	only map[string]bool
	// gaps are the coverage gaps of names only CT shows, found by
	// ctCoverage.
	gaps []Gap
	// bySerial finds a served leaf's fingerprint by serial number and
	// NotAfter (servedKey); built by judgeCT.
	bySerial map[string]string
}

// servedKey is how a served leaf is found from an issuance CT shows by
// its precertificate alone: serial number and NotAfter.
func servedKey(serial string, notAfter time.Time) string {
	return serial + "/" + notAfter.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// AddCT adds the certificates Certificate Transparency shows for the
// watched domains (one per issuance; one given twice counts once). Result
// reconciles them with what is served (Rules.CT): an endpoint serving an
// older certificate for the names of one logged more than the grace ago
// and served nowhere is a stale_deployment; one from an issuer not
// expected is unexpected_issuer; names on one that no source but CT lists
// are a coverage_gap.
func (e *Evaluator) AddCT(certs ...ctcert.Certificate) {
	if e.ct.ids == nil {
		e.ct.ids = map[string]bool{}
	}
	for _, c := range certs {
		if !e.ct.ids[c.ID] {
			e.ct.ids[c.ID] = true
			e.ct.certs = append(e.ct.certs, c)
		}
	}
}

// noteCTOnly records the name of an observation whose target only the CT
// source gave (ct.probe_names).
func (e *Evaluator) noteCTOnly(sources []string) {
	if len(sources) != 1 || sources[0] != ctcert.Source {
		return
	}
	if e.ct.only == nil {
		e.ct.only = map[string]bool{}
	}
	e.ct.only[e.probed[len(e.probed)-1].Name] = true
}

// judgeCT reconciles the certificates CT shows with what is served (see
// AddCT), editing and extending fs, which is Result's own. e.probed is
// sorted.
func (e *Evaluator) judgeCT(fs []Finding) []Finding {
	if len(e.ct.certs) == 0 {
		return fs
	}
	e.ct.bySerial = make(map[string]string, len(e.certs))
	for i := range e.certs {
		e.ct.bySerial[servedKey(e.certs[i].Serial, e.certs[i].NotAfter.Time())] = e.certs[i].SHA256
	}
	sv := e.servedIndex()
	fs = e.ctStale(fs, sv)
	fs = e.ctIssuers(fs, sv)
	return e.ctCoverage(fs)
}

// ctServed returns the fingerprint of the served leaf that is c, matched
// by fingerprint or, for an issuance only a precertificate shows, by
// serial number and NotAfter; "" when none is served.
func (e *Evaluator) ctServed(c *ctcert.Certificate) string {
	if c.SHA256 != "" && e.cert(c.SHA256) != nil {
		return c.SHA256
	}
	return e.ct.bySerial[servedKey(c.Serial, c.NotAfter)]
}

// ctRenewals indexes, by each of their names, the certificates in CT that
// can make a served one stale: valid now, logged more than the grace ago,
// and served nowhere.
func (e *Evaluator) ctRenewals() map[string][]*ctcert.Certificate {
	idx := map[string][]*ctcert.Certificate{}
	for i := range e.ct.certs {
		c := &e.ct.certs[i]
		if c.NotBefore.After(e.now) || !c.NotAfter.After(e.now) || c.Issued().Add(e.rules.CT.Grace).After(e.now) || e.ctServed(c) != "" {
			continue
		}
		for _, n := range normalizeNames(c.Names) {
			idx[n] = append(idx[n], c)
		}
	}
	return idx
}

// ctStale turns each served certificate that a renewal in CT replaced
// (ctRenewals: issued after it, outliving it, for exactly its names) into
// a stale deployment: its expiry finding becomes one, in place at the same
// tier, or one is added at least at the tiers of a notice and of an
// inconsistent deployment. A served certificate already stale for a
// renewal held in ACM or at rest keeps that finding.
func (e *Evaluator) ctStale(fs []Finding, sv servedIndex) []Finding {
	idx := e.ctRenewals()
	if len(idx) == 0 {
		return fs
	}
	byCert := map[string]int{}
	for i := range fs {
		f := &fs[i]
		switch f.Kind {
		case StaleDeployment:
			byCert[f.Certificate] = i
		case Expiring, Expired:
			if c := e.cert(f.Certificate); c != nil && f.Deadline.Equal(c.NotAfter.Time()) {
				if _, ok := byCert[f.Certificate]; !ok {
					byCert[f.Certificate] = i
				}
			}
		}
	}
	for i := range e.certs {
		c := &e.certs[i]
		if len(c.DNSNames) == 0 {
			continue
		}
		names := normalizeNames(c.DNSNames)
		n := newestCTRenewal(c, names, idx[names[0]])
		if n == nil {
			continue
		}
		k, ok := byCert[c.SHA256]
		if ok && fs[k].Kind == StaleDeployment {
			continue
		}
		if !ok {
			fs = append(fs, Finding{Kind: StaleDeployment, Tier: max(Notice, e.rules.Inconsistent, TierFor(c.NotBefore.Time(), c.NotAfter.Time(), e.rules.Tiers, e.now)),
				Certificate: c.SHA256, Subject: c.Subject, Deadline: c.NotAfter, Endpoints: sv.endpoints(c.SHA256)})
			k = len(fs) - 1
		}
		f := &fs[k]
		f.Kind = StaleDeployment
		f.withRecords(func(rs *Records) { rs.CTLogged = n.Logged })
		f.Message = Printable(e.ctStaleMessage(f, c, n))
		if c.RenewedBy == nil {
			c.RenewedBy = &Replacement{SHA256: n.SHA256, NotAfter: n.NotAfter}
		}
	}
	return fs
}

// newestCTRenewal returns the candidate that renews c (served, with
// names): issued after it and outliving it, another certificate, for
// exactly its names; the one that lives longest.
func newestCTRenewal(c *Certificate, names []string, cands []*ctcert.Certificate) *ctcert.Certificate {
	var best *ctcert.Certificate
	for _, n := range cands {
		if !n.NotBefore.After(c.NotBefore.Time()) || !n.NotAfter.After(c.NotAfter.Time()) || n.Serial == c.Serial || !sameNames(normalizeNames(n.Names), names) {
			continue
		}
		if best == nil || n.NotAfter.After(best.NotAfter) {
			best = n
		}
	}
	return best
}

// ctStaleMessage explains the stale deployment of c, which f's endpoints
// serve, renewed by n in CT.
func (e *Evaluator) ctStaleMessage(f *Finding, c *Certificate, n *ctcert.Certificate) string {
	verb := "serve"
	if len(f.Endpoints) == 1 {
		verb = "serves"
	}
	return fmt.Sprintf("%s still %s %q (serial %s), which %s, although a renewal for the same names was issued %s ago and no endpoint certwatch probes serves it: serial %s from %q, not after %s, %s. The renewal happened but the rollout did not: install it on the endpoints listed and reload them",
		endpointList(f.Endpoints, 8), verb, f.Subject, c.Serial, e.lifeState(c.NotAfter.Time()), humanBetween(n.Issued(), e.now), n.Serial, issuerLabel(n.Issuer), stamp(n.NotAfter), loggedWhere(n))
}

// loggedWhere names the first log entry of c: "logged in LOG at index N
// on DATE" (and how many more entries there are).
func loggedWhere(c *ctcert.Certificate) string {
	if len(c.Logged) == 0 {
		return "logged in no known entry"
	}
	first := c.Logged[0]
	what := "certificate"
	if first.Precert {
		what = "precertificate"
	}
	s := fmt.Sprintf("its %s logged in %s at index %d on %s", what, first.Log, first.Index, first.Timestamp.UTC().Format(time.RFC3339))
	switch more := len(c.Logged) - 1; {
	case more == 1:
		s += " (and 1 more log entry)"
	case more > 1:
		s += fmt.Sprintf(" (and %d more log entries)", more)
	}
	return s
}

// issuerLabel names an issuer for people: its common name, else its
// distinguished name.
func issuerLabel(is ctcert.Issuer) string {
	return cmp.Or(is.CommonName, is.Name)
}

// expectedIssuer reports whether is matches one of expected: its
// organization or common name without case, or its key's hex SHA-256.
func expectedIssuer(is ctcert.Issuer, expected []string) bool {
	for _, x := range expected {
		x = strings.TrimSpace(x)
		if isKeyHash(x) {
			if is.KeySHA256 != "" && strings.EqualFold(x, is.KeySHA256) {
				return true
			}
			continue
		}
		if strings.EqualFold(x, is.CommonName) || slices.ContainsFunc(is.Organization, func(o string) bool { return strings.EqualFold(x, o) }) {
			return true
		}
	}
	return false
}

// isKeyHash reports whether s is the hex of a SHA-256.
func isKeyHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// ctIssuers adds an unexpected_issuer finding for each certificate in CT,
// valid or not yet valid, whose issuer is not expected.
func (e *Evaluator) ctIssuers(fs []Finding, sv servedIndex) []Finding {
	r := &e.rules.CT
	if r.UnexpectedIssuer == None || len(r.ExpectedIssuers) == 0 {
		return fs
	}
	for i := range e.ct.certs {
		c := &e.ct.certs[i]
		if !c.NotAfter.After(e.now) || expectedIssuer(c.Issuer, r.ExpectedIssuers) {
			continue
		}
		eps := sv.endpoints(e.ctServed(c))
		if eps == nil {
			eps = []Endpoint{}
		}
		key := ""
		if c.Issuer.KeySHA256 != "" {
			key = fmt.Sprintf(" (key sha256 %s)", c.Issuer.KeySHA256)
		}
		served := "no endpoint certwatch probes serves it"
		if len(eps) > 0 {
			served = "served by " + endpointList(eps, 8)
		}
		fs = append(fs, Finding{
			Kind: UnexpectedIssuer, Tier: r.UnexpectedIssuer, Name: "ct:" + c.ID, Subject: firstName(c.Names), Deadline: At(c.Issued()), Endpoints: eps, Records: recordsOf(Records{CTLogged: c.Logged}),
			Message: Printable(fmt.Sprintf("a certificate for %s (serial %s, not after %s) was issued by %q%s, which is not among ct.expected_issuers; %s; %s. If your organisation did not ask this CA for it, have the CA revoke it and find out how its validation was passed; if it did, add the CA to ct.expected_issuers",
				nameList(c.Names, 8), c.Serial, stamp(c.NotAfter), c.Issuer.Name, key, loggedWhere(c), served)),
		})
	}
	return fs
}

// ctCoverage adds a coverage_gap for each certificate in CT, not expired,
// carrying names under a watched domain that no source but CT lists: the
// names, and the log entry, named.
func (e *Evaluator) ctCoverage(fs []Finding) []Finding {
	tier := e.rules.CoverageNames
	if tier == None {
		return fs
	}
	for i := range e.ct.certs {
		c := &e.ct.certs[i]
		if !c.NotAfter.After(e.now) {
			continue
		}
		var only []string
		for _, n := range normalizeNames(c.Names) {
			if strings.HasPrefix(n, "*.") || slices.Contains(only, n) || !e.ctWatched(n) || e.outOfScope(n) || e.listed(n) {
				continue
			}
			only = append(only, n)
		}
		if len(only) == 0 {
			continue
		}
		eps := []Endpoint{}
		for _, n := range only {
			eps = append(eps, e.probedAt(n)...)
		}
		probed := fmt.Sprintf("ct.probe_names would probe %s", themOrIt(only))
		if len(eps) > 0 {
			probed = "they were probed because ct.probe_names is on"
			if len(only) == 1 {
				probed = "it was probed because ct.probe_names is on"
			}
		}
		// The gap and the finding say the same: the finding is the gap's
		// detail, what was probed, and its fix.
		gap := Gap{Gap: found.Gap{Reason: found.GapCTOnly, Zone: e.ctDomain(only[0]), Source: ctcert.Source,
			Detail: fmt.Sprintf("%s %s on a certificate in Certificate Transparency (serial %s from %q, not after %s; %s), yet no zone or other source lists %s",
				nameList(only, 8), areOrIs(only), c.Serial, issuerLabel(c.Issuer), stamp(c.NotAfter), loggedWhere(c), themOrIt(only)),
			Fix: "add the names to their zone, or the zone they live in to zones; if nobody in your organisation asked for this certificate, find out who did"},
			Names: clip(only), Certificates: []string{cmp.Or(c.SHA256, c.ID)}, Tier: tier}
		e.ct.gaps = append(e.ct.gaps, gap)
		fs = append(fs, Finding{
			Kind: CoverageGap, Tier: tier, Name: "ct:" + c.ID, Subject: only[0], Deadline: At(e.now), Endpoints: eps, Records: recordsOf(Records{CTLogged: c.Logged}),
			Message: Printable(fmt.Sprintf("%s, so where it is deployed is not watched; %s. %s", gap.Detail, probed, capitalize(gap.Fix))),
		})
	}
	return fs
}

// ctDomain returns the watched domain name lies under (the deepest).
func (e *Evaluator) ctDomain(name string) string {
	best := ""
	for _, d := range e.rules.CT.Domains {
		if discovery.InZone(name, d) && len(d) > len(best) {
			best = d
		}
	}
	return cmp.Or(best, ZoneOf(name))
}

// ctWatched reports whether a name lies at or below a watched domain.
func (e *Evaluator) ctWatched(name string) bool {
	return slices.ContainsFunc(e.rules.CT.Domains, func(d string) bool { return discovery.InZone(name, d) })
}

// listed reports whether a source other than CT gave a target of name: it
// was probed, and not only because CT shows it. e.probed is sorted.
func (e *Evaluator) listed(name string) bool {
	_, ok := slices.BinarySearchFunc(e.probed, name, func(p Probed, n string) int { return strings.Compare(p.Name, n) })
	return ok && !e.ct.only[name]
}

// probedAt returns the endpoints probed at name; e.probed is sorted.
func (e *Evaluator) probedAt(name string) []Endpoint {
	i, _ := slices.BinarySearchFunc(e.probed, name, func(p Probed, n string) int { return strings.Compare(p.Name, n) })
	var out []Endpoint
	for ; i < len(e.probed) && e.probed[i].Name == name; i++ {
		out = append(out, e.probed[i].endpoint())
	}
	return out
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return discovery.NormalizeName(names[0])
}

// nameList lists at most n names, saying how many more there are.
func nameList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

func areOrIs(names []string) string {
	if len(names) == 1 {
		return "is"
	}
	return "are"
}

func themOrIt(names []string) string {
	if len(names) == 1 {
		return "it"
	}
	return "them"
}

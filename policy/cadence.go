package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
)

// RenewalMissed: the newest certificate seen for a name, on any endpoint,
// in ACM, in IAM or at rest, has passed the point where it should have
// been renewed (its expected renewal, see ExpectedRenewal) by a grace
// (RenewalGrace), and no newer
// certificate for the name has appeared anywhere, in this run or in the
// history of earlier ones. A certificate ACM renews itself is judged by
// ACM's own renewal_overdue instead; one a newer certificate has already
// replaced somewhere is a stale_deployment. Its deadline is the
// certificate's NotAfter.
const RenewalMissed Kind = "renewal_missed"

// DefaultRenewalFraction is the share of its lifetime a certificate still
// has left when it is normally renewed, unless a tier of Rules.Tiers sets
// a lifetime fraction: the ACME and cert-manager convention of renewing
// once two thirds of the lifetime have passed.
const DefaultRenewalFraction = 1.0 / 3

// NameSeen is the certificate one run saw for one certificate name (a DNS
// name the certificate carries, lower-cased; a wildcard name is a name of
// its own): the newest leaf an endpoint served for it or, when no endpoint
// served one, the newest certificate held for it in ACM, IAM or at rest.
// State stores keep it as the name's history (NameHistory).
type NameSeen struct {
	Name      string
	SHA256    string
	NotBefore time.Time
	NotAfter  time.Time
	// Served is set when an endpoint served it.
	Served bool
}

// NameHistory is what certwatch remembers of one certificate name across
// runs: the newest certificate seen for it, since when, and the one it
// replaced. History only moves forward: a certificate issued before the
// one recorded (an older copy still served somewhere, a partial run) never
// takes its place.
//
// Its times are to the second (Instant): a daemon reads the history of
// every name before each run, 100,000 of them in a fleet, and holds it
// until the run is judged.
type NameHistory struct {
	Name      string  `json:"name"`
	SHA256    string  `json:"sha256"`
	NotBefore Instant `json:"not_before"`
	NotAfter  Instant `json:"not_after"`
	// Since is when SHA256 was first seen for the name.
	Since Instant `json:"since"`
	// Previous is the certificate SHA256 replaced; "" while the name has
	// not been seen to change.
	Previous string `json:"previous,omitempty"`
	// LastSeen is the latest run that saw the name.
	LastSeen Instant `json:"last_seen"`
}

// LastChanged is when the name's certificate last changed: Since, once a
// previous certificate is known; zero while it has not been seen to change.
func (h *NameHistory) LastChanged() time.Time {
	if h.Previous == "" {
		return time.Time{}
	}
	return h.Since.Time()
}

// newerThan reports whether a certificate valid from notBefore to notAfter
// was issued after the one h records (by NotBefore, then NotAfter).
func (h *NameHistory) newerThan(notBefore, notAfter time.Time) bool {
	return cmp.Or(h.NotBefore.Compare(At(notBefore)), h.NotAfter.Compare(At(notAfter))) > 0
}

// olderThan reports whether a certificate valid from notBefore to notAfter
// was issued after the one h records: the one the store would record in
// its place.
func (h *NameHistory) olderThan(notBefore, notAfter time.Time) bool {
	return cmp.Or(h.NotBefore.Compare(At(notBefore)), h.NotAfter.Compare(At(notAfter))) < 0
}

// SetHistory hands the Evaluator what the state remembers of each name
// (NameHistory, as a store returns it), read before the run: Result gives
// every certificate its first_seen and last_changed from it, and a
// certificate whose name history knows a newer certificate for is not
// renewal_missed (a newer one appeared, perhaps where this run could not
// look). Without it, renewal_missed is judged on the run alone.
//
// The Evaluator takes h: it sorts it by name in place, and finds a name
// in it by binary search. An index by name beside it was 4 MB more at
// 100,000 names, for as long as the run probed.
func (e *Evaluator) SetHistory(h []NameHistory) {
	byName := func(a, b NameHistory) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(h, byName) {
		slices.SortFunc(h, byName)
	}
	e.history, e.hasHistory = h, true
}

// historyFor is what the history says of name (normalised); nil when it
// knows nothing of it, or there is no history.
func (e *Evaluator) historyFor(name string) *NameHistory {
	i, ok := slices.BinarySearchFunc(e.history, name, func(h NameHistory, n string) int { return strings.Compare(h.Name, n) })
	if !ok {
		return nil
	}
	return &e.history[i]
}

// ExpectedRenewal is when a certificate valid from notBefore to notAfter
// is normally renewed: when the renewal fraction of its lifetime is left
// (the largest lifetime_fraction of the expiry tiers, else
// DefaultRenewalFraction), but never before the least urgent expiry tier
// starts by time left (its within, 30 days by default): a 397-day
// certificate renewed by hand a month ahead, or an ACME client renewing at
// 30 days of 90, is on time. Zero for a certificate without a lifetime.
func ExpectedRenewal(notBefore, notAfter time.Time, tiers []TierRule) time.Time {
	lifetime := notAfter.Sub(notBefore)
	if lifetime <= 0 {
		return time.Time{}
	}
	left := time.Duration(RenewalFraction(tiers) * float64(lifetime))
	if w := firstTierWithin(tiers); w > 0 {
		left = min(left, w)
	}
	return notAfter.Add(-left).UTC()
}

// RenewalGrace is how long after its expected renewal due a certificate
// valid from notBefore to notAfter, still not renewed, becomes
// renewal_missed: a thirtieth of its lifetime (3 days of 90, 13.2 of
// 397), room for a renewal that runs a little late, but at most half the
// time from due to notAfter, so a long-lived certificate is not left until
// it expires.
func RenewalGrace(notBefore, notAfter, due time.Time) time.Duration {
	return max(min(notAfter.Sub(notBefore)/30, notAfter.Sub(due)/2), 0)
}

// firstTierWithin is the within of the least urgent expiry tier (the
// largest, if several rules give that tier), zero when it has none.
func firstTierWithin(tiers []TierRule) time.Duration {
	least, within, found := None, time.Duration(0), false
	for _, r := range tiers {
		switch {
		case r.Within <= 0 && r.LifetimeFraction <= 0:
		case !found || r.Tier < least:
			least, within, found = r.Tier, r.Within, true
		case r.Tier == least:
			within = max(within, r.Within)
		}
	}
	return within
}

// RenewalFraction is the share of its lifetime a certificate has left when
// it is normally renewed: the largest lifetime_fraction among tiers, the
// earliest point any of them starts at, else DefaultRenewalFraction.
func RenewalFraction(tiers []TierRule) float64 {
	f := 0.0
	for _, r := range tiers {
		if r.LifetimeFraction > 0 && r.LifetimeFraction < 1 {
			f = max(f, r.LifetimeFraction)
		}
	}
	if f == 0 {
		return DefaultRenewalFraction
	}
	return f
}

// cadenceCand is a certificate that may be newer than another for a name.
type cadenceCand struct {
	fp        string
	arn       string
	notBefore time.Time
	notAfter  time.Time
}

// cadence is what judgeCadence looks newer certificates up in: every
// certificate seen, anywhere, by name. A served leaf is a candidate by its
// index in served (the Evaluator's descriptions, not copied); any other
// (ACM, IAM, at rest, CT) is one of extra, numbered after them. byName
// holds one entry per name and candidate, sorted by name and then by
// candidate, which is the order added: 24 bytes a name, where a map of
// each name's list of copied candidates cost 123 (206 before that, 23 MB
// at 100,000 endpoints), allocated at the scan's peak.
type cadence struct {
	served []Certificate
	extra  []cadenceCand
	byName []cadenceName
	sorted bool
}

// cadenceName is one name of candidate cand.
type cadenceName struct {
	name string
	cand int32
}

// newCadence returns a cadence of the served leaves, with room for n
// names.
func newCadence(served []Certificate, n int) cadence {
	return cadence{served: served, byName: make([]cadenceName, 0, n)}
}

// addServed adds the served leaf served[i] under its names.
func (c *cadence) addServed(i int) {
	c.addNames(c.served[i].DNSNames, int32(i))
}

// add adds a certificate held elsewhere under names.
func (c *cadence) add(names []string, cand cadenceCand) {
	c.extra = append(c.extra, cand)
	c.addNames(names, int32(len(c.served)+len(c.extra)-1))
}

func (c *cadence) addNames(names []string, cand int32) {
	for _, n := range names {
		c.byName = append(c.byName, cadenceName{discovery.NormalizeName(n), cand})
	}
	c.sorted = false
}

// cand returns candidate i.
func (c *cadence) cand(i int32) cadenceCand {
	if int(i) < len(c.served) {
		s := &c.served[i]
		return cadenceCand{fp: s.SHA256, notBefore: s.NotBefore.Time(), notAfter: s.NotAfter.Time()}
	}
	return c.extra[int(i)-len(c.served)]
}

// of returns the entries of byName for name: its candidates, in the
// order added.
func (c *cadence) of(name string) []cadenceName {
	if !c.sorted {
		slices.SortFunc(c.byName, func(a, b cadenceName) int {
			return cmp.Or(strings.Compare(a.name, b.name), cmp.Compare(a.cand, b.cand))
		})
		c.sorted = true
	}
	i, _ := slices.BinarySearchFunc(c.byName, name, func(e cadenceName, name string) int { return strings.Compare(e.name, name) })
	j := i
	for j < len(c.byName) && c.byName[j].name == name {
		j++
	}
	return c.byName[i:j]
}

// newer returns a certificate carrying name (or a wildcard covering it)
// issued after, and outliving, the one valid from notBefore to notAfter
// whose fingerprint is fp.
func (c *cadence) newer(name, fp string, notBefore, notAfter time.Time) (cadenceCand, bool) {
	keys := []string{name}
	if _, parent, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "*.") {
		keys = append(keys, "*."+parent)
	}
	for _, k := range keys {
		for _, e := range c.of(k) {
			n := c.cand(e.cand)
			if n.fp != "" && n.fp == fp {
				continue
			}
			if n.notBefore.After(notBefore) && n.notAfter.After(notAfter) {
				return n, true
			}
		}
	}
	return cadenceCand{}, false
}

// judgeCadence gives every served leaf its expected renewal and, from the
// history, when it was first seen and last changed, and raises
// renewal_missed for each leaf served, and each leaf held at rest that no
// endpoint serves, that has passed its expected renewal and the grace
// after it, is not expired,
// and for one of whose names no newer certificate appeared anywhere.
// Like renewal_suggested it is a finding of its own beside the expiry
// finding, which keeps its kind and tier: warning, and page once the
// expiry tiers reach their most urgent tier (capped at
// Rules.RenewalMissed). An expired leaf is only expired. Leaves ACM renews
// (judged by ACM's renewal_overdue), leaves a cert-manager Certificate
// writes (judged by its renewal time, certmanager_renewal_overdue) and
// leaves a newer certificate already
// replaced (RenewedBy: stale_deployment) are left out. Run it after the
// inventories are judged; it extends fs, Result's own.
func (e *Evaluator) judgeCadence(fs []Finding, acm []ACMCertificate, iam []IAMCertificate) []Finding {
	// A served certificate whose chain does not verify (self-signed,
	// untrusted) renews nothing, as it replaces nothing for
	// stale_deployment. The history does not record it (NamesSeen), so it
	// has no history of its own: compared with the history it would
	// replace the trusted one recorded for its names anew every run.
	broken := untrusted(fs)
	// Certificates first seen by the same run and not seen to change
	// since share one Lineage, by first seen: in a fleet most were first
	// seen by the same few runs (64 bytes a certificate otherwise, 6.4 MB
	// of a report of 100,000, and a daemon holds two reports at once).
	unchanged := map[time.Time]*Lineage{}
	for i := range e.certs {
		c := &e.certs[i]
		if e.rules.RenewalMissed != None {
			c.ExpectedRenewal = At(ExpectedRenewal(c.NotBefore.Time(), c.NotAfter.Time(), e.rules.Tiers))
		}
		if broken[c.SHA256] {
			continue
		}
		switch first, changed, prev := e.historyOf(c); {
		case first.IsZero() && changed.IsZero() && prev == "":
		case changed.IsZero() && prev == "":
			l := unchanged[first]
			if l == nil {
				l = &Lineage{FirstSeen: first}
				unchanged[first] = l
			}
			c.Lineage = l
		default:
			c.Lineage = &Lineage{FirstSeen: first, LastChanged: changed, Previous: prev}
		}
	}
	if e.rules.RenewalMissed == None {
		return fs
	}
	cad := newCadence(e.certs, len(e.certs)+len(acm)+len(iam)+len(e.rest)+len(e.ct.certs))
	for i := range e.certs {
		if !broken[e.certs[i].SHA256] {
			cad.addServed(i)
		}
	}
	managed := map[string]bool{}
	acmRefs := map[string][]ACMRef{}
	for i := range acm {
		a := &acm[i]
		switch a.Renewal {
		case AutoRenews, RenewalAtRisk, RenewalStateOverdue, RenewalStateFailed:
			// ACM renews it: its own renewal_overdue says when it is late.
			managed[a.SHA256] = true
		}
		if a.SHA256 != "" {
			acmRefs[a.SHA256] = append(acmRefs[a.SHA256], refOf(&a.Certificate, a.Renewal))
		}
		if a.Status == acmcert.StatusIssued || a.Status == acmcert.StatusExpired {
			cad.add(a.Names(), cadenceCand{fp: a.SHA256, arn: a.ARN, notBefore: a.NotBefore, notAfter: a.NotAfter})
		}
	}
	iamRefs := map[string][]IAMRef{}
	for i := range iam {
		c := &iam[i]
		if c.SHA256 != "" {
			iamRefs[c.SHA256] = append(iamRefs[c.SHA256], IAMRef{ARN: c.ARN, ID: c.ID, Name: c.Name, Account: c.Account})
		}
		cad.add(c.DNSNames, cadenceCand{fp: c.SHA256, arn: c.ARN, notBefore: c.NotBefore, notAfter: c.NotAfter})
	}
	for i := range e.rest {
		r := &e.rest[i]
		if !r.CA {
			cad.add(r.DNSNames, cadenceCand{fp: r.SHA256, notBefore: r.NotBefore, notAfter: r.NotAfter})
		}
		if len(r.Issuances) > 0 {
			// cert-manager renews it: its renewal time, and
			// certmanager_renewal_overdue past it, say when it is late.
			managed[r.SHA256] = true
		}
	}
	// A renewal Certificate Transparency shows is one, deployed or not
	// (stale_deployment says when its rollout is late).
	for i := range e.ct.certs {
		c := &e.ct.certs[i]
		cad.add(c.Names, cadenceCand{fp: cmp.Or(c.SHA256, "ct:"+c.ID), notBefore: c.NotBefore, notAfter: c.NotAfter})
	}
	sv := e.servedIndex()
	for i := range e.certs {
		c := &e.certs[i]
		if c.RenewedBy != nil || managed[c.SHA256] || !c.NotAfter.After(e.now) {
			continue
		}
		names := e.overdueNames(&cad, broken, c.SHA256, c.DNSNames, c.NotBefore.Time(), c.NotAfter.Time())
		if len(names) == 0 {
			continue
		}
		f := Finding{Kind: RenewalMissed, Certificate: c.SHA256, Subject: c.Subject, Deadline: c.NotAfter, Endpoints: sv.endpoints(c.SHA256),
			Records: recordsOf(Records{ACM: acmRefs[c.SHA256], IAM: iamRefs[c.SHA256]})}
		if r := e.atRest(c.SHA256); r != nil {
			f.withRecords(func(rs *Records) { rs.Locations = r.Locations })
		}
		fs = append(fs, e.renewalMissed(f, c.DNSNames, names, c.Serial, c.NotBefore.Time(), "served by "+endpointList(f.Endpoints, 8)))
	}
	for i := range e.rest {
		r := &e.rest[i]
		if r.CA || e.cert(r.SHA256) != nil || managed[r.SHA256] || !r.NotAfter.After(e.now) {
			continue // served ones are judged above
		}
		names := e.overdueNames(&cad, broken, r.SHA256, r.DNSNames, r.NotBefore, r.NotAfter)
		if len(names) == 0 {
			continue
		}
		f := restFinding(RenewalMissed, None, r, "")
		fs = append(fs, e.renewalMissed(f, r.DNSNames, names, r.Serial, r.NotBefore, "held at rest in "+atrest.Where(r.Locations, 3)))
	}
	return fs
}

// untrusted returns the fingerprints of the served certificates whose
// chain does not verify (chain_untrusted, self_signed among fs): they renew
// nothing, and NamesSeen leaves them out of the history.
func untrusted(fs []Finding) map[string]bool {
	broken := map[string]bool{}
	for i := range fs {
		if fs[i].Kind == ChainUntrusted || fs[i].Kind == SelfSigned {
			broken[fs[i].Certificate] = true
		}
	}
	return broken
}

// historyOf says, from the history, when certwatch first saw c for its
// names and when it was seen replacing an earlier one (and which): as the
// history records it when it records c; this run, replacing the one
// recorded, when c is newer than what the history holds for one of its
// names (the change this run records); this run, when the history knows
// none of its names. Zero without a history, and for a certificate older
// than the one the history holds, or issued on the same dates (the store
// keeps the one it recorded first).
func (e *Evaluator) historyOf(c *Certificate) (first, changed time.Time, previous string) {
	if !e.hasHistory {
		return time.Time{}, time.Time{}, ""
	}
	var replaced *NameHistory
	known := false
	for _, n := range c.DNSNames {
		h := e.historyFor(discovery.NormalizeName(n))
		switch {
		case h == nil:
		case h.SHA256 == c.SHA256:
			return h.Since.Time(), h.LastChanged(), h.Previous
		case h.olderThan(c.NotBefore.Time(), c.NotAfter.Time()) && replaced == nil:
			// Strictly newer, as the store replaces: a certificate with
			// the same dates as the one recorded replaces nothing.
			replaced = h
		default:
			known = true
		}
	}
	switch {
	case replaced != nil:
		return e.now.UTC(), e.now.UTC(), replaced.SHA256
	case !known && len(c.DNSNames) > 0:
		return e.now.UTC(), time.Time{}, ""
	}
	return time.Time{}, time.Time{}, ""
}

// overdueNames returns the names (normalised) of the certificate fp, valid
// from notBefore to notAfter, that it is still the newest certificate for
// although its expected renewal and the grace after it (RenewalGrace) have
// passed: no newer certificate for them is seen now, nor is one in the
// history. A history entry of a certificate in broken (one whose chain
// does not verify this run, recorded before NamesSeen left such out) is no
// newer certificate. None before then, or for a certificate without names.
func (e *Evaluator) overdueNames(cad *cadence, broken map[string]bool, fp string, names []string, notBefore, notAfter time.Time) []string {
	if !e.renewalPast(notBefore, notAfter) {
		return nil
	}
	var out []string
	for _, n := range names {
		n = discovery.NormalizeName(n)
		if _, ok := cad.newer(n, fp, notBefore, notAfter); ok {
			continue
		}
		if h := e.historyFor(n); h != nil && h.SHA256 != fp && !broken[h.SHA256] && h.newerThan(notBefore, notAfter) {
			continue // a newer one was seen before, where this run did not look
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// renewalPast is whether a certificate valid from notBefore to notAfter
// is past its expected renewal and the grace after it.
func (e *Evaluator) renewalPast(notBefore, notAfter time.Time) bool {
	due := ExpectedRenewal(notBefore, notAfter, e.rules.Tiers)
	return !due.IsZero() && !e.now.Before(due.Add(RenewalGrace(notBefore, notAfter, due))) && !e.now.Before(notBefore)
}

// renewalsOverdue counts the served certificates not expired and past
// their expected renewal: as many renewal_missed findings as judgeCadence
// may add for them, at most.
func (e *Evaluator) renewalsOverdue() int {
	if e.rules.RenewalMissed == None {
		return 0
	}
	n := 0
	for i := range e.certs {
		if c := &e.certs[i]; c.NotAfter.After(e.now) && e.renewalPast(c.NotBefore.Time(), c.NotAfter.Time()) {
			n++
		}
	}
	return n
}

// renewalMissed completes f, the renewal_missed finding of a certificate
// with names (overdue of them still waiting for a newer certificate),
// valid from notBefore to f's deadline and found where: its tier and
// message.
func (e *Evaluator) renewalMissed(f Finding, names, overdue []string, serial string, notBefore time.Time, where string) Finding {
	notAfter := f.Deadline
	due := ExpectedRenewal(notBefore, notAfter.Time(), e.rules.Tiers)
	f.Tier = Warning
	if last := lastTier(e.rules.Tiers); last != None && TierFor(notBefore, notAfter.Time(), e.rules.Tiers, e.now) >= last {
		f.Tier = Page
	}
	f.Tier = min(f.Tier, e.rules.RenewalMissed)
	forNames := "for " + listN(overdue, 3)
	if len(overdue) < len(names) {
		forNames += fmt.Sprintf(" (%d of its %d names; the others have a newer certificate)", len(overdue), len(names))
	}
	changed := "certwatch has no history of the name here (a one-off scan, or the state could not be read), so when its certificate last changed is unknown"
	if e.hasHistory {
		switch h := e.historyFor(overdue[0]); {
		case h == nil || h.SHA256 != f.Certificate:
			changed = fmt.Sprintf("certwatch first saw it for %s in this run", overdue[0])
		case h.Previous != "":
			changed = fmt.Sprintf("the certificate for %s last changed on %s (it replaced sha256 %s…)", overdue[0], stamp(h.Since.Time()), h.Previous[:min(12, len(h.Previous))])
		default:
			changed = fmt.Sprintf("the certificate for %s has not been seen to change since %s, when certwatch first saw it", overdue[0], stamp(h.Since.Time()))
		}
	}
	f.Message = Printable(fmt.Sprintf("renewal overdue: certificate %q (serial %s), %s, should have been renewed by %s (when %s), but no newer certificate %s has appeared on any endpoint, in ACM, IAM or at rest; %s. It %s. "+
		"To do: renew it now and deploy the new certificate everywhere it is used; if an ACME client or cert-manager renews it, find out why it did not (its logs, the CA's rate limits, DNS or HTTP validation)",
		f.Subject, serial, where, stamp(due), renewalText(e.rules.Tiers), forNames, changed, e.lifeState(notAfter.Time())))
	return f
}

// lastTier is the most urgent tier the expiry tiers use, None without
// any.
func lastTier(tiers []TierRule) Tier {
	t := None
	for _, r := range tiers {
		if r.Within > 0 || r.LifetimeFraction > 0 {
			t = max(t, r.Tier)
		}
	}
	return t
}

// renewalText says when a certificate is renewed by the tiers: "a third
// of its lifetime is left, or 30 days if less".
func renewalText(tiers []TierRule) string {
	s := fractionText(RenewalFraction(tiers)) + " of its lifetime is left"
	if w := firstTierWithin(tiers); w > 0 {
		s += ", or " + durationText(w) + " if less"
	}
	return s
}

// durationText renders a tier's within: "30 days", "36h0m0s".
func durationText(d time.Duration) string {
	if d%day == 0 {
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}

// fractionText renders a lifetime fraction: "a third", "33%".
func fractionText(f float64) string {
	if f == DefaultRenewalFraction {
		return "a third"
	}
	return fmt.Sprintf("%.0f%%", f*100)
}

// NamesSeen returns, for every certificate name of a run's report, the
// certificate seen for it (NameSeen): the newest served leaf carrying it
// or, for a name no served leaf carries, the newest certificate held for it
// in ACM, IAM or at rest (a CA certificate is no certificate for a name).
// A certificate with no fingerprint (an ACM certificate ACM gave no PEM
// of) is left out, and so is a served leaf whose chain does not verify
// (chain_untrusted or self_signed among fs, the run's findings): it renews
// nothing for renewal_missed, so the history must not remember it as the
// newest certificate of a name, where it would keep renewal_missed quiet
// in every later run. Sorted by name.
func NamesSeen(certs []Certificate, fs []Finding, acm []ACMCertificate, iam []IAMCertificate, rest []AtRestCertificate) []NameSeen {
	broken := untrusted(fs)
	// Every (name, certificate) pair, sorted by name with the one to keep
	// first, then one per name: no map of the names beside the list (at
	// 100,000 names a map of them was 17 MB more at the run's peak).
	out := make([]NameSeen, 0, len(certs)+len(acm)+len(iam)+len(rest))
	add := func(names []string, fp string, notBefore, notAfter time.Time, served bool) {
		if fp == "" {
			return
		}
		for _, n := range names {
			if n = discovery.NormalizeName(n); n != "" {
				out = append(out, NameSeen{Name: n, SHA256: fp, NotBefore: notBefore.UTC(), NotAfter: notAfter.UTC(), Served: served})
			}
		}
	}
	for i := range certs {
		if c := &certs[i]; !broken[c.SHA256] {
			add(c.DNSNames, c.SHA256, c.NotBefore.Time(), c.NotAfter.Time(), true)
		}
	}
	for i := range acm {
		a := &acm[i]
		if a.Status == acmcert.StatusIssued || a.Status == acmcert.StatusExpired {
			add(a.Names(), a.SHA256, a.NotBefore, a.NotAfter, false)
		}
	}
	for i := range iam {
		add(iam[i].DNSNames, iam[i].SHA256, iam[i].NotBefore, iam[i].NotAfter, false)
	}
	for i := range rest {
		if r := &rest[i]; !r.CA {
			add(r.DNSNames, r.SHA256, r.NotBefore, r.NotAfter, false)
		}
	}
	// For a name, a served certificate before one held only, then the
	// newest (the latest not-before, then not-after), then the greatest
	// fingerprint, so that the choice does not depend on the order found.
	slices.SortFunc(out, func(a, b NameSeen) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if a.Served != b.Served {
			if a.Served {
				return -1
			}
			return 1
		}
		return cmp.Or(b.NotBefore.Compare(a.NotBefore), b.NotAfter.Compare(a.NotAfter), strings.Compare(b.SHA256, a.SHA256))
	})
	return slices.CompactFunc(out, func(a, b NameSeen) bool { return a.Name == b.Name })
}

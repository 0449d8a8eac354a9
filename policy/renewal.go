package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
)

// judgeInventory judges the ACM inventory, merges its findings with the
// endpoint findings of the same certificate, links both, and turns expiry
// findings of certificates already replaced elsewhere (in ACM, at rest, on
// other endpoints) into stale deployments, and served certificates that
// ACM or a place at rest holds a renewal of into stale deployments
// whatever their time left. It edits and extends fs, which is Result's own. It runs the
// passes of an inventoryJudgement in order; each pass states what it
// leaves true for the next.
func (e *Evaluator) judgeInventory(fs []Finding) ([]Finding, []ACMCertificate) {
	if len(e.inv.acm) == 0 && len(e.rest) == 0 && !slices.ContainsFunc(fs, func(f Finding) bool { return f.Kind == Expiring || f.Kind == Expired }) {
		return fs, nil
	}
	j := &inventoryJudgement{e: e, sv: e.servedIndex(), drop: map[int]bool{}}
	j.judgeACM()
	// The findings are Result's own: extended and edited in place.
	j.out = slices.Grow(fs, len(j.groups))
	j.link()
	j.mergeACM()
	if !j.lookFor() {
		return dropFindings(j.out, j.drop), sortACM(j.report)
	}
	j.candidates()
	j.markStale()
	j.staleUnexpired()
	j.foldInconsistent()
	return dropFindings(j.out, j.drop), sortACM(j.report)
}

// inventoryJudgement is one judgeInventory: the ACM inventory, the
// findings it edits and extends, and what its passes hand each other. A
// finding is named by its index in out throughout; findings are only
// appended, and those to remove are marked in drop and removed at the end,
// so no index moves.
type inventoryJudgement struct {
	e  *Evaluator
	sv servedIndex

	// certs is the ACM inventory sorted by ARN; report, verdicts and
	// servedFP are by index in certs (the report entry, the judgement, the
	// fingerprint of the served certificate it is, "" when none is), and
	// byARN finds the index of an ARN.
	certs    []acmcert.Certificate
	report   []ACMCertificate
	verdicts []verdict
	servedFP []string
	byARN    map[string]int
	// groups are the ACM certificates by certificate: the copies of one
	// (one serial imported into several regions) are one group.
	groups []*acmGroup

	// out are the findings; drop marks those to remove.
	out  []Finding
	drop map[int]bool
	// leafExpiry finds, by fingerprint, the finding about a served leaf's
	// own expiry: the endpoints' expiry finding, or the ACM finding that
	// took its place.
	leafExpiry map[string]int
	// broken are the fingerprints of served certificates whose chain does
	// not verify (untrusted, self-signed): no replacement for anything.
	broken map[string]bool

	// wanted are the names a newer certificate must carry to be a
	// candidate; cands the candidates, newest first; idx the candidates
	// carrying each name, newest first.
	wanted map[string]bool
	cands  []newer
	idx    map[string][]int
	// staleHeld finds, by the fingerprint of a served certificate that a
	// certificate held in ACM or at rest replaced, its stale deployment
	// finding.
	staleHeld map[string]int
}

// acmGroup is the copies of one ACM certificate.
type acmGroup struct {
	fp      string // served fingerprint
	pem     string // fingerprint of ACM's PEM
	members []int
	best    verdict
	bestAt  int
	refs    []ACMRef
}

// judgeACM judges each ACM certificate and groups copies of one
// certificate. Afterwards certs, report, verdicts, servedFP and byARN hold
// an entry for every ACM certificate; every certificate is in exactly one
// group, whose best verdict (bestAt) is its members' most urgent (the first
// of them, by ARN, on a tie) and whose fp is the served fingerprint of any
// member linked to a served leaf, by ACM's fingerprint or else by serial
// number and NotAfter.
func (j *inventoryJudgement) judgeACM() {
	e := j.e
	// ACM certificates are linked to served leaves by serial number.
	var bySerial map[string][]string
	if len(e.inv.acm) > 0 {
		bySerial = map[string][]string{}
		for i := range e.certs {
			c := &e.certs[i]
			bySerial[c.Serial] = append(bySerial[c.Serial], c.SHA256)
		}
		for _, fps := range bySerial {
			slices.Sort(fps)
		}
	}
	j.certs = slices.Clone(e.inv.acm)
	slices.SortFunc(j.certs, func(a, b acmcert.Certificate) int { return strings.Compare(a.ARN, b.ARN) })
	byKey := map[string]*acmGroup{}
	j.report = make([]ACMCertificate, len(j.certs))
	j.byARN = make(map[string]int, len(j.certs))
	j.verdicts = make([]verdict, len(j.certs))
	j.servedFP = make([]string, len(j.certs))
	for i := range j.certs {
		c := &j.certs[i]
		j.byARN[c.ARN] = i
		fp := ""
		if c.Fingerprint != "" && e.cert(c.Fingerprint) != nil {
			fp = c.Fingerprint
		} else if c.Serial != "" {
			for _, cand := range bySerial[acmcert.NormalizeSerial(c.Serial)] {
				if c.NotAfter.IsZero() || e.cert(cand).NotAfter == At(c.NotAfter) {
					fp = cand
					break
				}
			}
		}
		v := e.judgeACM(c, fp != "")
		j.verdicts[i] = v
		eps := j.sv.endpoints(fp)
		j.report[i] = ACMCertificate{Certificate: *c, Renewal: v.state, RenewBy: v.renewBy, SHA256: cmp.Or(fp, c.Fingerprint), Endpoints: eps,
			Consumers: e.consumersOf(c.ARN, eps)}
		j.servedFP[i] = fp
		key := "arn:" + c.ARN
		if c.Serial != "" {
			key = "serial:" + acmcert.NormalizeSerial(c.Serial) + ":" + stamp(c.NotAfter)
		}
		g := byKey[key]
		if g == nil {
			g = &acmGroup{fp: fp, bestAt: i, best: v}
			byKey[key] = g
			j.groups = append(j.groups, g)
		}
		g.members = append(g.members, i)
		g.fp, g.pem = cmp.Or(g.fp, fp), cmp.Or(g.pem, c.Fingerprint)
		g.refs = append(g.refs, refOf(c, v.state))
		if v.tier > g.best.tier {
			g.best, g.bestAt = v, i
		}
	}
}

// link gives every finding about a served certificate that ACM holds the
// references of its ACM copies, and indexes the findings that the passes
// after it look for. Afterwards broken holds every served certificate with
// an untrusted or self-signed finding, and leafExpiry, when there is any
// ACM certificate or one held at rest, every expiry finding about a served
// leaf itself (its deadline is the leaf's NotAfter, not an
// intermediate's).
func (j *inventoryJudgement) link() {
	refs := map[string][]ACMRef{}
	for _, g := range j.groups {
		if g.fp != "" {
			refs[g.fp] = append(refs[g.fp], g.refs...)
		}
	}
	j.leafExpiry = map[string]int{}
	j.broken = map[string]bool{}
	for i := range j.out {
		f := &j.out[i]
		if r, ok := refs[f.Certificate]; ok {
			f.withRecords(func(rs *Records) { rs.ACM = r })
		}
		switch f.Kind {
		case ChainUntrusted, SelfSigned:
			j.broken[f.Certificate] = true
		case Expiring, Expired:
			if c := j.e.cert(f.Certificate); (len(j.groups) > 0 || len(j.e.rest) > 0) && c != nil && f.Deadline.Equal(c.NotAfter.Time()) {
				j.leafExpiry[f.Certificate] = i
			}
		}
	}
}

// mergeACM adds each ACM group's finding, one per certificate and never
// two about one served leaf. A served certificate ACM renews in time loses
// its endpoints' expiry finding (the endpoints get the renewal); one with
// an ACM finding has that finding in place of its expiry finding, at the
// higher tier of the two, and leafExpiry points at it. An unserved ACM
// certificate's finding is about its ARN (Name) and lists no endpoint.
func (j *inventoryJudgement) mergeACM() {
	e := j.e
	for _, g := range j.groups {
		c, v := &j.certs[g.bestAt], g.best
		if g.fp != "" {
			i, hasExpiry := j.leafExpiry[g.fp]
			if v.kind == "" {
				if hasExpiry && j.out[i].Kind == Expiring {
					j.drop[i] = true // ACM renews it in time; the endpoints get the renewal
				}
				continue
			}
			eps := j.sv.endpoints(g.fp)
			f := Finding{
				Kind: v.kind, Tier: v.tier, Certificate: g.fp, Subject: e.cert(g.fp).Subject,
				Deadline: At(c.NotAfter), Endpoints: eps, Message: v.msg + e.directNote(c, eps), Records: recordsOf(Records{ACM: g.refs}),
			}
			if hasExpiry {
				f.Tier = max(f.Tier, j.out[i].Tier)
				j.drop[i] = true
			}
			j.leafExpiry[g.fp] = len(j.out)
			j.out = append(j.out, f)
			continue
		}
		if v.kind == "" {
			continue
		}
		deadline := c.NotAfter.UTC()
		if !v.deadline.IsZero() {
			deadline = v.deadline
		}
		// Certificate is ACM's PEM's fingerprint when it gives one; the
		// finding lists no endpoint (an empty list, not none at all).
		j.out = append(j.out, Finding{
			Kind: v.kind, Tier: v.tier, Certificate: g.pem, Name: c.ARN, Subject: c.DomainName,
			Deadline: At(deadline), Endpoints: []Endpoint{}, Message: v.msg, Records: recordsOf(Records{ACM: g.refs}),
		})
	}
}

// oldOf returns the certificate the expiry finding out[i] is about, when a
// newer certificate may explain it (it is kept, and about a served leaf
// with names or an ACM certificate in use), with the ARN of that ACM
// certificate. The certificate is built again rather than kept, as a fleet
// can have tens of thousands.
func (j *inventoryJudgement) oldOf(i int) (newer, string, bool) {
	f := &j.out[i]
	if j.drop[i] || (f.Kind != Expiring && f.Kind != Expired) {
		return newer{}, "", false
	}
	if c := j.e.cert(f.Certificate); c != nil && f.Deadline.Equal(c.NotAfter.Time()) {
		if len(c.DNSNames) == 0 {
			return newer{}, "", false
		}
		return newer{names: c.DNSNames, notBefore: c.NotBefore.Time(), notAfter: c.NotAfter.Time(), serial: c.Serial, fp: f.Certificate}, "", true
	}
	if k, ok := j.byARN[f.Name]; j.e.cert(f.Certificate) == nil && ok && j.verdicts[k].inUse {
		c := &j.certs[k]
		return newer{names: c.Names(), notBefore: c.NotBefore, notAfter: c.NotAfter, serial: acmcert.NormalizeSerial(c.Serial), arn: c.ARN}, c.ARN, true
	}
	return newer{}, "", false
}

// lookFor fills wanted with the names a candidate must carry to be looked
// at (the first name of each certificate oldOf returns, and the wildcard
// that would cover it), so that only candidates for these are built. It
// reports whether any newer certificate can matter: false when nothing is
// wanted and there is no certificate in ACM or at rest.
func (j *inventoryJudgement) lookFor() bool {
	j.wanted = map[string]bool{}
	for i := range j.out {
		old, _, ok := j.oldOf(i)
		if !ok || len(old.names) == 0 {
			continue
		}
		first := discovery.NormalizeName(old.names[0])
		j.wanted[first] = true
		if _, parent, ok := strings.Cut(first, "."); ok && !strings.HasPrefix(first, "*.") {
			j.wanted["*."+parent] = true
		}
	}
	return len(j.wanted) > 0 || len(j.certs) > 0 || len(j.e.rest) > 0
}

// candidates gathers the newer certificates: ACM certificates, leaves
// held at rest and served certificates whose chain verifies, valid now and
// fresh (outside every expiry tier), as a renewal is; a certificate that
// is itself about to expire is no replacement. Every fresh issued ACM
// certificate and every verified fresh leaf at rest is one (an inventory
// is small, a candidate at rest is built without text), so that an
// endpoint serving an older certificate than ACM or a place at rest holds
// is found whatever its time left; a served one only when it carries a
// wanted name and is not held at rest. Afterwards cands are newest first (then by ARN
// and fingerprint) and idx maps each name to the candidates carrying it,
// in that order.
func (j *inventoryJudgement) candidates() {
	e, now := j.e, j.e.now
	fresh := func(notBefore, notAfter time.Time) bool {
		return !notBefore.After(now) && TierFor(notBefore, notAfter, e.rules.Tiers, now) == None
	}
	carries := func(names []string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return j.wanted[discovery.NormalizeName(n)] })
	}
	for i := range j.certs {
		c := &j.certs[i]
		if c.Status != acmcert.StatusIssued || c.Partial || !fresh(c.NotBefore, c.NotAfter) {
			continue
		}
		fp := j.report[i].SHA256
		advice := "attach it in place of the old one (load balancers, CloudFront and API Gateway then follow its renewals); elsewhere install it and reload the server"
		switch c.Type {
		case acmcert.Private:
			advice = "attach it in place of the old one; on servers outside AWS, export it again from ACM, install it and reload the server"
		case acmcert.Imported:
			advice = "the resources using the ACM certificate already serve it; install the same certificate (the one imported) on the stale addresses, or attach the ACM certificate to what serves them, and reload"
		}
		j.cands = append(j.cands, newer{
			desc:  fmt.Sprintf("ACM certificate %q (%s; serial %s, not after %s, %s)", c.DomainName, c.ARN, acmcert.NormalizeSerial(c.Serial), stamp(c.NotAfter), usage(c, j.servedFP[i] != "")),
			names: c.Names(), notBefore: c.NotBefore, notAfter: c.NotAfter, serial: acmcert.NormalizeSerial(c.Serial), fp: fp, arn: c.ARN, advice: advice,
		})
	}
	held := map[string]bool{}
	for i := range e.rest {
		r := &e.rest[i]
		if r.CA || !r.Verified || len(r.DNSNames) == 0 || !fresh(r.NotBefore, r.NotAfter) {
			continue
		}
		held[r.SHA256] = true
		j.cands = append(j.cands, restCandidate(r))
	}
	for i := range e.certs {
		c := &e.certs[i]
		fp := c.SHA256
		if len(j.wanted) == 0 || j.broken[fp] || held[fp] || !fresh(c.NotBefore.Time(), c.NotAfter.Time()) || !carries(c.DNSNames) {
			continue
		}
		j.cands = append(j.cands, newer{
			desc:  fmt.Sprintf("certificate %q (sha256 %s…, not after %s) served by %s", c.Subject, fp[:min(12, len(fp))], stamp(c.NotAfter.Time()), endpointNames(j.sv.endpoints(fp), 3)),
			names: normalizeNames(c.DNSNames), notBefore: c.NotBefore.Time(), notAfter: c.NotAfter.Time(), serial: c.Serial, fp: fp,
			advice: "install it on the endpoints listed and reload them",
		})
	}
	slices.SortFunc(j.cands, func(a, b newer) int {
		return cmp.Or(b.notAfter.Compare(a.notAfter), strings.Compare(a.arn, b.arn), strings.Compare(a.fp, b.fp))
	})
	j.idx = map[string][]int{}
	for i, n := range j.cands {
		for _, name := range n.names {
			j.idx[name] = append(j.idx[name], i)
		}
	}
}

// markStale turns each expiry finding that a newer certificate explains
// into a stale deployment, in place (same index, tier and endpoints), with
// a message naming the replacement. Afterwards each served certificate
// whose expiry finding it turned carries the replacement (RenewedBy), and
// staleHeld holds those a certificate in ACM or at rest replaced.
func (j *inventoryJudgement) markStale() {
	j.staleHeld = map[string]int{}
	for i := range j.out {
		old, arn, ok := j.oldOf(i)
		if !ok {
			continue
		}
		old.names = normalizeNames(old.names)
		n, ok := newestFor(old, j.cands, j.idx, j.sv, false)
		if !ok {
			continue
		}
		f := &j.out[i]
		f.Kind = StaleDeployment
		if arn != "" {
			c := &j.certs[j.byARN[arn]]
			f.Message = fmt.Sprintf("ACM certificate %s, which %s, is still %s, although a newer certificate for the same names exists: %s. The renewal happened but the rollout did not: %s",
				acmLabel(c), j.e.lifeState(old.notAfter), usage(c, false), n.description(), n.advice)
			continue
		}
		f.Message = j.e.staleMessage(f, old, n)
		j.e.cert(old.fp).RenewedBy = n.replacement()
		if n.held() {
			j.staleHeld[old.fp] = i
		}
	}
}

// staleUnexpired adds a stale deployment for each served certificate with
// no expiry finding that ACM or a place at rest holds a renewal of,
// whatever its time left, at least at the tiers of a notice and of an
// inconsistent deployment. A served certificate that is in ACM itself
// (linked by serial) is current there, not stale. Afterwards these too
// carry their replacement (RenewedBy) and are in staleHeld.
func (j *inventoryJudgement) staleUnexpired() {
	e, now := j.e, j.e.now
	inACM := map[string]bool{}
	for _, g := range j.groups {
		if g.fp != "" {
			inACM[g.fp] = true
		}
	}
	for i := range e.certs {
		c := &e.certs[i]
		fp := c.SHA256
		if _, ok := j.leafExpiry[fp]; ok || inACM[fp] || len(c.DNSNames) == 0 {
			continue
		}
		old := newer{names: normalizeNames(c.DNSNames), notBefore: c.NotBefore.Time(), notAfter: c.NotAfter.Time(), serial: c.Serial, fp: fp}
		n, ok := newestFor(old, j.cands, j.idx, j.sv, true)
		if !ok {
			continue
		}
		f := Finding{
			Kind: StaleDeployment, Tier: max(Notice, e.rules.Inconsistent, TierFor(c.NotBefore.Time(), c.NotAfter.Time(), e.rules.Tiers, now)),
			Certificate: fp, Subject: c.Subject, Deadline: c.NotAfter, Endpoints: j.sv.endpoints(fp),
		}
		f.Message = e.staleMessage(&f, old, n)
		c.RenewedBy = n.replacement()
		j.staleHeld[fp] = len(j.out)
		j.out = append(j.out, f)
	}
}

// foldInconsistent drops each inconsistent deployment whose oldest
// certificate a renewal held in ACM or at rest replaced: it is that stale
// deployment, which takes the higher tier of the two. Afterwards no inconsistent deployment
// is kept beside the stale deployment of its oldest certificate.
func (j *inventoryJudgement) foldInconsistent() {
	for i := range j.out {
		f := &j.out[i]
		if f.Kind != InconsistentDeployment {
			continue
		}
		if k, ok := j.staleHeld[f.Certificate]; ok {
			j.out[k].Tier = max(j.out[k].Tier, f.Tier)
			j.drop[i] = true
		}
	}
}

// lifeState says "expires in 5 days (2030-01-06)" or "expired 2 days ago
// (...)".
func (e *Evaluator) lifeState(notAfter time.Time) string {
	if !notAfter.After(e.now) {
		return fmt.Sprintf("expired %s ago (%s)", humanBetween(notAfter, e.now), stamp(notAfter))
	}
	return fmt.Sprintf("expires in %s (%s)", humanBetween(e.now, notAfter), stamp(notAfter))
}

// staleMessage explains the stale deployment of old, which f's endpoints
// serve, replaced by n: the stale addresses, the newer certificate (with
// its ARN when in ACM) and what to do.
func (e *Evaluator) staleMessage(f *Finding, old newer, n newer) string {
	if n.rest != nil {
		return e.restStaleMessage(f, old, n)
	}
	verb := "serve"
	if len(f.Endpoints) == 1 {
		verb = "serves"
	}
	newer := "a newer certificate for the same names exists"
	if n.arn != "" {
		newer = "ACM holds a renewed certificate for the same names"
	}
	return fmt.Sprintf("%s still %s %q (serial %s), which %s, although %s: %s. The renewal happened but the rollout did not: %s",
		endpointList(f.Endpoints, 8), verb, f.Subject, old.serial, e.lifeState(old.notAfter), newer, n.desc, n.advice)
}

// dropFindings removes the findings whose indices are in drop.
func dropFindings(out []Finding, drop map[int]bool) []Finding {
	if len(drop) == 0 {
		return out
	}
	final := make([]Finding, 0, len(out)-len(drop))
	for i, f := range out {
		if !drop[i] {
			final = append(final, f)
		}
	}
	return final
}

// sortACM orders the ACM report by NotAfter and ARN; an empty report is nil.
func sortACM(report []ACMCertificate) []ACMCertificate {
	if len(report) == 0 {
		return nil
	}
	slices.SortFunc(report, func(a, b ACMCertificate) int {
		return cmp.Or(a.NotAfter.Compare(b.NotAfter), strings.Compare(a.ARN, b.ARN))
	})
	return report
}

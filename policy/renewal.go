package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/acm/acmcert"
)

// judgeInventory judges the ACM inventory, merges its findings with the
// endpoint findings of the same certificate, links both, and turns expiry
// findings of certificates already replaced elsewhere into stale
// deployments. It edits and extends fs, which is Result's own.
func (e *Evaluator) judgeInventory(fs []Finding) ([]Finding, []ACMCertificate) {
	if len(e.inv.acm) == 0 && !slices.ContainsFunc(fs, func(f Finding) bool { return f.Kind == Expiring || f.Kind == Expired }) {
		return fs, nil
	}
	now := e.now
	sv := e.servedIndex()
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

	// Judge each ACM certificate; group copies of one certificate (the
	// same serial imported into several regions) into one finding.
	certs := slices.Clone(e.inv.acm)
	slices.SortFunc(certs, func(a, b acmcert.Certificate) int { return strings.Compare(a.ARN, b.ARN) })
	type group struct {
		fp      string // served fingerprint
		pem     string // fingerprint of ACM's PEM
		members []int
		best    verdict
		bestAt  int
		refs    []ACMRef
	}
	var groups []*group
	byKey := map[string]*group{}
	report := make([]ACMCertificate, len(certs))
	byARN := make(map[string]int, len(certs))
	verdicts := make([]verdict, len(certs))
	servedFP := make([]string, len(certs))
	for i := range certs {
		c := &certs[i]
		byARN[c.ARN] = i
		fp := ""
		if c.Fingerprint != "" && e.cert(c.Fingerprint) != nil {
			fp = c.Fingerprint
		} else if c.Serial != "" {
			for _, cand := range bySerial[acmcert.NormalizeSerial(c.Serial)] {
				if c.NotAfter.IsZero() || e.cert(cand).NotAfter.Truncate(time.Second).Equal(c.NotAfter.Truncate(time.Second)) {
					fp = cand
					break
				}
			}
		}
		v := e.judgeACM(c, fp != "")
		verdicts[i] = v
		report[i] = ACMCertificate{Certificate: *c, Renewal: v.state, RenewBy: v.renewBy, SHA256: cmp.Or(fp, c.Fingerprint), Endpoints: sv.endpoints(fp),
			Consumers: e.consumersOf(c.ARN)}
		servedFP[i] = fp
		key := "arn:" + c.ARN
		if c.Serial != "" {
			key = "serial:" + acmcert.NormalizeSerial(c.Serial) + ":" + stamp(c.NotAfter)
		}
		g := byKey[key]
		if g == nil {
			g = &group{fp: fp, bestAt: i, best: v}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.members = append(g.members, i)
		g.fp, g.pem = cmp.Or(g.fp, fp), cmp.Or(g.pem, c.Fingerprint)
		g.refs = append(g.refs, refOf(c, v.state))
		if v.tier > g.best.tier {
			g.best, g.bestAt = v, i
		}
	}

	// Findings by certificate, and which are expiry findings about the leaf.
	refs := map[string][]ACMRef{}
	for _, g := range groups {
		if g.fp != "" {
			refs[g.fp] = append(refs[g.fp], g.refs...)
		}
	}
	// The findings are Result's own: extended and edited in place.
	out := slices.Grow(fs, len(groups))
	leafExpiry := map[string]int{} // fp -> index in out
	broken := map[string]bool{}
	for i := range out {
		f := &out[i]
		if r, ok := refs[f.Certificate]; ok {
			f.ACM = r
		}
		switch f.Kind {
		case ChainUntrusted, SelfSigned:
			broken[f.Certificate] = true
		case Expiring, Expired:
			if c := e.cert(f.Certificate); len(groups) > 0 && c != nil && f.Deadline.Equal(c.NotAfter) {
				leafExpiry[f.Certificate] = i
			}
		}
	}
	drop := map[int]bool{}
	for _, g := range groups {
		c, v := &certs[g.bestAt], g.best
		if g.fp != "" {
			i, hasExpiry := leafExpiry[g.fp]
			if v.kind == "" {
				if hasExpiry && out[i].Kind == Expiring {
					drop[i] = true // ACM renews it in time; the endpoints get the renewal
				}
				continue
			}
			eps := sv.endpoints(g.fp)
			f := Finding{
				Kind: v.kind, Tier: v.tier, Certificate: g.fp, Subject: e.cert(g.fp).Subject,
				Deadline: c.NotAfter.UTC(), Endpoints: eps, Message: v.msg + e.directNote(c, eps), ACM: g.refs,
			}
			if hasExpiry {
				f.Tier = max(f.Tier, out[i].Tier)
				drop[i] = true
			}
			leafExpiry[g.fp] = len(out)
			out = append(out, f)
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
		out = append(out, Finding{
			Kind: v.kind, Tier: v.tier, Certificate: g.pem, Name: c.ARN, Subject: c.DomainName,
			Deadline: deadline, Endpoints: []Endpoint{}, Message: v.msg, ACM: g.refs,
		})
	}

	// The expiry findings a newer certificate may explain: the certificate
	// each is about (built again in the last pass rather than kept, as a
	// fleet can have tens of thousands), and the names a candidate must
	// carry to be looked at, so that only candidates for these are built.
	oldOf := func(i int) (newer, string, bool) {
		f := &out[i]
		if drop[i] || (f.Kind != Expiring && f.Kind != Expired) {
			return newer{}, "", false
		}
		if c := e.cert(f.Certificate); c != nil && f.Deadline.Equal(c.NotAfter) {
			if len(c.DNSNames) == 0 {
				return newer{}, "", false
			}
			return newer{names: c.DNSNames, notBefore: c.NotBefore, notAfter: c.NotAfter, serial: c.Serial, fp: f.Certificate}, "", true
		}
		if j, ok := byARN[f.Name]; e.cert(f.Certificate) == nil && ok && verdicts[j].inUse {
			c := &certs[j]
			return newer{names: c.Names(), notBefore: c.NotBefore, notAfter: c.NotAfter, serial: acmcert.NormalizeSerial(c.Serial), arn: c.ARN}, c.ARN, true
		}
		return newer{}, "", false
	}
	wanted := map[string]bool{}
	for i := range out {
		old, _, ok := oldOf(i)
		if !ok || len(old.names) == 0 {
			continue
		}
		first := discovery.NormalizeName(old.names[0])
		wanted[first] = true
		if _, parent, ok := strings.Cut(first, "."); ok && !strings.HasPrefix(first, "*.") {
			wanted["*."+parent] = true
		}
	}
	if len(wanted) == 0 && len(certs) == 0 {
		return dropFindings(out, drop), sortACM(report)
	}
	carries := func(names []string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return wanted[discovery.NormalizeName(n)] })
	}

	// Newer certificates: ACM certificates and served certificates whose
	// chain verifies, valid now and fresh (outside every expiry tier), as a
	// renewal is; a certificate that is itself about to expire is no
	// replacement.
	fresh := func(notBefore, notAfter time.Time) bool {
		return !notBefore.After(now) && TierFor(notBefore, notAfter, e.rules.Tiers, now) == None
	}
	// ACM's are all candidates (an inventory is small), so that an
	// endpoint serving an older certificate than ACM holds is found
	// whatever its time left.
	var cands []newer
	for i := range certs {
		c := &certs[i]
		if c.Status != acmcert.StatusIssued || c.Partial || !fresh(c.NotBefore, c.NotAfter) {
			continue
		}
		fp := report[i].SHA256
		advice := "attach it in place of the old one (load balancers, CloudFront and API Gateway then follow its renewals); elsewhere install it and reload the server"
		switch c.Type {
		case acmcert.Private:
			advice = "attach it in place of the old one; on servers outside AWS, export it again from ACM, install it and reload the server"
		case acmcert.Imported:
			advice = "the resources using the ACM certificate already serve it; install the same certificate (the one imported) on the stale addresses, or attach the ACM certificate to what serves them, and reload"
		}
		cands = append(cands, newer{
			desc:  fmt.Sprintf("ACM certificate %q (%s; serial %s, not after %s, %s)", c.DomainName, c.ARN, acmcert.NormalizeSerial(c.Serial), stamp(c.NotAfter), usage(c, servedFP[i] != "")),
			names: c.Names(), notBefore: c.NotBefore, notAfter: c.NotAfter, serial: acmcert.NormalizeSerial(c.Serial), fp: fp, arn: c.ARN, advice: advice,
		})
	}
	for i := range e.certs {
		c := &e.certs[i]
		fp := c.SHA256
		if len(wanted) == 0 || broken[fp] || !fresh(c.NotBefore, c.NotAfter) || !carries(c.DNSNames) {
			continue
		}
		cands = append(cands, newer{
			desc:  fmt.Sprintf("certificate %q (sha256 %s…, not after %s) served by %s", c.Subject, fp[:min(12, len(fp))], stamp(c.NotAfter), endpointNames(sv.endpoints(fp), 3)),
			names: normalizeNames(c.DNSNames), notBefore: c.NotBefore, notAfter: c.NotAfter, serial: c.Serial, fp: fp,
			advice: "install it on the endpoints listed and reload them",
		})
	}
	slices.SortFunc(cands, func(a, b newer) int {
		return cmp.Or(b.notAfter.Compare(a.notAfter), strings.Compare(a.arn, b.arn), strings.Compare(a.fp, b.fp))
	})
	idx := map[string][]int{} // name -> candidates carrying it, newest first
	for i, n := range cands {
		for _, name := range n.names {
			idx[name] = append(idx[name], i)
		}
	}
	staleACM := map[string]int{} // fp of an old served certificate an ACM one replaced -> index in out
	for i := range out {
		old, arn, ok := oldOf(i)
		if !ok {
			continue
		}
		old.names = normalizeNames(old.names)
		n, ok := newestFor(old, cands, idx, sv, false)
		if !ok {
			continue
		}
		f := &out[i]
		f.Kind = StaleDeployment
		if arn != "" {
			c := &certs[byARN[arn]]
			f.Message = fmt.Sprintf("ACM certificate %s, which %s, is still %s, although a newer certificate for the same names exists: %s. The renewal happened but the rollout did not: %s",
				acmLabel(c), e.lifeState(old.notAfter), usage(c, false), n.desc, n.advice)
			continue
		}
		f.Message = e.staleMessage(f, old, n)
		if n.arn != "" {
			staleACM[old.fp] = i
		}
	}

	// Served certificates with no expiry finding that ACM holds a renewal
	// of: stale whatever their time left. A served certificate that is in
	// ACM itself (linked by serial) is current there, not stale.
	inACM := map[string]bool{}
	for _, g := range groups {
		if g.fp != "" {
			inACM[g.fp] = true
		}
	}
	for i := range e.certs {
		c := &e.certs[i]
		fp := c.SHA256
		if _, ok := leafExpiry[fp]; ok || inACM[fp] || len(c.DNSNames) == 0 {
			continue
		}
		old := newer{names: normalizeNames(c.DNSNames), notBefore: c.NotBefore, notAfter: c.NotAfter, serial: c.Serial, fp: fp}
		n, ok := newestFor(old, cands, idx, sv, true)
		if !ok {
			continue
		}
		f := Finding{
			Kind: StaleDeployment, Tier: max(Notice, e.rules.Inconsistent, TierFor(c.NotBefore, c.NotAfter, e.rules.Tiers, now)),
			Certificate: fp, Subject: c.Subject, Deadline: c.NotAfter, Endpoints: sv.endpoints(fp),
		}
		f.Message = e.staleMessage(&f, old, n)
		staleACM[fp] = len(out)
		out = append(out, f)
	}
	// An inconsistent deployment whose oldest certificate an ACM renewal
	// replaced is that stale deployment: one finding, at the higher tier.
	for i := range out {
		f := &out[i]
		if f.Kind != InconsistentDeployment {
			continue
		}
		if j, ok := staleACM[f.Certificate]; ok {
			out[j].Tier = max(out[j].Tier, f.Tier)
			drop[i] = true
		}
	}
	return dropFindings(out, drop), sortACM(report)
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

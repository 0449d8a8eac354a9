package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/acm"
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
	slices.SortFunc(certs, func(a, b acm.Certificate) int { return strings.Compare(a.ARN, b.ARN) })
	type group struct {
		fp      string
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
	for i := range certs {
		c := &certs[i]
		byARN[c.ARN] = i
		fp := ""
		if c.Serial != "" {
			for _, cand := range bySerial[acm.NormalizeSerial(c.Serial)] {
				if c.NotAfter.IsZero() || e.cert(cand).NotAfter.Truncate(time.Second).Equal(c.NotAfter.Truncate(time.Second)) {
					fp = cand
					break
				}
			}
		}
		v := e.judgeACM(c, fp != "")
		verdicts[i] = v
		report[i] = ACMCertificate{Certificate: *c, Renewal: v.state, RenewBy: v.renewBy, SHA256: fp, Endpoints: sv.endpoints(fp)}
		key := "arn:" + c.ARN
		if c.Serial != "" {
			key = "serial:" + acm.NormalizeSerial(c.Serial) + ":" + stamp(c.NotAfter)
		}
		g := byKey[key]
		if g == nil {
			g = &group{fp: fp, bestAt: i, best: v}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.members = append(g.members, i)
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
			f := Finding{
				Kind: v.kind, Tier: v.tier, Certificate: g.fp, Subject: e.cert(g.fp).Subject,
				Deadline: c.NotAfter.UTC(), Endpoints: sv.endpoints(g.fp), Message: v.msg, ACM: g.refs,
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
		out = append(out, Finding{
			Kind: v.kind, Tier: v.tier, Name: c.ARN, Subject: c.DomainName,
			Deadline: c.NotAfter.UTC(), Message: v.msg, ACM: g.refs,
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
		if j, ok := byARN[f.Name]; f.Certificate == "" && ok && verdicts[j].inUse {
			c := &certs[j]
			return newer{names: c.Names(), notBefore: c.NotBefore, notAfter: c.NotAfter, serial: acm.NormalizeSerial(c.Serial), arn: c.ARN}, c.ARN, true
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
	if len(wanted) == 0 {
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
	var cands []newer
	for i := range certs {
		c := &certs[i]
		if c.Status != acm.StatusIssued || c.Partial || !fresh(c.NotBefore, c.NotAfter) || !carries(c.Names()) {
			continue
		}
		fp := report[i].SHA256
		advice := "attach it in place of the old one (load balancers, CloudFront and API Gateway then follow its renewals); elsewhere install it and reload the server"
		if c.Type == acm.Private {
			advice = "attach it in place of the old one; on servers outside AWS, export it again from ACM, install it and reload the server"
		}
		cands = append(cands, newer{
			desc:  fmt.Sprintf("ACM certificate %q (%s; serial %s, not after %s, %s)", c.DomainName, c.ARN, acm.NormalizeSerial(c.Serial), stamp(c.NotAfter), usage(c, fp != "")),
			names: c.Names(), notBefore: c.NotBefore, notAfter: c.NotAfter, serial: acm.NormalizeSerial(c.Serial), fp: fp, arn: c.ARN, advice: advice,
		})
	}
	for i := range e.certs {
		c := &e.certs[i]
		fp := c.SHA256
		if broken[fp] || !fresh(c.NotBefore, c.NotAfter) || !carries(c.DNSNames) {
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
	for i := range out {
		old, arn, ok := oldOf(i)
		if !ok {
			continue
		}
		old.names = normalizeNames(old.names)
		n, ok := newestFor(old, cands, idx, sv)
		if !ok {
			continue
		}
		f := &out[i]
		what := fmt.Sprintf("The endpoints listed still serve %q, which %%s,", f.Subject)
		if arn != "" {
			c := &certs[byARN[arn]]
			what = fmt.Sprintf("ACM certificate %s, which %%s, is still %s,", acmLabel(c), usage(c, false))
		}
		state := fmt.Sprintf("expires in %s (%s)", humanBetween(now, old.notAfter), stamp(old.notAfter))
		if !old.notAfter.After(now) {
			state = fmt.Sprintf("expired %s ago (%s)", humanBetween(old.notAfter, now), stamp(old.notAfter))
		}
		f.Kind = StaleDeployment
		f.Message = fmt.Sprintf(what+" although a newer certificate for the same names exists: %s. The renewal happened but the rollout did not: %s", state, n.desc, n.advice)
	}
	return dropFindings(out, drop), sortACM(report)
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

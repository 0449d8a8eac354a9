package policy

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/acm"
	"github.com/certwatch/certwatch/discovery/route53"
)

// Kinds of finding about renewal: from ACM inventories, and from comparing
// what endpoints serve with newer certificates seen elsewhere.
const (
	// RenewalOverdue: ACM renews this certificate itself, but it is still
	// not renewed when less than Rules.RenewalMargin is left.
	RenewalOverdue Kind = "renewal_overdue"
	// RenewalFailed: ACM's managed renewal failed or waits for validation
	// (RenewalStatus FAILED or PENDING_VALIDATION). At least a warning from
	// the start, escalating through the expiry tiers.
	RenewalFailed Kind = "renewal_failed"
	// ValidationRecordMissing: ACM renews this certificate, but a DNS
	// validation CNAME it needs is missing or wrong in a public Route 53
	// zone certwatch can see, so the next renewal will fail.
	ValidationRecordMissing Kind = "validation_record_missing"
	// StaleDeployment: an endpoint (or an ACM certificate in use) is served
	// a certificate that is expiring or expired while a newer certificate
	// for the same names exists, in ACM or on another endpoint: the renewal
	// happened, the rollout did not.
	StaleDeployment Kind = "stale_deployment"
)

const (
	// DefaultRenewalMargin is used when Rules.RenewalMargin is zero: an ACM
	// certificate still not renewed 30 days before it expires is overdue.
	DefaultRenewalMargin = 30 * day
	// ACMRenewalWindow is how long before expiry ACM starts managed renewal.
	ACMRenewalWindow = 60 * day
)

// RenewalState is policy's one-word view of an ACM certificate's renewal,
// as listed in reports and inventories.
type RenewalState string

// Renewal states.
const (
	// AutoRenews: ACM renews it and nothing stands in the way yet.
	AutoRenews RenewalState = "auto-renews"
	// RenewalAtRisk: ACM renews it, but a DNS validation record it needs is
	// missing or wrong (ValidationRecordMissing).
	RenewalAtRisk RenewalState = "at-risk"
	// RenewalStateOverdue: ACM should have renewed it by now
	// (RenewalOverdue).
	RenewalStateOverdue RenewalState = "overdue"
	// RenewalStateFailed: ACM's renewal failed or waits for validation
	// (RenewalFailed).
	RenewalStateFailed RenewalState = "failed"
	// RenewalManual: imported; ACM never renews it.
	RenewalManual RenewalState = "manual"
	// RenewalIneligible: ACM will not renew it (typically: not in use).
	RenewalIneligible RenewalState = "ineligible"
	// RenewalExpired: past its NotAfter.
	RenewalExpired RenewalState = "expired"
	// RenewalNotIssued: never issued (pending validation, failed, timed
	// out), revoked or inactive; nothing to renew.
	RenewalNotIssued RenewalState = "not-issued"
	// RenewalUnknown: the certificate could not be described, so its
	// renewal state is unknown; it is judged by expiry alone.
	RenewalUnknown RenewalState = "unknown"
)

// ACMRef names the ACM certificate a finding is about, or that an endpoint
// of the finding serves (matched by serial number).
type ACMRef struct {
	ARN                string            `json:"arn"`
	Region             string            `json:"region"`
	Account            string            `json:"account,omitempty"`
	Type               acm.Type          `json:"type"`
	InUseBy            []string          `json:"in_use_by,omitempty"`
	RenewalStatus      acm.RenewalStatus `json:"renewal_status,omitempty"`
	RenewalEligibility acm.Eligibility   `json:"renewal_eligibility,omitempty"`
	Renewal            RenewalState      `json:"renewal"`
}

// ACMCertificate is an ACM certificate with policy's view of its renewal
// and the probed endpoints that serve it.
type ACMCertificate struct {
	acm.Certificate
	// Renewal is the renewal state.
	Renewal RenewalState `json:"renewal"`
	// RenewBy is the date by which ACM should have renewed it (NotAfter
	// minus the renewal margin), for certificates ACM renews.
	RenewBy time.Time `json:"renew_by,omitzero"`
	// SHA256 is the fingerprint of the served certificate with the same
	// serial number, when a probed endpoint serves it.
	SHA256 string `json:"sha256,omitempty"`
	// Endpoints are the probed endpoints that serve it.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// inventory is what AddACM and SetZones hand to Result.
type inventory struct {
	acm   []acm.Certificate
	zones []route53.Zone
}

// AddACM adds ACM certificates to judge. Result then judges their renewal,
// links each to the endpoints serving a certificate with the same serial
// number, and uses them to find stale deployments.
func (e *Evaluator) AddACM(certs ...acm.Certificate) {
	e.inv.acm = append(e.inv.acm, certs...)
}

// SetZones sets the Route 53 hosted zones certwatch can see, in which DNS
// validation records of ACM certificates are looked up. Without zones no
// record is claimed missing; renewal messages then name the records to check
// at the DNS provider.
func (e *Evaluator) SetZones(zones []route53.Zone) {
	e.inv.zones = zones
}

func (e *Evaluator) renewalMargin() time.Duration {
	return cmp.Or(e.rules.RenewalMargin, DefaultRenewalMargin)
}

// verdict is the judgement of one ACM certificate.
type verdict struct {
	state   RenewalState
	kind    Kind // "" when there is nothing to report
	tier    Tier
	renewBy time.Time
	msg     string
	inUse   bool
}

// judgeACM judges one ACM certificate at e.now. served says whether a
// probed endpoint serves it, which makes it in use whatever ACM says.
func (e *Evaluator) judgeACM(c *acm.Certificate, served bool) verdict {
	now := e.now
	v := verdict{inUse: c.InUse || served}
	it := acmLabel(c)
	use := usage(c, served)
	if c.NotAfter.IsZero() || (!c.Partial && c.Status != acm.StatusIssued && c.Status != acm.StatusExpired) {
		v.state = RenewalNotIssued
		return v
	}
	if !c.NotAfter.After(now) {
		v.state, v.kind = RenewalExpired, Expired
		ago := fmt.Sprintf("expired %s ago (%s)", humanDuration(now.Sub(c.NotAfter)), stamp(c.NotAfter))
		if !v.inUse {
			v.tier = Info
			v.msg = fmt.Sprintf("ACM certificate %s %s and is not in use; delete it from ACM to keep the inventory clean", it, ago)
			return v
		}
		v.tier = Critical
		advice := "ACM cannot renew an expired certificate: request a new one (aws acm request-certificate) and attach it to every resource listed"
		if c.Type == acm.Imported {
			advice = "renew it with its issuing CA and reimport it into the same ARN (aws acm import-certificate --certificate-arn " + c.ARN + "), which every resource using it picks up"
		}
		v.msg = fmt.Sprintf("ACM certificate %s %s and is still %s; clients reject it now: %s", it, ago, use, advice)
		return v
	}
	tier := TierFor(c.NotBefore, c.NotAfter, e.rules.Tiers, now)
	expires := fmt.Sprintf("expires in %s (%s)", humanDuration(c.NotAfter.Sub(now)), stamp(c.NotAfter))
	report := func(state RenewalState, kind Kind, tier Tier, msg string) verdict {
		v.state = state
		if tier >= Info {
			v.kind, v.tier, v.msg = kind, tier, msg
		}
		return v
	}
	switch {
	case c.Type == acm.Imported:
		msg := fmt.Sprintf("ACM certificate %s was imported, so ACM never renews it: manual renewal required. It %s and is %s; renew it with its issuing CA and reimport it into the same ARN (aws acm import-certificate --certificate-arn %s), which every resource using it picks up", it, expires, use, c.ARN)
		if !v.inUse {
			tier = min(tier, Notice)
		}
		return report(RenewalManual, Expiring, tier, msg)
	case c.Partial:
		return report(RenewalUnknown, Expiring, tier, fmt.Sprintf("ACM certificate %s could not be described (see the discovery failure), so whether ACM renews it is unknown; it %s and is %s: grant acm:DescribeCertificate, then check its renewal in ACM", it, expires, use))
	case c.RenewalEligibility != acm.Eligible:
		if !v.inUse {
			return report(RenewalIneligible, Expiring, min(tier, Notice), fmt.Sprintf("ACM certificate %s is not in use, so ACM will not renew it; it %s: attach it to the resource that needs it (ACM then renews it), or delete it if nothing does", it, expires))
		}
		return report(RenewalIneligible, Expiring, tier, fmt.Sprintf("ACM does not list certificate %s as eligible for managed renewal although it is %s; it %s: request a new certificate (aws acm request-certificate) and attach it to every resource using this one", it, use, expires))
	}

	// ACM renews it (AMAZON_ISSUED or PRIVATE, eligible).
	v.renewBy = c.NotAfter.Add(-e.renewalMargin())
	records := e.validationRecords(c)
	switch c.RenewalStatus {
	case acm.RenewalFailed, acm.RenewalPendingValidation:
		why := "its renewal failed"
		if c.RenewalStatus == acm.RenewalPendingValidation {
			why = "its renewal waits for domain validation"
		}
		if c.RenewalStatusReason != "" {
			why += " (" + c.RenewalStatusReason + ")"
		}
		if pending := pendingDomains(c); len(pending) > 0 {
			why += " of " + strings.Join(pending, ", ")
		}
		msg := fmt.Sprintf("ACM could not renew certificate %s: %s. It %s and is %s. To do: %s. Once fixed, ACM retries on its own; if the status does not change within a day, request a new certificate and attach it instead",
			it, why, expires, use, renewalAdvice(c, records))
		return report(RenewalStateFailed, RenewalFailed, max(Warning, tier), msg)
	}
	if !now.Before(v.renewBy) {
		status := string(c.RenewalStatus)
		if status == "" {
			status = "none reported"
		}
		msg := fmt.Sprintf("ACM should have renewed certificate %s by %s (%s before it expires; ACM starts %s before), but it %s and is %s (renewal status: %s). To do: %s",
			it, stamp(v.renewBy), humanDuration(e.renewalMargin()), humanDuration(ACMRenewalWindow), expires, use, status, overdueAdvice(c, records))
		return report(RenewalStateOverdue, RenewalOverdue, max(Warning, tier), msg)
	}
	var bad []string
	for _, r := range records {
		if r.visible() && !r.ok() {
			bad = append(bad, r.todo())
		}
	}
	if len(bad) > 0 {
		tier := Notice
		if !now.Before(c.NotAfter.Add(-ACMRenewalWindow)) {
			tier = Warning
		}
		msg := fmt.Sprintf("ACM renews certificate %s, which %s, but its next renewal will fail: a DNS validation record is missing or wrong. %s. ACM starts renewing on %s",
			it, expires, capitalize(strings.Join(bad, "; ")), stamp(c.NotAfter.Add(-ACMRenewalWindow)))
		return report(RenewalAtRisk, ValidationRecordMissing, tier, msg)
	}
	v.state = AutoRenews
	return v
}

// validationRecord is one DNS validation CNAME ACM needs, and what the
// Route 53 zones certwatch sees hold for it.
type validationRecord struct {
	name, value string
	zone        *route53.Zone // public zone that must hold it; nil: none seen
	found       string
	present     bool
}

func (r validationRecord) visible() bool { return r.zone != nil }
func (r validationRecord) ok() bool      { return r.present && r.found == r.value }

// todo says exactly what to do about the record.
func (r validationRecord) todo() string {
	switch {
	case r.zone == nil:
		return fmt.Sprintf("make sure this record exists with the DNS provider of its domain (no public Route 53 zone certwatch can see holds it): name %s, type CNAME, value %s", r.name, r.value)
	case !r.present:
		return fmt.Sprintf("create this record in Route 53 zone %s (%s): name %s, type CNAME, value %s", r.zone.Name, r.zone.ID, r.name, r.value)
	case r.found != r.value:
		return fmt.Sprintf("change CNAME %s in Route 53 zone %s (%s) from %s to %s", r.name, r.zone.Name, r.zone.ID, r.found, r.value)
	}
	return fmt.Sprintf("keep CNAME %s → %s in Route 53 zone %s", r.name, r.value, r.zone.Name)
}

// validationRecords returns the DNS validation records an AMAZON_ISSUED
// certificate needs, renewal's first, each looked up in the public zone
// that must hold it.
func (e *Evaluator) validationRecords(c *acm.Certificate) []validationRecord {
	if c.Type != acm.AmazonIssued {
		return nil
	}
	var out []validationRecord
	seen := map[string]bool{}
	for _, v := range slices.Concat(c.RenewalValidations, c.Validations) {
		if v.Record == nil || !strings.EqualFold(v.Record.Type, "CNAME") || v.Record.Name == "" {
			continue
		}
		name, value := discovery.NormalizeName(v.Record.Name), discovery.NormalizeName(v.Record.Value)
		if seen[name] {
			continue
		}
		seen[name] = true
		r := validationRecord{name: name, value: value}
		if z, ok := route53.PublicZoneFor(e.inv.zones, name); ok {
			r.zone = &z
			r.found, r.present = z.CNAME(name)
		}
		out = append(out, r)
	}
	return out
}

// pendingDomains lists the domains whose renewal validation has not
// succeeded.
func pendingDomains(c *acm.Certificate) []string {
	var out []string
	for _, v := range c.RenewalValidations {
		if v.Status != acm.ValidationSuccess && !slices.Contains(out, v.DomainName) {
			out = append(out, v.DomainName)
		}
	}
	return out
}

// renewalAdvice says what to do about a failed or pending renewal.
func renewalAdvice(c *acm.Certificate, records []validationRecord) string {
	var todo []string
	for _, r := range records {
		if !r.ok() {
			todo = append(todo, r.todo())
		}
	}
	switch c.RenewalStatusReason {
	case "CAA_ERROR":
		todo = append(todo, "a CAA record forbids Amazon from issuing for one of its names: add a CAA record allowing amazon.com (or remove the restrictive one)")
	case "NO_AVAILABLE_CONTACTS":
		todo = append(todo, "email validation has no contact address: switch the certificate to DNS validation")
	case "ADDITIONAL_VERIFICATION_REQUIRED":
		todo = append(todo, "Amazon needs more information to issue for these names: open a case with AWS Support")
	case "DOMAIN_NOT_ALLOWED", "DOMAIN_VALIDATION_DENIED", "INVALID_PUBLIC_DOMAIN":
		todo = append(todo, "Amazon will not issue for one of its names ("+c.RenewalStatusReason+"): request a certificate without it")
	case "PCA_INVALID_STATE", "PCA_ACCESS_DENIED", "PCA_LIMIT_EXCEEDED", "PCA_INVALID_ARN", "PCA_REQUEST_FAILED", "PCA_RESOURCE_NOT_FOUND", "PCA_INVALID_ARGS", "PCA_NAME_CONSTRAINTS_VALIDATION", "PCA_INVALID_DURATION":
		todo = append(todo, "the private CA cannot issue ("+c.RenewalStatusReason+"): check that it is active and that ACM may use it")
	}
	if len(todo) == 0 {
		switch {
		case len(records) > 0:
			todo = append(todo, "the DNS validation records are in place; check the renewal's status and reason in the ACM console")
		case c.Type == acm.Private:
			todo = append(todo, "check that the private CA is active and that ACM may use it")
		default:
			todo = append(todo, "validate the domains listed in the ACM console (DNS validation records, or the validation emails)")
		}
	}
	return strings.Join(todo, "; ")
}

// overdueAdvice says what to check when ACM has not renewed in time.
func overdueAdvice(c *acm.Certificate, records []validationRecord) string {
	var todo []string
	for _, r := range records {
		if !r.ok() {
			todo = append(todo, r.todo())
		}
	}
	todo = append(todo, "check in the ACM console why renewal has not happened (ACM renews only certificates in use whose names it can still validate; a CAA record must allow amazon.com)", "if it stays stuck, request a new certificate and attach it to every resource listed")
	if c.Type == acm.Private {
		todo[len(todo)-2] = "check that the private CA is active and that ACM may use it"
	}
	return strings.Join(todo, "; ")
}

// acmLabel names a certificate for humans: its domain and ARN.
func acmLabel(c *acm.Certificate) string {
	return fmt.Sprintf("%q (%s)", c.DomainName, c.ARN)
}

// usage says what uses a certificate.
func usage(c *acm.Certificate, served bool) string {
	if len(c.InUseBy) > 0 {
		s := "in use by " + strings.Join(c.InUseBy[:min(3, len(c.InUseBy))], ", ")
		if n := len(c.InUseBy) - 3; n > 0 {
			s += fmt.Sprintf(" and %d more", n)
		}
		return s
	}
	if served {
		return "served by the endpoints listed"
	}
	if c.InUse {
		return "in use"
	}
	return "not in use"
}

func stamp(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func refOf(c *acm.Certificate, state RenewalState) ACMRef {
	return ACMRef{
		ARN: c.ARN, Region: c.Region, Account: c.Account, Type: c.Type, InUseBy: c.InUseBy,
		RenewalStatus: c.RenewalStatus, RenewalEligibility: c.RenewalEligibility, Renewal: state,
	}
}

// newer is a certificate that may have replaced an older one: in ACM, or
// served by probed endpoints.
type newer struct {
	desc      string
	advice    string
	names     []string
	notBefore time.Time
	notAfter  time.Time
	serial    string
	fp        string
	arn       string
}

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
		state := fmt.Sprintf("expires in %s (%s)", humanDuration(old.notAfter.Sub(now)), stamp(old.notAfter))
		if !old.notAfter.After(now) {
			state = fmt.Sprintf("expired %s ago (%s)", humanDuration(now.Sub(old.notAfter)), stamp(old.notAfter))
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

// newestFor returns the newest candidate that replaces old: it was issued
// after old and outlives it, is another certificate, covers every name of
// old, and is not served
// on a name:port that serves old too (inconsistent_deployment reports
// that). cands are sorted newest first; idx maps a name to the candidates
// carrying it.
func newestFor(old newer, cands []newer, idx map[string][]int, sv servedIndex) (newer, bool) {
	if len(old.names) == 0 {
		return newer{}, false
	}
	first := old.names[0]
	ids := idx[first]
	if _, parent, ok := strings.Cut(first, "."); ok && !strings.HasPrefix(first, "*.") {
		ids = append(slices.Clone(ids), idx["*."+parent]...)
		slices.Sort(ids)
	}
	for _, i := range ids {
		n := cands[i]
		if !n.notAfter.After(old.notAfter) {
			break // newest first: no later candidate outlives old either
		}
		if !n.notBefore.After(old.notBefore) || (n.fp != "" && n.fp == old.fp) || (n.arn != "" && n.arn == old.arn) ||
			(old.serial != "" && n.serial == old.serial) || sv.sharesNamePort(n.fp, old.fp) || !covers(n.names, old.names) {
			continue
		}
		return n, true
	}
	return newer{}, false
}

// covers reports whether names (of a newer certificate) cover every one of
// want, literally or through a wildcard.
func covers(names, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(names, func(n string) bool { return nameCovers(n, w) }) {
			return false
		}
	}
	return true
}

// nameCovers reports whether certificate name n is valid for w: equal, or a
// wildcard n ("*.example.com") matching a w of exactly one more label.
func nameCovers(n, w string) bool {
	if n == w {
		return true
	}
	rest, ok := strings.CutPrefix(n, "*.")
	if !ok || strings.HasPrefix(w, "*.") {
		return false
	}
	label, parent, ok := strings.Cut(w, ".")
	return ok && label != "" && parent == rest
}

func normalizeNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, discovery.NormalizeName(n))
	}
	return out
}

// sharesNamePort reports whether the leaves with fingerprints a and b are
// served on a common name and port.
func (x servedIndex) sharesNamePort(a, b string) bool {
	ea, eb := x.servers(a), x.servers(b)
	for i, j := 0, 0; i < len(ea) && j < len(eb); {
		pa, pb := &x.probed[ea[i]], &x.probed[eb[j]]
		switch c := cmp.Or(strings.Compare(pa.Name, pb.Name), cmp.Compare(pa.Port, pb.Port)); {
		case c == 0:
			return true
		case c < 0:
			i++
		default:
			j++
		}
	}
	return false
}

func endpointNames(eps []Endpoint, n int) string {
	var names []string
	for _, ep := range eps {
		k := net.JoinHostPort(ep.Name, strconv.Itoa(ep.Port))
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	if len(names) > n {
		return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
	}
	return strings.Join(names, ", ")
}

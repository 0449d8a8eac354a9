package policy

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
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
	// ValidationRecordMissing: a DNS validation CNAME an AMAZON_ISSUED
	// certificate needs is missing or wrong in a public Route 53 zone
	// certwatch can see: a certificate ACM renews will fail its next
	// renewal, one not in use will fail the renewal it becomes eligible for
	// once used, and one pending validation will never be issued.
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
	ARN                string                `json:"arn"`
	Region             string                `json:"region"`
	Account            string                `json:"account,omitempty"`
	Type               acmcert.Type          `json:"type"`
	InUseBy            []string              `json:"in_use_by,omitempty"`
	RenewalStatus      acmcert.RenewalStatus `json:"renewal_status,omitempty"`
	RenewalEligibility acmcert.Eligibility   `json:"renewal_eligibility,omitempty"`
	Renewal            RenewalState          `json:"renewal"`
}

// ACMCertificate is an ACM certificate with policy's view of its renewal
// and the probed endpoints that serve it.
type ACMCertificate struct {
	acmcert.Certificate
	// Renewal is the renewal state.
	Renewal RenewalState `json:"renewal"`
	// RenewBy is the date by which ACM should have renewed it (NotAfter
	// minus the renewal margin), for certificates ACM renews.
	RenewBy time.Time `json:"renew_by,omitzero"`
	// SHA256 is the certificate's fingerprint: that of the served
	// certificate with the same serial number when a probed endpoint serves
	// it, else that of the PEM ACM gives (acmcert.Certificate.Fingerprint).
	SHA256 string `json:"sha256,omitempty"`
	// Endpoints are the probed endpoints that serve it.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Consumers are the AWS resources whose listeners serve it (see
	// AddConsumers).
	Consumers []ConsumerRef `json:"consumers,omitempty"`
}

// inventory is what AddACM and SetZones hand to Result.
type inventory struct {
	acm       []acmcert.Certificate
	zones     []hostedzone.Zone
	consumers []certconsumer.Consumer
	iam       []iamcert.Certificate
	// watched and gaps are what the sources watched and found they could
	// not (AddCoverage).
	watched []found.WatchedZone
	gaps    []found.Gap
	atRest  []atrest.Certificate
	// unattached are cert-manager Certificates whose Secret held no
	// certificate (AddUnattached).
	unattached []atrest.Issuance
	// pointers maps an AWS resource's DNS name to the Route 53 names
	// pointing at it; built on first use from zones.
	pointers map[string][]string
}

// AddACM adds ACM certificates to judge. Result then judges their renewal,
// links each to the endpoints serving a certificate with the same serial
// number, and uses them to find stale deployments.
func (e *Evaluator) AddACM(certs ...acmcert.Certificate) {
	e.inv.acm = append(e.inv.acm, certs...)
}

// SetZones sets the Route 53 hosted zones certwatch can see, in which DNS
// validation records of ACM certificates are looked up. Without zones no
// record is claimed missing; renewal messages then name the records to check
// at the DNS provider.
func (e *Evaluator) SetZones(zones []hostedzone.Zone) {
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
	// deadline is the finding's deadline when it is not the certificate's
	// NotAfter (a request pending validation has none).
	deadline time.Time
}

// ValidationTimeout is how long ACM waits for the domain validation of a
// requested certificate before its status becomes VALIDATION_TIMED_OUT.
const ValidationTimeout = 72 * time.Hour

// judgeACM judges one ACM certificate at e.now. served says whether a
// probed endpoint serves it, which makes it in use whatever ACM says.
func (e *Evaluator) judgeACM(c *acmcert.Certificate, served bool) verdict {
	now := e.now
	v := verdict{inUse: c.InUse || served}
	it := acmLabel(c)
	use := usage(c, served)
	if c.NotAfter.IsZero() || (!c.Partial && c.Status != acmcert.StatusIssued && c.Status != acmcert.StatusExpired) {
		v.state = RenewalNotIssued
		if c.Type == acmcert.AmazonIssued && c.Status == acmcert.StatusPendingValidation {
			e.judgePending(c, &v)
		}
		return v
	}
	if !c.NotAfter.After(now) {
		v.state, v.kind = RenewalExpired, Expired
		ago := fmt.Sprintf("expired %s ago (%s)", humanBetween(c.NotAfter, now), stamp(c.NotAfter))
		if !v.inUse {
			v.tier = Info
			v.msg = fmt.Sprintf("ACM certificate %s %s and is not in use; delete it from ACM to keep the inventory clean", it, ago)
			return v
		}
		v.tier = Critical
		advice := "ACM cannot renew an expired certificate: request a new one (aws acm request-certificate) and attach it to every resource listed"
		if c.Type == acmcert.Imported {
			advice = "renew it with its issuing CA and reimport it into the same ARN (aws acm import-certificate --certificate-arn " + shellQuote(c.ARN) + "), which every resource using it picks up"
		}
		v.msg = fmt.Sprintf("ACM certificate %s %s and is still %s; clients reject it now: %s", it, ago, use, advice)
		return v
	}
	tier := TierFor(c.NotBefore, c.NotAfter, e.rules.Tiers, now)
	expires := fmt.Sprintf("expires in %s (%s)", humanBetween(now, c.NotAfter), stamp(c.NotAfter))
	report := func(state RenewalState, kind Kind, tier Tier, msg string) verdict {
		v.state = state
		if tier >= Info {
			v.kind, v.tier, v.msg = kind, tier, msg
		}
		return v
	}
	switch {
	case c.Type == acmcert.Imported:
		msg := fmt.Sprintf("ACM certificate %s was imported, so ACM never renews it: manual renewal required. It %s and is %s; renew it with its issuing CA and reimport it into the same ARN (aws acm import-certificate --certificate-arn %s), which every resource using it picks up", it, expires, use, shellQuote(c.ARN))
		if !v.inUse {
			tier = min(tier, Notice)
		}
		return report(RenewalManual, Expiring, tier, msg)
	case c.Partial:
		return report(RenewalUnknown, Expiring, tier, fmt.Sprintf("ACM certificate %s could not be described (see the discovery failure), so whether ACM renews it is unknown; it %s and is %s: grant acm:DescribeCertificate, then check its renewal in ACM", it, expires, use))
	case c.RenewalEligibility != acmcert.Eligible:
		if bad := missingRecords(e.validationRecords(c)); !v.inUse && len(bad) > 0 {
			return report(RenewalIneligible, ValidationRecordMissing, Notice, fmt.Sprintf("ACM certificate %s is not in use, so not yet eligible for managed renewal; it %s. The day it is used, its renewal will fail: a DNS validation record is missing or wrong. %s",
				it, expires, capitalize(strings.Join(bad, "; "))))
		}
		if !v.inUse {
			return report(RenewalIneligible, Expiring, min(tier, Notice), fmt.Sprintf("ACM certificate %s is not in use, so ACM will not renew it; it %s: attach it to the resource that needs it (ACM then renews it), or delete it if nothing does", it, expires))
		}
		return report(RenewalIneligible, Expiring, tier, fmt.Sprintf("ACM does not list certificate %s as eligible for managed renewal although it is %s; it %s: request a new certificate (aws acm request-certificate) and attach it to every resource using this one", it, use, expires))
	}

	// ACM renews it (AMAZON_ISSUED or PRIVATE, eligible).
	v.renewBy = c.NotAfter.Add(-e.renewalMargin())
	records := e.validationRecords(c)
	switch c.RenewalStatus {
	case acmcert.RenewalFailed, acmcert.RenewalPendingValidation:
		why := "its renewal failed"
		if c.RenewalStatus == acmcert.RenewalPendingValidation {
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
	if bad := missingRecords(records); len(bad) > 0 {
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

// acmLabel names a certificate for humans: its domain and ARN.
func acmLabel(c *acmcert.Certificate) string {
	return fmt.Sprintf("%q (%s)", c.DomainName, c.ARN)
}

// usage says what uses a certificate.
func usage(c *acmcert.Certificate, served bool) string {
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

func refOf(c *acmcert.Certificate, state RenewalState) ACMRef {
	return ACMRef{
		ARN: c.ARN, Region: c.Region, Account: c.Account, Type: c.Type, InUseBy: c.InUseBy,
		RenewalStatus: c.RenewalStatus, RenewalEligibility: c.RenewalEligibility, Renewal: state,
	}
}

// judgePending judges a requested AMAZON_ISSUED certificate waiting for
// DNS validation: when a record it needs is missing or wrong in a zone
// certwatch sees, it will never be issued. Info during its first day (DNS
// takes a while), a warning after; the deadline is when ACM gives up.
func (e *Evaluator) judgePending(c *acmcert.Certificate, v *verdict) {
	bad := missingRecords(e.validationRecords(c))
	if len(bad) == 0 {
		return
	}
	v.kind, v.tier, v.deadline = ValidationRecordMissing, Warning, e.now
	requested := "was requested"
	giveUp := "ACM gives up 72 hours after the request"
	if !c.CreatedAt.IsZero() {
		v.deadline = c.CreatedAt.Add(ValidationTimeout).UTC()
		if e.now.Sub(c.CreatedAt) <= day {
			v.tier = Info
		}
		requested = fmt.Sprintf("was requested %s ago (%s)", humanDuration(e.now.Sub(c.CreatedAt)), c.CreatedAt.UTC().Format("2006-01-02 15:04 MST"))
		giveUp = fmt.Sprintf("ACM gives up %s (72 hours after the request), and the request must then be made again", v.deadline.Format("2006-01-02 15:04 MST"))
	}
	v.msg = fmt.Sprintf("ACM certificate %s %s and waits for DNS validation, but it will never be issued: a DNS validation record is missing or wrong. %s. %s",
		acmLabel(c), requested, capitalize(strings.Join(bad, "; ")), giveUp)
}

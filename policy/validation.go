package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
)

// validationRecord is one DNS validation CNAME ACM needs, and what the
// Route 53 zones certwatch sees hold for it.
type validationRecord struct {
	name, value string
	zone        *hostedzone.Zone // public zone that must hold it; nil: none seen
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

// missingRecords says what to do about each record that a zone certwatch
// sees lacks or holds wrong.
func missingRecords(records []validationRecord) []string {
	var bad []string
	for _, r := range records {
		if r.visible() && !r.ok() {
			bad = append(bad, r.todo())
		}
	}
	return bad
}

// validationRecords returns the DNS validation records an AMAZON_ISSUED
// certificate needs, renewal's first, each looked up in the public zone
// that must hold it.
func (e *Evaluator) validationRecords(c *acmcert.Certificate) []validationRecord {
	if c.Type != acmcert.AmazonIssued {
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
		if z, ok := hostedzone.PublicZoneFor(e.inv.zones, name); ok {
			r.zone = &z
			r.found, r.present = z.CNAME(name)
		}
		out = append(out, r)
	}
	return out
}

// pendingDomains lists the domains whose renewal validation has not
// succeeded.
func pendingDomains(c *acmcert.Certificate) []string {
	var out []string
	for _, v := range c.RenewalValidations {
		if v.Status != acmcert.ValidationSuccess && !slices.Contains(out, v.DomainName) {
			out = append(out, v.DomainName)
		}
	}
	return out
}

// renewalAdvice says what to do about a failed or pending renewal.
func renewalAdvice(c *acmcert.Certificate, records []validationRecord) string {
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
		case c.Type == acmcert.Private:
			todo = append(todo, "check that the private CA is active and that ACM may use it")
		default:
			todo = append(todo, "validate the domains listed in the ACM console (DNS validation records, or the validation emails)")
		}
	}
	return strings.Join(todo, "; ")
}

// overdueAdvice says what to check when ACM has not renewed in time.
func overdueAdvice(c *acmcert.Certificate, records []validationRecord) string {
	var todo []string
	for _, r := range records {
		if !r.ok() {
			todo = append(todo, r.todo())
		}
	}
	todo = append(todo, "check in the ACM console why renewal has not happened (ACM renews only certificates in use whose names it can still validate; a CAA record must allow amazon.com)", "if it stays stuck, request a new certificate and attach it to every resource listed")
	if c.Type == acmcert.Private {
		todo[len(todo)-2] = "check that the private CA is active and that ACM may use it"
	}
	return strings.Join(todo, "; ")
}

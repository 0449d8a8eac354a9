// Package acmcert holds what certwatch knows of an AWS Certificate
// Manager certificate: plain data that policy, state and the status page
// read, filled by discovery/acm. It imports no AWS SDK package, so the
// stages that read ACM certificates do not link the SDK.
package acmcert

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
)

// Type says who issued a certificate and so whether ACM renews it.
type Type string

// Certificate types, as ACM names them.
const (
	// AmazonIssued certificates are issued and renewed by ACM (managed
	// renewal, given valid DNS or email validation).
	AmazonIssued Type = "AMAZON_ISSUED"
	// Imported certificates were uploaded; ACM never renews them.
	Imported Type = "IMPORTED"
	// Private certificates are issued by an AWS Private CA; ACM renews them
	// without validation.
	Private Type = "PRIVATE"
)

// Status is the certificate's status in ACM.
type Status string

// Certificate statuses, as ACM names them.
const (
	StatusPendingValidation  Status = "PENDING_VALIDATION"
	StatusIssued             Status = "ISSUED"
	StatusInactive           Status = "INACTIVE"
	StatusExpired            Status = "EXPIRED"
	StatusValidationTimedOut Status = "VALIDATION_TIMED_OUT"
	StatusRevoked            Status = "REVOKED"
	StatusFailed             Status = "FAILED"
)

// RenewalStatus is the state of ACM's managed renewal.
type RenewalStatus string

// Renewal statuses, as ACM names them. The empty RenewalStatus means ACM
// reported no renewal (it starts 60 days before expiry).
const (
	RenewalPendingAutoRenewal RenewalStatus = "PENDING_AUTO_RENEWAL"
	RenewalPendingValidation  RenewalStatus = "PENDING_VALIDATION"
	RenewalSuccess            RenewalStatus = "SUCCESS"
	RenewalFailed             RenewalStatus = "FAILED"
)

// Eligibility says whether ACM can renew a certificate.
type Eligibility string

// Renewal eligibilities, as ACM names them.
const (
	Eligible   Eligibility = "ELIGIBLE"
	Ineligible Eligibility = "INELIGIBLE"
)

// ValidationStatus is the state of one domain's validation.
type ValidationStatus string

// Validation statuses, as ACM names them.
const (
	ValidationPending ValidationStatus = "PENDING_VALIDATION"
	ValidationSuccess ValidationStatus = "SUCCESS"
	ValidationFailed  ValidationStatus = "FAILED"
)

// Certificate is one ACM certificate with what renewal-aware policy needs.
// Fields are plain data; enumerations keep ACM's spelling.
type Certificate struct {
	// ARN identifies the certificate; Region and Account are taken from it.
	ARN     string `json:"arn"`
	Region  string `json:"region"`
	Account string `json:"account"`
	// DomainName is the certificate's primary name; SubjectAlternativeNames
	// all of its names, as ACM lists them (lower case, "*." for wildcards).
	DomainName              string   `json:"domain_name"`
	SubjectAlternativeNames []string `json:"subject_alternative_names,omitempty"`
	// Serial is the serial number normalised for comparison with served
	// certificates: lower-case hex without colons or leading zeros, the
	// same as x509.Certificate.SerialNumber.Text(16) (see NormalizeSerial).
	// Empty when unknown (Partial) or not yet issued.
	Serial string `json:"serial,omitempty"`
	// Fingerprint is the SHA-256 of the certificate's DER encoding, in
	// lower-case hex as probes.Fingerprint writes it, from the PEM that
	// GetCertificate returns; empty when ACM gives none (not issued) or it
	// could not be fetched.
	Fingerprint string `json:"fingerprint,omitempty"`
	Subject     string `json:"subject,omitempty"`
	Issuer      string `json:"issuer,omitempty"`
	// NotBefore and NotAfter bound validity; zero until issued.
	NotBefore time.Time `json:"not_before,omitzero"`
	NotAfter  time.Time `json:"not_after,omitzero"`
	// CreatedAt, IssuedAt and ImportedAt are when ACM created, issued or
	// imported the certificate (zero when not applicable).
	CreatedAt  time.Time `json:"created_at,omitzero"`
	IssuedAt   time.Time `json:"issued_at,omitzero"`
	ImportedAt time.Time `json:"imported_at,omitzero"`
	Type       Type      `json:"type"`
	Status     Status    `json:"status"`
	// KeyAlgorithm in the API's enum spelling: RSA_1024, RSA_2048,
	// RSA_3072, RSA_4096, EC_prime256v1, EC_secp384r1, EC_secp521r1
	// (DescribeCertificate answers "RSA-2048"; it is normalised).
	KeyAlgorithm string `json:"key_algorithm,omitempty"`
	// InUseBy are the ARNs of the resources using the certificate (load
	// balancers, CloudFront distributions, API Gateway domains, ...).
	InUseBy []string `json:"in_use_by,omitempty"`
	// RenewalEligibility says whether ACM can renew the certificate.
	RenewalEligibility Eligibility `json:"renewal_eligibility,omitempty"`
	// RenewalStatus, RenewalStatusReason (e.g. "CAA_ERROR",
	// "NO_AVAILABLE_CONTACTS") and RenewalUpdatedAt come from the
	// certificate's RenewalSummary; empty when ACM reports none.
	RenewalStatus       RenewalStatus `json:"renewal_status,omitempty"`
	RenewalStatusReason string        `json:"renewal_status_reason,omitempty"`
	RenewalUpdatedAt    time.Time     `json:"renewal_updated_at,omitzero"`
	// Validations are the certificate's DomainValidationOptions, with the
	// DNS validation records ACM expects.
	Validations []Validation `json:"validations,omitempty"`
	// RenewalValidations are the RenewalSummary's per-domain validations.
	RenewalValidations []Validation `json:"renewal_validations,omitempty"`
	// FailureReason says why issuance failed (Status FAILED).
	FailureReason string `json:"failure_reason,omitempty"`
	// ManagedBy is set for certificates another service manages
	// ("CLOUDFRONT").
	ManagedBy string `json:"managed_by,omitempty"`
	// InUse is true when InUseBy is not empty or, for a Partial
	// certificate, when ListCertificates said it is in use.
	InUse bool `json:"in_use"`
	// Partial is set when DescribeCertificate failed and only the
	// ListCertificates summary is known: no serial, InUseBy, renewal
	// summary or validations. The failure is reported in the error
	// Certificates returns.
	Partial bool `json:"partial,omitempty"`
}

// Validation is one domain's validation.
type Validation struct {
	DomainName       string           `json:"domain_name"`
	ValidationDomain string           `json:"validation_domain,omitempty"`
	Status           ValidationStatus `json:"status,omitempty"`
	// Method is DNS, EMAIL or HTTP.
	Method string `json:"method,omitempty"`
	// Record is the DNS record ACM looks up to validate the domain (a
	// CNAME), or nil for other methods.
	Record *Record `json:"record,omitempty"`
}

// Record is a DNS validation record. Name and Value are normalised like
// target names (lower case, no trailing dot), so they compare directly with
// Route 53 records from the route53 package.
type Record struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Names returns DomainName and SubjectAlternativeNames, normalised and
// without duplicates, in that order.
func (c Certificate) Names() []string {
	var out []string
	for _, n := range append([]string{c.DomainName}, c.SubjectAlternativeNames...) {
		n = discovery.NormalizeName(n)
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// NormalizeSerial returns a serial number as lower-case hex without
// separators or leading zeros, so ACM's "0f:ac:b0:a3" and the served
// certificate's x509 SerialNumber.Text(16) ("facb0a3") compare equal. A
// serial of only zeros is "0"; "" stays "".
func NormalizeSerial(s string) string {
	s = strings.ToLower(strings.NewReplacer(":", "", " ", "", "-", "").Replace(strings.TrimSpace(s)))
	if s == "" {
		return ""
	}
	if t := strings.TrimLeft(s, "0"); t != "" {
		return t
	}
	return "0"
}

// Op is the step of an ACM inventory that failed, as a RegionError names
// it. Match it against the constants, never by its text: the text is what
// the error message says and may be reworded.
type Op string

// Steps of an ACM inventory of one region.
const (
	// OpList: the region's certificates could not be listed; nothing of
	// the region is known.
	OpList Op = "list certificates"
	// OpDescribe: some certificates could not be described; they are
	// returned from the listing's summary, Partial.
	OpDescribe Op = "describe certificates"
	// OpGet: the PEM of some certificates could not be fetched; they are
	// returned without a Fingerprint.
	OpGet Op = "get certificates"
)

// RegionError is the failure of one region (or of some certificates in
// it). The other regions' certificates are still returned.
type RegionError struct {
	Account string
	Region  string
	// Op is the failed step: OpList, OpDescribe or OpGet.
	Op Op
	// Failed is how many certificates could not be described or fetched
	// (for Op OpDescribe and OpGet); Err is the first such failure.
	Failed int
	Err    error
}

func (e *RegionError) Error() string {
	who := e.Region
	if e.Account != "" {
		who += " (account " + e.Account + ")"
	}
	if e.Failed > 0 {
		return fmt.Sprintf("acm %s in %s: %d failed, first: %v", e.Op, who, e.Failed, e.Err)
	}
	return fmt.Sprintf("acm %s in %s: %v", e.Op, who, e.Err)
}

// Unwrap returns the underlying SDK error.
func (e *RegionError) Unwrap() error { return e.Err }

package acm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/acm/types"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/awsaccount"
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

// normalizeKeyAlgorithm turns DescribeCertificate's "RSA-2048" into the
// enum spelling "RSA_2048" that the rest of the API (and filters) use.
func normalizeKeyAlgorithm(s string) string {
	return strings.ReplaceAll(s, "-", "_")
}

func fromDetail(region string, d *types.CertificateDetail) Certificate {
	c := Certificate{
		ARN:                     aws.ToString(d.CertificateArn),
		Region:                  region,
		DomainName:              discovery.NormalizeName(aws.ToString(d.DomainName)),
		SubjectAlternativeNames: normalizeNames(d.SubjectAlternativeNames),
		Serial:                  NormalizeSerial(aws.ToString(d.Serial)),
		Subject:                 aws.ToString(d.Subject),
		Issuer:                  aws.ToString(d.Issuer),
		NotBefore:               toTime(d.NotBefore),
		NotAfter:                toTime(d.NotAfter),
		CreatedAt:               toTime(d.CreatedAt),
		IssuedAt:                toTime(d.IssuedAt),
		ImportedAt:              toTime(d.ImportedAt),
		Type:                    Type(d.Type),
		Status:                  Status(d.Status),
		KeyAlgorithm:            normalizeKeyAlgorithm(string(d.KeyAlgorithm)),
		InUseBy:                 slices.Clone(d.InUseBy),
		RenewalEligibility:      Eligibility(d.RenewalEligibility),
		Validations:             fromValidations(d.DomainValidationOptions),
		FailureReason:           string(d.FailureReason),
		ManagedBy:               string(d.ManagedBy),
		InUse:                   len(d.InUseBy) > 0,
	}
	c.Account = awsaccount.AccountID(c.ARN)
	if rs := d.RenewalSummary; rs != nil {
		c.RenewalStatus = RenewalStatus(rs.RenewalStatus)
		c.RenewalStatusReason = string(rs.RenewalStatusReason)
		c.RenewalUpdatedAt = toTime(rs.UpdatedAt)
		c.RenewalValidations = fromValidations(rs.DomainValidationOptions)
	}
	return c
}

// fingerprint returns the SHA-256 of the first certificate in pemText, or
// "" when it holds none.
func fingerprint(pemText string) string {
	for rest := []byte(pemText); ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return ""
		}
		if b.Type == "CERTIFICATE" {
			sum := sha256.Sum256(b.Bytes)
			return hex.EncodeToString(sum[:])
		}
	}
}

func fromSummary(region string, s *types.CertificateSummary) Certificate {
	c := Certificate{
		ARN:                     aws.ToString(s.CertificateArn),
		Region:                  region,
		DomainName:              discovery.NormalizeName(aws.ToString(s.DomainName)),
		SubjectAlternativeNames: normalizeNames(s.SubjectAlternativeNameSummaries),
		NotBefore:               toTime(s.NotBefore),
		NotAfter:                toTime(s.NotAfter),
		CreatedAt:               toTime(s.CreatedAt),
		IssuedAt:                toTime(s.IssuedAt),
		ImportedAt:              toTime(s.ImportedAt),
		Type:                    Type(s.Type),
		Status:                  Status(s.Status),
		KeyAlgorithm:            normalizeKeyAlgorithm(string(s.KeyAlgorithm)),
		RenewalEligibility:      Eligibility(s.RenewalEligibility),
		ManagedBy:               string(s.ManagedBy),
		InUse:                   aws.ToBool(s.InUse),
		Partial:                 true,
	}
	c.Account = awsaccount.AccountID(c.ARN)
	return c
}

func fromValidations(in []types.DomainValidation) []Validation {
	var out []Validation
	for _, v := range in {
		x := Validation{
			DomainName:       discovery.NormalizeName(aws.ToString(v.DomainName)),
			ValidationDomain: discovery.NormalizeName(aws.ToString(v.ValidationDomain)),
			Status:           ValidationStatus(v.ValidationStatus),
			Method:           string(v.ValidationMethod),
		}
		if r := v.ResourceRecord; r != nil {
			x.Record = &Record{
				Name:  discovery.NormalizeName(aws.ToString(r.Name)),
				Type:  string(r.Type),
				Value: discovery.NormalizeName(aws.ToString(r.Value)),
			}
		}
		out = append(out, x)
	}
	return out
}

func normalizeNames(in []string) []string {
	var out []string
	for _, n := range in {
		out = append(out, discovery.NormalizeName(n))
	}
	return out
}

func toTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

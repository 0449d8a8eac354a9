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
	"github.com/certwatch/certwatch/discovery/found/acmcert"
)

// normalizeKeyAlgorithm turns DescribeCertificate's "RSA-2048" into the
// enum spelling "RSA_2048" that the rest of the API (and filters) use.
func normalizeKeyAlgorithm(s string) string {
	return strings.ReplaceAll(s, "-", "_")
}

func fromDetail(region string, d *types.CertificateDetail) acmcert.Certificate {
	c := acmcert.Certificate{
		ARN:                     aws.ToString(d.CertificateArn),
		Region:                  region,
		DomainName:              discovery.NormalizeName(aws.ToString(d.DomainName)),
		SubjectAlternativeNames: normalizeNames(d.SubjectAlternativeNames),
		Serial:                  acmcert.NormalizeSerial(aws.ToString(d.Serial)),
		Subject:                 aws.ToString(d.Subject),
		Issuer:                  aws.ToString(d.Issuer),
		NotBefore:               toTime(d.NotBefore),
		NotAfter:                toTime(d.NotAfter),
		CreatedAt:               toTime(d.CreatedAt),
		IssuedAt:                toTime(d.IssuedAt),
		ImportedAt:              toTime(d.ImportedAt),
		Type:                    acmcert.Type(d.Type),
		Status:                  acmcert.Status(d.Status),
		KeyAlgorithm:            normalizeKeyAlgorithm(string(d.KeyAlgorithm)),
		InUseBy:                 slices.Clone(d.InUseBy),
		RenewalEligibility:      acmcert.Eligibility(d.RenewalEligibility),
		Validations:             fromValidations(d.DomainValidationOptions),
		FailureReason:           string(d.FailureReason),
		ManagedBy:               string(d.ManagedBy),
		InUse:                   len(d.InUseBy) > 0,
	}
	c.Account = awsaccount.AccountID(c.ARN)
	if rs := d.RenewalSummary; rs != nil {
		c.RenewalStatus = acmcert.RenewalStatus(rs.RenewalStatus)
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

func fromSummary(region string, s *types.CertificateSummary) acmcert.Certificate {
	c := acmcert.Certificate{
		ARN:                     aws.ToString(s.CertificateArn),
		Region:                  region,
		DomainName:              discovery.NormalizeName(aws.ToString(s.DomainName)),
		SubjectAlternativeNames: normalizeNames(s.SubjectAlternativeNameSummaries),
		NotBefore:               toTime(s.NotBefore),
		NotAfter:                toTime(s.NotAfter),
		CreatedAt:               toTime(s.CreatedAt),
		IssuedAt:                toTime(s.IssuedAt),
		ImportedAt:              toTime(s.ImportedAt),
		Type:                    acmcert.Type(s.Type),
		Status:                  acmcert.Status(s.Status),
		KeyAlgorithm:            normalizeKeyAlgorithm(string(s.KeyAlgorithm)),
		RenewalEligibility:      acmcert.Eligibility(s.RenewalEligibility),
		ManagedBy:               string(s.ManagedBy),
		InUse:                   aws.ToBool(s.InUse),
		Partial:                 true,
	}
	c.Account = awsaccount.AccountID(c.ARN)
	return c
}

func fromValidations(in []types.DomainValidation) []acmcert.Validation {
	var out []acmcert.Validation
	for _, v := range in {
		x := acmcert.Validation{
			DomainName:       discovery.NormalizeName(aws.ToString(v.DomainName)),
			ValidationDomain: discovery.NormalizeName(aws.ToString(v.ValidationDomain)),
			Status:           acmcert.ValidationStatus(v.ValidationStatus),
			Method:           string(v.ValidationMethod),
		}
		if r := v.ResourceRecord; r != nil {
			x.Record = &acmcert.Record{
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

// Package iamcert holds what certwatch knows of an IAM server
// certificate: plain data that policy, state and the status page read,
// filled by discovery/iam. It imports no AWS SDK package.
package iamcert

import (
	"fmt"
	"time"
)

// Certificate is one IAM server certificate.
type Certificate struct {
	ARN     string `json:"arn"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Path    string `json:"path"`
	Account string `json:"account"`
	// UploadedAt is when it was uploaded; Expiration is IAM's NotAfter.
	UploadedAt time.Time `json:"uploaded_at,omitzero"`
	Expiration time.Time `json:"expiration,omitzero"`
	// Serial (lower-case hex, as x509's SerialNumber.Text(16)),
	// Fingerprint (SHA-256 of the DER, lower-case hex), Subject, Issuer,
	// DNSNames, NotBefore and NotAfter come from the PEM; empty when
	// Partial.
	Serial      string    `json:"serial,omitempty"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	Subject     string    `json:"subject,omitempty"`
	Issuer      string    `json:"issuer,omitempty"`
	DNSNames    []string  `json:"dns_names,omitempty"`
	NotBefore   time.Time `json:"not_before,omitzero"`
	NotAfter    time.Time `json:"not_after,omitzero"`
	// Partial is set when GetServerCertificate failed: only the listing's
	// metadata is known (NotAfter is then Expiration).
	Partial bool `json:"partial,omitempty"`
}

// Op is the step of an IAM inventory that failed, as an Error names it.
// Match it against the constants, never by its text: the text is what
// the error message says and may be reworded.
type Op string

// Steps of an IAM inventory.
const (
	// OpList: the server certificates could not be listed; nothing of the
	// account is known.
	OpList Op = "list server certificates"
	// OpGet: some certificates could not be fetched; they are returned
	// from the listing's metadata, Partial.
	OpGet Op = "get server certificates"
)

// Error is the failure to list or fetch server certificates of one
// account.
type Error struct {
	Account string
	// Op is the step that failed: OpList or OpGet.
	Op Op
	// Failed is how many certificates could not be fetched (Op OpGet);
	// Err is the first failure.
	Failed int
	Err    error
}

func (e *Error) Error() string {
	who := ""
	if e.Account != "" {
		who = " in account " + e.Account
	}
	if e.Failed > 0 {
		return fmt.Sprintf("iam %s%s: %d failed, first: %v", e.Op, who, e.Failed, e.Err)
	}
	return fmt.Sprintf("iam %s%s: %v", e.Op, who, e.Err)
}

// Unwrap returns the underlying SDK error.
func (e *Error) Unwrap() error { return e.Err }

package awstest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Certificate is an ACM certificate held by the fake. Field values use
// ACM's spelling (Type "AMAZON_ISSUED", Status "ISSUED", ...).
type Certificate struct {
	// Account and Region own the certificate; empty Account means
	// DefaultAccount. Region is required.
	Account string
	Region  string
	// ARN defaults to arn:aws:acm:REGION:ACCOUNT:certificate/ID.
	ARN                     string
	DomainName              string
	SubjectAlternativeNames []string
	// Serial as ACM shows it: colon-separated lower-case hex octets,
	// e.g. "0f:ac:b0:a3".
	Serial  string
	Subject string
	Issuer  string
	// Type: AMAZON_ISSUED (default), IMPORTED or PRIVATE.
	Type string
	// Status: ISSUED (default), PENDING_VALIDATION, EXPIRED, ...
	Status string
	// KeyAlgorithm in the API's enum spelling ("RSA_2048", default, or
	// "EC_prime256v1", ...). Like ACM, the fake answers with a hyphen
	// ("RSA-2048") and filters on the enum spelling.
	KeyAlgorithm string
	// KeyPairOrigin: AWS_MANAGED (default), CUSTOMER_PROVIDED (default for
	// IMPORTED) or ACME.
	KeyPairOrigin                   string
	NotBefore, NotAfter             time.Time
	CreatedAt, IssuedAt, ImportedAt time.Time
	InUseBy                         []string
	// RenewalEligibility: ELIGIBLE or INELIGIBLE.
	RenewalEligibility string
	// Renewal, when set, is answered as RenewalSummary.
	Renewal *Renewal
	// Validations are answered as DomainValidationOptions.
	Validations   []DomainValidation
	FailureReason string
	// PEM is the certificate (and, after it, the chain) GetCertificate
	// answers, as ACM does for issued certificates. Empty: GetCertificate
	// answers RequestInProgressException, as ACM does for one not issued.
	PEM string
}

// Renewal is an ACM RenewalSummary.
type Renewal struct {
	// Status: PENDING_AUTO_RENEWAL, PENDING_VALIDATION, SUCCESS or FAILED.
	Status string
	// Reason is the RenewalStatusReason, e.g. CAA_ERROR.
	Reason      string
	UpdatedAt   time.Time
	Validations []DomainValidation
}

// DomainValidation is one entry of DomainValidationOptions.
type DomainValidation struct {
	DomainName       string
	ValidationDomain string
	// ValidationStatus: PENDING_VALIDATION, SUCCESS or FAILED.
	ValidationStatus string
	// ValidationMethod: DNS, EMAIL or HTTP.
	ValidationMethod string
	// Record is the DNS validation CNAME, when ValidationMethod is DNS.
	Record *ResourceRecord
}

// ResourceRecord is a DNS validation record.
type ResourceRecord struct {
	Name, Type, Value string
}

// ACM is the ACM fake. Get it from Server.ACM.
type ACM struct {
	s *Server

	mu       sync.Mutex
	order    []string // ARNs, in insertion order
	certs    map[string]*Certificate
	pageSize int
	throttle int
	denied   map[string]bool // regions, and "op:"+operation
}

// Add stores certificates, filling defaults, and returns their ARNs.
func (f *ACM) Add(certs ...Certificate) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var arns []string
	for _, c := range certs {
		if c.Account == "" {
			c.Account = DefaultAccount
		}
		if c.ARN == "" {
			n := len(f.order) + 1
			c.ARN = fmt.Sprintf("arn:aws:acm:%s:%s:certificate/%08x-0000-4000-8000-%012x", c.Region, c.Account, n, n)
		}
		if c.Type == "" {
			c.Type = "AMAZON_ISSUED"
		}
		if c.Status == "" {
			c.Status = "ISSUED"
		}
		if c.KeyAlgorithm == "" {
			c.KeyAlgorithm = "RSA_2048"
		}
		if c.KeyPairOrigin == "" {
			c.KeyPairOrigin = "AWS_MANAGED"
			if c.Type == "IMPORTED" {
				c.KeyPairOrigin = "CUSTOMER_PROVIDED"
			}
		}
		if len(c.SubjectAlternativeNames) == 0 && c.DomainName != "" {
			c.SubjectAlternativeNames = []string{c.DomainName}
		}
		if _, ok := f.certs[c.ARN]; !ok {
			f.order = append(f.order, c.ARN)
		}
		f.certs[c.ARN] = &c
		arns = append(arns, c.ARN)
	}
	return arns
}

// SetPageSize caps the number of certificates per ListCertificates page
// (0: the client's MaxItems, or 1000).
func (f *ACM) SetPageSize(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageSize = n
}

// Throttle makes the next n ACM requests fail with ThrottlingException.
func (f *ACM) Throttle(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttle = n
}

// DenyRegion makes every ACM request in region fail with
// AccessDeniedException, for every account.
func (f *ACM) DenyRegion(region string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.denied[region] = true
}

// DenyOperation makes every call of op (e.g. "DescribeCertificate") fail
// with AccessDeniedException.
func (f *ACM) DenyOperation(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.denied["op:"+op] = true
}

func (f *ACM) serve(c *call, r *http.Request, body []byte) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "CertificateManager.")
	c.req.Operation = op
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/" || !ok:
		acmError(c, http.StatusBadRequest, "UnknownOperationException", "")
		return
	case r.Header.Get("Content-Type") != "application/x-amz-json-1.1":
		acmError(c, http.StatusBadRequest, "SerializationException", "expected application/x-amz-json-1.1")
		return
	}
	f.mu.Lock()
	throttled := f.throttle > 0
	if throttled {
		f.throttle--
	}
	denied := f.denied[c.req.Region] || f.denied["op:"+op]
	f.mu.Unlock()
	switch {
	case throttled:
		acmError(c, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
		return
	case denied:
		acmError(c, http.StatusBadRequest, "AccessDeniedException", fmt.Sprintf(
			"User: arn:aws:iam::%s:user/certwatch is not authorized to perform: acm:%s on resource: * because no identity-based policy allows the acm:%s action",
			c.account, op, op))
		return
	}
	switch op {
	case "ListCertificates":
		f.list(c, body)
	case "DescribeCertificate":
		f.describe(c, body)
	case "GetCertificate":
		f.get(c, body)
	default:
		acmError(c, http.StatusBadRequest, "UnknownOperationException", "the fake does not implement "+op)
	}
}

type listCertificatesInput struct {
	CertificateStatuses       []string `json:"CertificateStatuses"`
	CertificateKeyPairOrigins []string `json:"CertificateKeyPairOrigins"`
	Includes                  *struct {
		KeyTypes []string `json:"keyTypes"`
	} `json:"Includes"`
	NextToken *string `json:"NextToken"`
	MaxItems  *int    `json:"MaxItems"`
}

func (f *ACM) list(c *call, body []byte) {
	var in listCertificatesInput
	if err := json.Unmarshal(body, &in); err != nil {
		acmError(c, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	// As in ACM: without Includes.keyTypes only RSA_2048 certificates are
	// listed, and without CertificateKeyPairOrigins no ACME ones.
	keyTypes := []string{"RSA_2048"}
	if in.Includes != nil && len(in.Includes.KeyTypes) > 0 {
		keyTypes = in.Includes.KeyTypes
	}
	origins := []string{"AWS_MANAGED", "CUSTOMER_PROVIDED"}
	if len(in.CertificateKeyPairOrigins) > 0 {
		origins = in.CertificateKeyPairOrigins
	}
	start := 0
	if in.NextToken != nil {
		n, err := strconv.Atoi(strings.TrimPrefix(*in.NextToken, "next-"))
		if err != nil || !strings.HasPrefix(*in.NextToken, "next-") {
			acmError(c, http.StatusBadRequest, "InvalidArgsException", "invalid NextToken")
			return
		}
		start = n
	}
	limit := 1000
	if in.MaxItems != nil {
		if *in.MaxItems < 1 || *in.MaxItems > 1000 {
			acmError(c, http.StatusBadRequest, "ValidationException", "MaxItems must be between 1 and 1000")
			return
		}
		limit = *in.MaxItems
	}

	f.mu.Lock()
	if f.pageSize > 0 && f.pageSize < limit {
		limit = f.pageSize
	}
	var match []*Certificate
	for _, arn := range f.order {
		x := f.certs[arn]
		if x.Account != c.account || x.Region != c.req.Region ||
			!slices.Contains(keyTypes, x.KeyAlgorithm) || !slices.Contains(origins, x.KeyPairOrigin) ||
			(len(in.CertificateStatuses) > 0 && !slices.Contains(in.CertificateStatuses, x.Status)) {
			continue
		}
		match = append(match, x)
	}
	f.mu.Unlock()

	out := map[string]any{}
	var list []map[string]any
	for i := start; i < len(match) && i < start+limit; i++ {
		x := match[i]
		sum := map[string]any{
			"CertificateArn":                       x.ARN,
			"DomainName":                           x.DomainName,
			"SubjectAlternativeNameSummaries":      x.SubjectAlternativeNames,
			"HasAdditionalSubjectAlternativeNames": false,
			"Status":                               x.Status,
			"Type":                                 x.Type,
			"KeyAlgorithm":                         strings.ReplaceAll(x.KeyAlgorithm, "_", "-"),
			"KeyUsages":                            []string{"DIGITAL_SIGNATURE", "KEY_ENCIPHERMENT"},
			"ExtendedKeyUsages":                    []string{"TLS_WEB_SERVER_AUTHENTICATION"},
			"InUse":                                len(x.InUseBy) > 0,
			"Exported":                             false,
			"CertificateKeyPairOrigin":             x.KeyPairOrigin,
		}
		if x.RenewalEligibility != "" {
			sum["RenewalEligibility"] = x.RenewalEligibility
		}
		putTimes(sum, x)
		list = append(list, sum)
	}
	out["CertificateSummaryList"] = list
	if start+limit < len(match) {
		out["NextToken"] = fmt.Sprintf("next-%d", start+limit)
	}
	acmJSON(c, out)
}

func (f *ACM) describe(c *call, body []byte) {
	var in struct {
		CertificateArn string `json:"CertificateArn"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		acmError(c, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	f.mu.Lock()
	x, ok := f.certs[in.CertificateArn]
	if ok && (x.Account != c.account || x.Region != c.req.Region) {
		ok = false
	}
	var cp Certificate
	if ok {
		cp = *x
	}
	f.mu.Unlock()
	if !ok {
		acmError(c, http.StatusBadRequest, "ResourceNotFoundException", fmt.Sprintf("Could not find certificate %s.", in.CertificateArn))
		return
	}
	d := map[string]any{
		"CertificateArn":           cp.ARN,
		"DomainName":               cp.DomainName,
		"SubjectAlternativeNames":  cp.SubjectAlternativeNames,
		"Status":                   cp.Status,
		"Type":                     cp.Type,
		"KeyAlgorithm":             strings.ReplaceAll(cp.KeyAlgorithm, "_", "-"),
		"SignatureAlgorithm":       "SHA256WITHRSA",
		"InUseBy":                  nonNil(cp.InUseBy),
		"KeyUsages":                []map[string]string{{"Name": "DIGITAL_SIGNATURE"}, {"Name": "KEY_ENCIPHERMENT"}},
		"ExtendedKeyUsages":        []map[string]string{{"Name": "TLS_WEB_SERVER_AUTHENTICATION", "OID": "1.3.6.1.5.5.7.3.1"}},
		"Options":                  map[string]string{"CertificateTransparencyLoggingPreference": "ENABLED"},
		"CertificateKeyPairOrigin": cp.KeyPairOrigin,
	}
	for k, v := range map[string]string{"Serial": cp.Serial, "Subject": cp.Subject, "Issuer": cp.Issuer,
		"RenewalEligibility": cp.RenewalEligibility, "FailureReason": cp.FailureReason} {
		if v != "" {
			d[k] = v
		}
	}
	putTimes(d, &cp)
	if len(cp.Validations) > 0 {
		d["DomainValidationOptions"] = validations(cp.Validations)
	}
	if rs := cp.Renewal; rs != nil {
		s := map[string]any{"RenewalStatus": rs.Status, "DomainValidationOptions": validations(rs.Validations)}
		if rs.Reason != "" {
			s["RenewalStatusReason"] = rs.Reason
		}
		if !rs.UpdatedAt.IsZero() {
			s["UpdatedAt"] = epoch(rs.UpdatedAt)
		}
		d["RenewalSummary"] = s
	}
	acmJSON(c, map[string]any{"Certificate": d})
}

// get answers GetCertificate: the leaf PEM as Certificate and the rest as
// CertificateChain.
func (f *ACM) get(c *call, body []byte) {
	var in struct {
		CertificateArn string `json:"CertificateArn"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		acmError(c, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	f.mu.Lock()
	x, ok := f.certs[in.CertificateArn]
	if ok && (x.Account != c.account || x.Region != c.req.Region) {
		ok = false
	}
	var pemText string
	if ok {
		pemText = x.PEM
	}
	f.mu.Unlock()
	switch {
	case !ok:
		acmError(c, http.StatusBadRequest, "ResourceNotFoundException", fmt.Sprintf("Could not find certificate %s.", in.CertificateArn))
		return
	case pemText == "":
		acmError(c, http.StatusBadRequest, "RequestInProgressException", fmt.Sprintf("Certificate %s is not yet issued.", in.CertificateArn))
		return
	}
	leaf, chain := pemText, ""
	if i := strings.Index(pemText, "-----END CERTIFICATE-----"); i >= 0 {
		end := i + len("-----END CERTIFICATE-----")
		leaf, chain = pemText[:end]+"\n", strings.TrimLeft(pemText[end:], "\n")
	}
	out := map[string]any{"Certificate": leaf}
	if chain != "" {
		out["CertificateChain"] = chain
	}
	acmJSON(c, out)
}

func validations(vs []DomainValidation) []map[string]any {
	out := []map[string]any{}
	for _, v := range vs {
		m := map[string]any{"DomainName": v.DomainName}
		for k, s := range map[string]string{"ValidationDomain": v.ValidationDomain, "ValidationStatus": v.ValidationStatus, "ValidationMethod": v.ValidationMethod} {
			if s != "" {
				m[k] = s
			}
		}
		if r := v.Record; r != nil {
			m["ResourceRecord"] = map[string]string{"Name": r.Name, "Type": r.Type, "Value": r.Value}
		}
		out = append(out, m)
	}
	return out
}

func putTimes(m map[string]any, c *Certificate) {
	for k, t := range map[string]time.Time{"NotBefore": c.NotBefore, "NotAfter": c.NotAfter,
		"CreatedAt": c.CreatedAt, "IssuedAt": c.IssuedAt, "ImportedAt": c.ImportedAt} {
		if !t.IsZero() {
			m[k] = epoch(t)
		}
	}
}

// epoch is a timestamp as JSON protocols send it: seconds since the epoch,
// as a number with a fraction.
func epoch(t time.Time) json.Number {
	return json.Number(strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func acmJSON(c *call, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		acmError(c, http.StatusInternalServerError, "InternalFailure", err.Error())
		return
	}
	c.reply(http.StatusOK, "application/x-amz-json-1.1", b)
}

func acmError(c *call, status int, code, msg string) {
	b, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
	c.reply(status, "application/x-amz-json-1.1", b)
}

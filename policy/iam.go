package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
)

// IAMRef names the IAM server certificate a finding is about, or that an
// endpoint of the finding serves (matched by serial number).
type IAMRef struct {
	ARN     string `json:"arn"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Account string `json:"account,omitempty"`
}

// IAMCertificate is an IAM server certificate with the probed endpoints
// and the AWS resources that serve it.
type IAMCertificate struct {
	iamcert.Certificate
	// SHA256 is the fingerprint of the served certificate with the same
	// serial number, else that of the PEM IAM gives.
	SHA256 string `json:"sha256,omitempty"`
	// Endpoints are the probed endpoints that serve it.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// Consumers are the load balancers and distributions whose listeners
	// serve it.
	Consumers []ConsumerRef `json:"consumers,omitempty"`
}

// AddIAM adds IAM server certificates to judge. Nothing renews them, so
// Result judges their expiry with manual-renewal advice, links each to the
// endpoints serving a certificate with the same serial number and to the
// consumers whose listeners name it, and merges an endpoint's expiry
// finding with the certificate's.
func (e *Evaluator) AddIAM(certs ...iamcert.Certificate) {
	e.inv.iam = append(e.inv.iam, certs...)
}

// judgeIAM judges the IAM inventory, edits and extends fs (Result's own)
// and returns the inventory as the report lists it.
func (e *Evaluator) judgeIAM(fs []Finding) ([]Finding, []IAMCertificate) {
	if len(e.inv.iam) == 0 {
		return fs, nil
	}
	sv := e.servedIndex()
	bySerial := map[string][]string{}
	for i := range e.certs {
		bySerial[e.certs[i].Serial] = append(bySerial[e.certs[i].Serial], e.certs[i].SHA256)
	}
	expiry := map[string]int{} // fp -> index of its leaf's expiry finding
	for i := range fs {
		f := &fs[i]
		if c := e.cert(f.Certificate); c != nil && (f.Kind == Expiring || f.Kind == Expired) && f.Deadline.Equal(c.NotAfter.Time()) {
			expiry[f.Certificate] = i
		}
	}
	certs := slices.Clone(e.inv.iam)
	slices.SortFunc(certs, func(a, b iamcert.Certificate) int { return strings.Compare(a.ARN, b.ARN) })
	report := make([]IAMCertificate, len(certs))
	for i := range certs {
		c := &certs[i]
		fp := ""
		if c.Fingerprint != "" && e.cert(c.Fingerprint) != nil {
			fp = c.Fingerprint
		} else if c.Serial != "" {
			for _, cand := range bySerial[c.Serial] {
				if e.cert(cand).NotAfter == At(c.NotAfter) {
					fp = cand
					break
				}
			}
		}
		eps := sv.endpoints(fp)
		cons := append(e.consumersOf(c.ARN, eps), e.consumersOf(certconsumer.IAMCertificateID+c.ID, eps)...)
		report[i] = IAMCertificate{Certificate: *c, SHA256: cmp.Or(fp, c.Fingerprint), Endpoints: eps, Consumers: cons}
		ref := IAMRef{ARN: c.ARN, ID: c.ID, Name: c.Name, Account: c.Account}
		for j := range fs {
			if fp != "" && fs[j].Certificate == fp {
				fs[j].withRecords(func(rs *Records) { rs.IAM = append(slices.Clip(rs.IAM), ref) })
			}
		}
		tier, msg := e.judgeServerCertificate(c, cons, fp != "")
		if tier == None {
			continue
		}
		kind := Expiring
		if !c.NotAfter.After(e.now) {
			kind = Expired
		}
		if j, ok := expiry[fp]; ok && fp != "" {
			f := &fs[j]
			f.Kind, f.Tier, f.Message = kind, max(f.Tier, tier), msg
			continue
		}
		f := Finding{Kind: kind, Tier: tier, Certificate: cmp.Or(fp, c.Fingerprint), Subject: cmp.Or(c.Subject, c.Name),
			Deadline: At(c.NotAfter), Endpoints: eps, Message: msg, Records: &Records{IAM: []IAMRef{ref}}}
		if fp == "" {
			f.Name, f.Endpoints = c.ARN, []Endpoint{}
		}
		fs = append(fs, f)
	}
	slices.SortFunc(report, func(a, b IAMCertificate) int {
		return cmp.Or(a.NotAfter.Compare(b.NotAfter), strings.Compare(a.ARN, b.ARN))
	})
	return fs, report
}

// judgeServerCertificate judges one IAM server certificate's expiry: the
// expiry tiers when it is in use (served, or named by a listener), at
// most a notice when not; critical once expired and in use.
func (e *Evaluator) judgeServerCertificate(c *iamcert.Certificate, cons []ConsumerRef, served bool) (Tier, string) {
	if c.NotAfter.IsZero() {
		return None, ""
	}
	it := fmt.Sprintf("IAM server certificate %q (%s)", c.Name, c.ARN)
	inUse := served || len(cons) > 0
	use := "not used by any listener certwatch sees"
	switch {
	case len(cons) > 0:
		var parts []string
		for _, k := range cons[:min(3, len(cons))] {
			parts = append(parts, fmt.Sprintf("%s %s (%s, port %s)", k.Kind, k.ARN, k.DNSName, joinPorts(k.Ports)))
		}
		use = "used by " + strings.Join(parts, ", ")
		if n := len(cons) - 3; n > 0 {
			use += fmt.Sprintf(" and %d more", n)
		}
	case served:
		use = "served by the endpoints listed"
	}
	renew := fmt.Sprintf("get a renewed certificate from its CA, upload it (aws iam upload-server-certificate --server-certificate-name %s ...), switch every listener using this one to it%s, then delete this one (aws iam delete-server-certificate --server-certificate-name %s); or move to ACM, which renews for you",
		shellQuote(c.Name+"-renewed"), switchAdvice(cons), shellQuote(c.Name))
	if !c.NotAfter.After(e.now) {
		ago := fmt.Sprintf("expired %s ago (%s)", humanBetween(c.NotAfter, e.now), stamp(c.NotAfter))
		if !inUse {
			return Info, fmt.Sprintf("%s %s and is %s; delete it (aws iam delete-server-certificate --server-certificate-name %s) to keep the inventory clean", it, ago, use, shellQuote(c.Name))
		}
		return Critical, fmt.Sprintf("%s %s and is still %s; clients reject it now: %s", it, ago, use, renew)
	}
	tier := TierFor(c.NotBefore, c.NotAfter, e.rules.Tiers, e.now)
	if c.NotBefore.IsZero() {
		tier = TierFor(c.NotAfter.Add(-365*day), c.NotAfter, e.rules.Tiers, e.now)
	}
	if !inUse {
		tier = min(tier, Notice)
	}
	if tier == None {
		return None, ""
	}
	return tier, fmt.Sprintf("%s is outside ACM, so nothing renews it and no AWS alert covers it: manual renewal required. It expires in %s (%s) and is %s. To do: %s",
		it, humanBetween(e.now, c.NotAfter), stamp(c.NotAfter), use, renew)
}

// switchAdvice names the commands that switch the listeners in cons to a
// new certificate.
func switchAdvice(cons []ConsumerRef) string {
	var how []string
	add := func(s string) {
		if !slices.Contains(how, s) {
			how = append(how, s)
		}
	}
	for _, k := range cons {
		switch k.Kind {
		case certconsumer.KindELBv2:
			add("aws elbv2 modify-listener --certificates for a default certificate, add-listener-certificates and remove-listener-certificates for an SNI one")
		case certconsumer.KindELB:
			add("aws elb set-load-balancer-listener-ssl-certificate")
		case certconsumer.KindCloudFront:
			add("the distribution's viewer certificate (aws cloudfront update-distribution)")
		}
	}
	if len(how) == 0 {
		return " (and install it on the servers listed)"
	}
	return " (" + strings.Join(how, "; ") + ")"
}

func joinPorts(ports []int) string {
	var s []string
	for _, p := range ports {
		s = append(s, fmt.Sprint(p))
	}
	return strings.Join(s, ", ")
}

package policy_test

import (
	"crypto/x509"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
	"github.com/certwatch/certwatch/internal/certtest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
)

const lbID = "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/web/1"

// acmCert is an issued AMAZON_ISSUED certificate for name, in use by a load
// balancer and eligible for renewal; mod adjusts it.
func acmCert(name string, notAfter time.Time, mod ...func(*acmcert.Certificate)) acmcert.Certificate {
	c := acmcert.Certificate{
		ARN:    "arn:aws:acm:eu-west-1:111111111111:certificate/" + name,
		Region: "eu-west-1", Account: "111111111111",
		DomainName: name, SubjectAlternativeNames: []string{name},
		Serial:    hex.EncodeToString([]byte(name)),
		NotBefore: notAfter.Add(-395 * day), NotAfter: notAfter,
		Type: acmcert.AmazonIssued, Status: acmcert.StatusIssued,
		InUse: true, InUseBy: []string{lbID},
		RenewalEligibility: acmcert.Eligible,
	}
	for _, m := range mod {
		m(&c)
	}
	return c
}

func renewal(status acmcert.RenewalStatus, reason string) func(*acmcert.Certificate) {
	return func(c *acmcert.Certificate) { c.RenewalStatus, c.RenewalStatusReason = status, reason }
}

func notInUse(c *acmcert.Certificate) {
	c.InUse, c.InUseBy, c.RenewalEligibility = false, nil, acmcert.Ineligible
}

func imported(c *acmcert.Certificate) {
	c.Type, c.RenewalEligibility = acmcert.Imported, acmcert.Ineligible
}

// dnsValidated gives c the DNS validation record of its domain, pending in
// its renewal when pending is set.
func dnsValidated(pending bool) func(*acmcert.Certificate) {
	return func(c *acmcert.Certificate) {
		rec := &acmcert.Record{Name: "_3639ac51." + c.DomainName, Type: "CNAME", Value: "_98d4ae8d.mhbtsbpdnt.acm-validations.aws"}
		c.Validations = []acmcert.Validation{{DomainName: c.DomainName, Status: acmcert.ValidationSuccess, Method: "DNS", Record: rec}}
		if c.RenewalStatus != "" {
			st := acmcert.ValidationSuccess
			if pending {
				st = acmcert.ValidationPending
			}
			c.RenewalValidations = []acmcert.Validation{{DomainName: c.DomainName, Status: st, Method: "DNS", Record: rec}}
		}
	}
}

func zone(name, id string, records ...hostedzone.Record) hostedzone.Zone {
	return hostedzone.Zone{ID: id, Name: name, ValidationRecords: records}
}

func TestRenewal(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := func(d int) time.Time { return now.Add(time.Duration(d) * day) }
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	inter := root.MustIntermediate("Issuing", now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	leaf := func(notAfter time.Time, names ...string) *certtest.Leaf {
		return inter.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.AddDate(0, 0, -300), NotAfter: notAfter})
	}
	serve := func(name, addr string, l *certtest.Leaf) probes.Observation {
		return observe(name, addr, []*x509.Certificate{l.Cert, inter.Cert}, root.Pool(), now)
	}
	linked := func(l *certtest.Leaf) func(*acmcert.Certificate) {
		return func(c *acmcert.Certificate) {
			c.Serial = l.Cert.SerialNumber.Text(16)
			c.NotBefore, c.NotAfter = l.Cert.NotBefore, l.Cert.NotAfter
		}
	}
	selfSigned := certtest.MustSelfSigned(certtest.LeafOptions{DNSNames: []string{"shop.example.com"}, NotBefore: now.AddDate(0, 0, -1), NotAfter: in(400)})

	shopOld := leaf(in(5), "shop.example.com")
	renewed := func(notAfter time.Time, names ...string) *certtest.Leaf {
		return inter.MustLeaf(certtest.LeafOptions{DNSNames: names, NotBefore: now.AddDate(0, 0, -10), NotAfter: notAfter})
	}
	shopNew := renewed(in(300), "shop.example.com", "www.example.com")
	wildNew := renewed(in(200), "*.example.com")
	api := leaf(in(20), "api.example.com")
	www := leaf(in(25), "www.example.com")
	legacy := leaf(in(10), "legacy.example.com")
	host := leaf(in(200), "right.example.com")

	const (
		rec   = "_3639ac51.login.example.com"
		value = "_98d4ae8d.mhbtsbpdnt.acm-validations.aws"
	)
	public := zone("example.com", "Z1PUBLIC")
	private := hostedzone.Zone{ID: "Z2PRIVATE", Name: "example.com", Private: true,
		ValidationRecords: []hostedzone.Record{{Name: rec, Type: "CNAME", Value: value}}}

	type want struct {
		kind      policy.Kind
		tier      policy.Tier
		endpoints string // names, comma-separated
		acm       string // ARN suffixes of the linked ACM certificates
		contains  []string
	}
	tests := []struct {
		name   string
		margin time.Duration
		obs    []probes.Observation
		acm    []acmcert.Certificate
		zones  []hostedzone.Zone
		want   []want
		states map[string]policy.RenewalState // ARN suffix -> state
	}{
		{
			name:   "eligible, pending auto renewal, before the margin: quiet, auto-renews",
			acm:    []acmcert.Certificate{acmCert("ok.example.com", in(45), renewal(acmcert.RenewalPendingAutoRenewal, ""))},
			states: map[string]policy.RenewalState{"ok.example.com": policy.AutoRenews},
		},
		{
			name:   "no renewal summary yet and far from expiry: auto-renews",
			acm:    []acmcert.Certificate{acmCert("ok.example.com", in(200))},
			states: map[string]policy.RenewalState{"ok.example.com": policy.AutoRenews},
		},
		{
			name:   "private CA certificate renews without validation",
			acm:    []acmcert.Certificate{acmCert("db.internal.example", in(45), func(c *acmcert.Certificate) { c.Type = acmcert.Private })},
			states: map[string]policy.RenewalState{"db.internal.example": policy.AutoRenews},
		},
		{
			name: "still pending auto renewal inside the margin: overdue",
			acm:  []acmcert.Certificate{acmCert("late.example.com", in(20), renewal(acmcert.RenewalPendingAutoRenewal, ""))},
			want: []want{{policy.RenewalOverdue, policy.Warning, "", "late.example.com",
				[]string{"should have renewed", "by 2029-12-22", "expires in 20 days (2030-01-21)", "PENDING_AUTO_RENEWAL", "in use by " + lbID, "request a new certificate"}}},
			states: map[string]policy.RenewalState{"late.example.com": policy.RenewalStateOverdue},
		},
		{
			name:   "a smaller margin keeps it quiet longer",
			margin: 10 * day,
			acm:    []acmcert.Certificate{acmCert("late.example.com", in(20), renewal(acmcert.RenewalPendingAutoRenewal, ""))},
			states: map[string]policy.RenewalState{"late.example.com": policy.AutoRenews},
		},
		{
			name: "overdue escalates through the tiers",
			acm:  []acmcert.Certificate{acmCert("late.example.com", in(5), renewal(acmcert.RenewalSuccess, ""))},
			want: []want{{policy.RenewalOverdue, policy.Page, "", "late.example.com", []string{"renewal status: SUCCESS"}}},
		},
		{
			name: "failed renewal is a warning at once, with the reason and what to do",
			acm:  []acmcert.Certificate{acmCert("caa.example.com", in(50), renewal(acmcert.RenewalFailed, "CAA_ERROR"))},
			want: []want{{policy.RenewalFailed, policy.Warning, "", "caa.example.com",
				[]string{"its renewal failed (CAA_ERROR)", "CAA record allowing amazon.com", "expires in 50 days"}}},
			states: map[string]policy.RenewalState{"caa.example.com": policy.RenewalStateFailed},
		},
		{
			name: "failed renewal escalates through the tiers",
			acm:  []acmcert.Certificate{acmCert("caa.example.com", in(5), renewal(acmcert.RenewalFailed, "CAA_ERROR"))},
			want: []want{{policy.RenewalFailed, policy.Page, "", "caa.example.com", nil}},
		},
		{
			name:  "pending validation with the CNAME missing from a visible zone says which record to create",
			acm:   []acmcert.Certificate{acmCert("login.example.com", in(50), renewal(acmcert.RenewalPendingValidation, ""), dnsValidated(true))},
			zones: []hostedzone.Zone{public, zone("other.example", "Z9")},
			want: []want{{policy.RenewalFailed, policy.Warning, "", "login.example.com", []string{
				"its renewal waits for domain validation of login.example.com",
				"create this record in Route 53 zone example.com (Z1PUBLIC): name " + rec + ", type CNAME, value " + value}}},
		},
		{
			name: "pending validation without a visible zone names the record to check at the DNS provider",
			acm:  []acmcert.Certificate{acmCert("login.example.com", in(50), renewal(acmcert.RenewalPendingValidation, ""), dnsValidated(true))},
			want: []want{{policy.RenewalFailed, policy.Warning, "", "login.example.com", []string{
				"make sure this record exists with the DNS provider", "name " + rec + ", type CNAME, value " + value}}},
		},
		{
			name:  "healthy renewal but the validation CNAME points elsewhere: notice before ACM starts",
			acm:   []acmcert.Certificate{acmCert("login.example.com", in(90), renewal(acmcert.RenewalPendingAutoRenewal, ""), dnsValidated(false))},
			zones: []hostedzone.Zone{zone("example.com", "Z1PUBLIC", hostedzone.Record{Name: rec, Type: "CNAME", Value: "_old.acm-validations.aws"})},
			want: []want{{policy.ValidationRecordMissing, policy.Notice, "", "login.example.com", []string{
				"next renewal will fail", "Change CNAME " + rec + " in Route 53 zone example.com (Z1PUBLIC) from _old.acm-validations.aws to " + value, "starts renewing on 2030-01-31"}}},
			states: map[string]policy.RenewalState{"login.example.com": policy.RenewalAtRisk},
		},
		{
			name:  "missing validation CNAME inside ACM's renewal window is a warning",
			acm:   []acmcert.Certificate{acmCert("login.example.com", in(50), dnsValidated(false))},
			zones: []hostedzone.Zone{public},
			want:  []want{{policy.ValidationRecordMissing, policy.Warning, "", "login.example.com", []string{"Create this record in Route 53 zone example.com"}}},
		},
		{
			name:   "validation CNAME present and right: auto-renews",
			acm:    []acmcert.Certificate{acmCert("login.example.com", in(50), dnsValidated(false))},
			zones:  []hostedzone.Zone{zone("example.com", "Z1PUBLIC", hostedzone.Record{Name: rec, Type: "CNAME", Value: value})},
			states: map[string]policy.RenewalState{"login.example.com": policy.AutoRenews},
		},
		{
			name:   "a record in a private zone does not count, and is not claimed missing",
			acm:    []acmcert.Certificate{acmCert("login.example.com", in(50), dnsValidated(false))},
			zones:  []hostedzone.Zone{private},
			states: map[string]policy.RenewalState{"login.example.com": policy.AutoRenews},
		},
		{
			name: "imported certificate: normal tiers, manual renewal",
			acm:  []acmcert.Certificate{acmCert("legacy.example.com", in(10), imported)},
			want: []want{{policy.Expiring, policy.Warning, "", "legacy.example.com", []string{"imported", "manual renewal required", "reimport", "--certificate-arn arn:aws:acm:eu-west-1:111111111111:certificate/legacy.example.com"}}},
		},
		{
			name:   "imported and far from expiry: nothing yet",
			acm:    []acmcert.Certificate{acmCert("legacy.example.com", in(200), imported)},
			states: map[string]policy.RenewalState{"legacy.example.com": policy.RenewalManual},
		},
		{
			name: "ineligible and not in use: notice only, however close",
			acm:  []acmcert.Certificate{acmCert("spare.example.com", in(1), notInUse)},
			want: []want{{policy.Expiring, policy.Notice, "", "spare.example.com", []string{"not in use, so ACM will not renew it", "or delete it"}}},
		},
		{
			name: "expired and not in use: informational",
			acm:  []acmcert.Certificate{acmCert("gone.example.com", in(-3), notInUse, func(c *acmcert.Certificate) { c.Status = acmcert.StatusExpired })},
			want: []want{{policy.Expired, policy.Info, "", "gone.example.com", []string{"expired 3 days ago", "not in use", "delete it"}}},
		},
		{
			name: "expired and in use: critical",
			acm:  []acmcert.Certificate{acmCert("dead.example.com", in(-3), func(c *acmcert.Certificate) { c.Status = acmcert.StatusExpired })},
			want: []want{{policy.Expired, policy.Critical, "", "dead.example.com", []string{"still in use by " + lbID, "request a new one"}}},
		},
		{
			name:   "never issued: nothing to renew",
			acm:    []acmcert.Certificate{acmCert("new.example.com", time.Time{}, func(c *acmcert.Certificate) { c.Status = acmcert.StatusPendingValidation })},
			states: map[string]policy.RenewalState{"new.example.com": policy.RenewalNotIssued},
		},
		{
			name: "not described: judged by expiry alone",
			acm:  []acmcert.Certificate{acmCert("part.example.com", in(10), func(c *acmcert.Certificate) { c.Partial, c.RenewalEligibility, c.InUseBy = true, "", nil })},
			want: []want{{policy.Expiring, policy.Warning, "", "part.example.com", []string{"could not be described", "acm:DescribeCertificate"}}},
		},
		{
			name: "one imported certificate in two regions is one finding",
			acm: []acmcert.Certificate{
				acmCert("legacy.example.com", in(10), imported),
				acmCert("legacy.example.com", in(10), imported, func(c *acmcert.Certificate) {
					c.Region, c.ARN = "us-east-1", "arn:aws:acm:us-east-1:111111111111:certificate/legacy.example.com"
				}),
			},
			want: []want{{policy.Expiring, policy.Warning, "", "legacy.example.com,legacy.example.com", nil}},
		},
		{
			name:   "endpoint serving an ACM certificate that renews in time: its expiry is not announced",
			margin: 20 * day,
			obs:    []probes.Observation{serve("www.example.com", "10.0.0.1", www)},
			acm:    []acmcert.Certificate{acmCert("www.example.com", in(25), linked(www), renewal(acmcert.RenewalPendingAutoRenewal, ""))},
			states: map[string]policy.RenewalState{"www.example.com": policy.AutoRenews},
		},
		{
			name: "endpoint serving an overdue ACM certificate: one finding with both",
			obs:  []probes.Observation{serve("api.example.com", "10.0.0.1", api), serve("api.example.com", "10.0.0.2", api)},
			acm:  []acmcert.Certificate{acmCert("api.example.com", in(20), linked(api), renewal(acmcert.RenewalPendingAutoRenewal, ""))},
			want: []want{{policy.RenewalOverdue, policy.Warning, "api.example.com,api.example.com", "api.example.com", []string{"should have renewed"}}},
		},
		{
			name: "endpoint serving an imported ACM certificate: expiry with the ARN",
			obs:  []probes.Observation{serve("legacy.example.com", "10.0.0.1", legacy)},
			acm:  []acmcert.Certificate{acmCert("legacy.example.com", in(10), linked(legacy), imported, func(c *acmcert.Certificate) { c.InUse, c.InUseBy = false, nil })},
			want: []want{
				{policy.Expiring, policy.Warning, "legacy.example.com", "legacy.example.com", []string{"manual renewal required", "served by the endpoints listed"}},
				{policy.RenewalMissed, policy.Warning, "legacy.example.com", "legacy.example.com", []string{"renewal overdue", "should have been renewed by 2029-12-12"}},
			},
		},
		{
			name: "other findings of a served ACM certificate carry the link",
			obs:  []probes.Observation{serve("wrong.example.com", "10.0.0.1", host)},
			acm:  []acmcert.Certificate{acmCert("right.example.com", in(200), linked(host))},
			want: []want{{policy.HostnameMismatch, policy.Page, "wrong.example.com", "right.example.com", nil}},
		},
		{
			name: "endpoint still serves the old certificate after ACM renewed it: stale deployment",
			obs:  []probes.Observation{serve("shop.example.com", "10.0.0.1", shopOld)},
			acm: []acmcert.Certificate{acmCert("shop.example.com", in(300), renewal(acmcert.RenewalSuccess, ""), func(c *acmcert.Certificate) {
				c.SubjectAlternativeNames = []string{"shop.example.com", "www.example.com"}
			})},
			want: []want{{policy.StaleDeployment, policy.Page, "shop.example.com", "", []string{
				"shop.example.com:443 (10.0.0.1) still serves \"shop.example.com\" (serial ", "which expires in 5 days (2030-01-06)", "ACM holds a renewed certificate for the same names: ACM certificate \"shop.example.com\" (arn:aws:acm:eu-west-1:111111111111:certificate/shop.example.com;", "the rollout did not", "attach it"}}},
		},
		{
			name: "another endpoint serves a renewed certificate: stale deployment",
			obs:  []probes.Observation{serve("shop.example.com", "10.0.0.1", shopOld), serve("www.example.com", "10.0.0.2", shopNew)},
			want: []want{{policy.StaleDeployment, policy.Page, "shop.example.com", "", []string{"served by www.example.com:443", "install it on the endpoints listed"}}},
		},
		{
			name: "a wildcard covers the old names",
			obs:  []probes.Observation{serve("shop.example.com", "10.0.0.1", shopOld), serve("cdn.example.com", "10.0.0.2", wildNew)},
			want: []want{{policy.StaleDeployment, policy.Page, "shop.example.com", "", []string{"\"*.example.com\""}}},
		},
		{
			name: "a certificate that expires soon itself is no replacement",
			obs:  []probes.Observation{serve("shop.example.com", "10.0.0.1", leaf(in(-3), "shop.example.com")), serve("cdn.example.com", "10.0.0.2", renewed(in(5), "*.example.com"))},
			want: []want{
				{policy.Expired, policy.Critical, "shop.example.com", "", nil},
				// Its expected renewal (a third of its 15 days left) is
				// today: within the grace of half a day.
				{policy.Expiring, policy.Page, "cdn.example.com", "", nil},
			},
		},
		{
			name: "a longer-lived certificate issued before the old one is no renewal of it",
			obs:  []probes.Observation{serve("shop.example.com", "10.0.0.1", shopOld), serve("cdn.example.com", "10.0.0.2", inter.MustLeaf(certtest.LeafOptions{DNSNames: []string{"*.example.com"}, NotBefore: now.AddDate(0, 0, -301), NotAfter: in(200)}))},
			want: []want{{policy.Expiring, policy.Page, "shop.example.com", "", nil}, {policy.RenewalMissed, policy.Warning, "shop.example.com", "", nil}},
		},
		{
			name: "newer certificate on another address of the same name is inconsistency, not staleness",
			obs:  []probes.Observation{serve("shop.example.com", "10.0.0.1", shopOld), serve("shop.example.com", "10.0.0.2", shopNew)},
			want: []want{
				{policy.Expiring, policy.Page, "shop.example.com", "", nil},
				{policy.InconsistentDeployment, policy.Warning, "shop.example.com,shop.example.com", "", nil},
			},
		},
		{
			name: "an untrusted newer certificate is no replacement",
			obs: []probes.Observation{
				serve("shop.example.com", "10.0.0.1", shopOld),
				observe("test.example.com", "10.0.0.2", []*x509.Certificate{selfSigned.Cert}, root.Pool(), now),
			},
			want: []want{
				{policy.HostnameMismatch, policy.Page, "test.example.com", "", nil},
				{policy.SelfSigned, policy.Page, "test.example.com", "", nil},
				{policy.Expiring, policy.Page, "shop.example.com", "", nil},
				// Nor is it a renewal: the old one's renewal is missed.
				{policy.RenewalMissed, policy.Warning, "shop.example.com", "", []string{"renewal overdue"}},
			},
		},
		{
			name: "a newer certificate that lacks one of the names is no replacement",
			obs:  []probes.Observation{serve("shop.example.com", "10.0.0.1", shopOld), serve("api.example.com", "10.0.0.2", leaf(in(300), "api.example.com"))},
			want: []want{{policy.Expiring, policy.Page, "shop.example.com", "", nil}, {policy.RenewalMissed, policy.Warning, "shop.example.com", "", nil}},
		},
		{
			name: "imported ACM certificate in use while a newer one sits unused in ACM: stale deployment",
			acm: []acmcert.Certificate{
				acmCert("legacy.example.com", in(10), imported),
				acmCert("legacy.example.com", in(400), imported, notInUse, func(c *acmcert.Certificate) {
					c.ARN, c.Serial = "arn:aws:acm:eu-west-1:111111111111:certificate/legacy-2031", "0a0b"
					c.NotBefore = now.Add(-day)
				}),
			},
			want: []want{{policy.StaleDeployment, policy.Warning, "", "legacy.example.com", []string{"which expires in 10 days (2030-01-11), is still in use by " + lbID, "legacy-2031"}}},
		},
		{
			name: "requested, pending validation for two days, record missing: warning naming the record, deadline when ACM gives up",
			acm: []acmcert.Certificate{acmCert("new.example.com", time.Time{}, dnsValidated(false), func(c *acmcert.Certificate) {
				c.Status, c.NotBefore, c.InUse, c.InUseBy, c.RenewalEligibility, c.CreatedAt = acmcert.StatusPendingValidation, time.Time{}, false, nil, acmcert.Ineligible, now.Add(-2*day)
			})},
			zones: []hostedzone.Zone{public},
			want: []want{{policy.ValidationRecordMissing, policy.Warning, "", "new.example.com", []string{"will never be issued",
				"Create this record in Route 53 zone example.com (Z1PUBLIC): name _3639ac51.new.example.com, type CNAME, value " + value, "ACM gives up 2030-01-02 00:00 UTC"}}},
			states: map[string]policy.RenewalState{"new.example.com": policy.RenewalNotIssued},
		},
		{
			name: "pending validation for an hour: info, DNS may still be on its way",
			acm: []acmcert.Certificate{acmCert("new.example.com", time.Time{}, dnsValidated(false), func(c *acmcert.Certificate) {
				c.Status, c.NotBefore, c.InUse, c.InUseBy, c.CreatedAt = acmcert.StatusPendingValidation, time.Time{}, false, nil, now.Add(-time.Hour)
			})},
			zones: []hostedzone.Zone{public},
			want:  []want{{policy.ValidationRecordMissing, policy.Info, "", "new.example.com", []string{"requested 60 minutes ago"}}},
		},
		{
			name: "pending validation whose record is in place: nothing to say",
			acm: []acmcert.Certificate{acmCert("login.example.com", time.Time{}, dnsValidated(false), func(c *acmcert.Certificate) {
				c.Status, c.NotBefore, c.CreatedAt = acmcert.StatusPendingValidation, time.Time{}, now.Add(-2*day)
			})},
			zones: []hostedzone.Zone{zone("example.com", "Z1PUBLIC", hostedzone.Record{Name: rec, Type: "CNAME", Value: value})},
		},
		{
			name:  "issued, unused (not yet eligible), record missing: notice naming the record",
			acm:   []acmcert.Certificate{acmCert("idle.example.com", in(300), notInUse, dnsValidated(false))},
			zones: []hostedzone.Zone{public},
			want: []want{{policy.ValidationRecordMissing, policy.Notice, "", "idle.example.com", []string{"not in use, so not yet eligible",
				"The day it is used, its renewal will fail", "name _3639ac51.idle.example.com, type CNAME"}}},
			states: map[string]policy.RenewalState{"idle.example.com": policy.RenewalIneligible},
		},
		{
			name: "an address serves the certificate before ACM's renewal with 100 days left: stale, and no inconsistent_deployment",
			obs: []probes.Observation{
				serve("shop.example.com", "10.0.0.1", leaf(in(100), "shop.example.com")),
				serve("shop.example.com", "10.0.0.2", shopNew),
			},
			acm: []acmcert.Certificate{acmCert("shop.example.com", shopNew.Cert.NotAfter, linked(shopNew), func(c *acmcert.Certificate) {
				c.SubjectAlternativeNames = []string{"shop.example.com", "www.example.com"}
			})},
			want: []want{{policy.StaleDeployment, policy.Warning, "shop.example.com", "", []string{
				"shop.example.com:443 (10.0.0.1) still serves", "which expires in 100 days (2030-04-11)", "ACM holds a renewed certificate", "certificate/shop.example.com"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := policy.DefaultRules()
			if tt.margin != 0 {
				rules.RenewalMargin = tt.margin
			}
			ev := policy.NewEvaluator(rules, now)
			for i := range tt.obs {
				ev.Add(&tt.obs[i])
			}
			ev.AddACM(tt.acm...)
			ev.SetZones(tt.zones)
			res := ev.Result()

			if len(res.Findings) != len(tt.want) {
				t.Errorf("got %d findings, want %d", len(res.Findings), len(tt.want))
			}
			for i, f := range res.Findings {
				t.Logf("%s %s: %s", f.Tier, f.Kind, f.Message)
				if i >= len(tt.want) {
					t.Errorf("unexpected finding %s %s: %s", f.Kind, f.Tier, f.Message)
					continue
				}
				w := tt.want[i]
				var eps, arns []string
				for _, ep := range f.Endpoints {
					eps = append(eps, ep.Name)
				}
				for _, r := range f.Refs().ACM {
					arns = append(arns, r.ARN[strings.LastIndex(r.ARN, "/")+1:])
				}
				if f.Kind != w.kind || f.Tier != w.tier || strings.Join(eps, ",") != w.endpoints || strings.Join(arns, ",") != w.acm {
					t.Errorf("finding %d = %s %s endpoints %v acm %v, want %s %s endpoints %q acm %q\n  %s", i, f.Kind, f.Tier, eps, arns, w.kind, w.tier, w.endpoints, w.acm, f.Message)
				}
				for _, s := range w.contains {
					if !strings.Contains(f.Message, s) {
						t.Errorf("finding %d (%s) message lacks %q:\n  %s", i, f.Kind, s, f.Message)
					}
				}
			}
			if len(res.ACM) != len(tt.acm) {
				t.Errorf("ACM section has %d certificates, want %d", len(res.ACM), len(tt.acm))
			}
			for suffix, want := range tt.states {
				found := false
				for _, c := range res.ACM {
					if strings.HasSuffix(c.ARN, "/"+suffix) {
						found = true
						if c.Renewal != want {
							t.Errorf("%s renewal = %q, want %q", suffix, c.Renewal, want)
						}
					}
				}
				if !found {
					t.Errorf("ACM section lacks %s", suffix)
				}
			}
		})
	}
}

// TestRenewalLinksServedCertificate checks the report side of linking: the
// ACM entry names the served certificate and its endpoints, and RenewBy is
// NotAfter minus the margin.
func TestRenewalLinksServedCertificate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	root := certtest.MustCA("Root", now.AddDate(-5, 0, 0), now.AddDate(10, 0, 0))
	l := root.MustLeaf(certtest.LeafOptions{DNSNames: []string{"www.example.com"}, NotBefore: now.AddDate(0, 0, -300), NotAfter: now.AddDate(0, 0, 90)})
	o := observe("www.example.com", "10.0.0.1", []*x509.Certificate{l.Cert}, root.Pool(), now)
	c := acmCert("www.example.com", l.Cert.NotAfter, func(c *acmcert.Certificate) {
		// ACM shows serials as colon-separated octets with leading zeros.
		c.Serial = "00:" + l.Cert.SerialNumber.Text(16)
		c.NotBefore = l.Cert.NotBefore
	})
	c.Serial = acmcert.NormalizeSerial(c.Serial)
	ev := policy.NewEvaluator(policy.DefaultRules(), now)
	ev.Add(&o)
	ev.AddACM(c)
	res := ev.Result()
	if len(res.Findings) != 0 {
		t.Errorf("findings = %+v, want none", res.Findings)
	}
	if len(res.ACM) != 1 {
		t.Fatalf("ACM = %+v, want one certificate", res.ACM)
	}
	got := res.ACM[0]
	if got.SHA256 != probes.Fingerprint(l.Cert) || len(got.Endpoints) != 1 || got.Endpoints[0].Address != "10.0.0.1" {
		t.Errorf("ACM entry sha256 %q endpoints %+v, want the served certificate on 10.0.0.1", got.SHA256, got.Endpoints)
	}
	if want := l.Cert.NotAfter.Add(-policy.DefaultRenewalMargin); !got.RenewBy.Equal(want) || got.Renewal != policy.AutoRenews {
		t.Errorf("renewal %q by %v, want auto-renews by %v", got.Renewal, got.RenewBy, want)
	}
}

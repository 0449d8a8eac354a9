package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
)

// Kinds of finding about cert-manager's Certificate resources
// (atrest.Issuance).
const (
	// CertManagerNotReady: a cert-manager Certificate's Ready condition is
	// False (or absent): the certificate in its Secret does not match what
	// it asks for, or was never issued. About the certificate its Secret
	// holds, beside that certificate's expiry finding, escalating through
	// its expiry tiers from a warning up to page; about the Certificate
	// resource (its Name) when its Secret holds none. Info while it has
	// been not Ready for less than CertManagerGrace, as during a first
	// issuance.
	CertManagerNotReady Kind = "certmanager_not_ready"
	// CertManagerRenewalOverdue: a cert-manager Certificate's renewal time
	// passed more than CertManagerGrace ago and its Secret still holds the
	// certificate issued before it: the renewal failed or never started.
	// Beside the certificate's expiry finding, at least a warning,
	// escalating through the expiry tiers up to page.
	CertManagerRenewalOverdue Kind = "certmanager_renewal_overdue"
)

// CertManagerGrace is how long a Certificate may be not Ready, or its
// renewal time past, before it is a warning: cert-manager issues within
// seconds to minutes (an ACME DNS challenge waits for propagation).
const CertManagerGrace = time.Hour

// AddUnattached adds cert-manager Certificates whose Secret held no
// certificate the source read (found.Inventory.Unattached). Result makes
// one that is not Ready a certmanager_not_ready finding about the
// resource, and one that is Ready a coverage_gap (secret_not_read): the
// certificate it reports is one certwatch does not see.
func (e *Evaluator) AddUnattached(issuances ...atrest.Issuance) {
	e.inv.unattached = append(e.inv.unattached, issuances...)
}

// judgeCertManager judges cert-manager's Certificates that write the
// certificates held at rest (their Issuances): one not Ready, and one
// whose renewal is overdue, is a finding of its own about the certificate
// its Secret holds, beside that certificate's expiry finding, which keeps
// its kind and tier (so routes and silences on expiring keep applying,
// and a short Ready=False flip opens and resolves only the cert-manager
// finding). Once the certificate has expired, its expired finding stays
// and says what cert-manager reports. It edits and extends fs.
func (e *Evaluator) judgeCertManager(fs []Finding, sv servedIndex) []Finding {
	for i := range e.rest {
		r := &e.rest[i]
		var notReady, overdue []*atrest.Issuance
		for k := range r.Issuances {
			is := &r.Issuances[k]
			switch {
			case !is.Ready:
				notReady = append(notReady, is)
			case e.renewalOverdue(r, is):
				overdue = append(overdue, is)
			}
		}
		if len(notReady)+len(overdue) == 0 {
			continue
		}
		if !r.NotAfter.After(e.now) {
			fs = e.explainExpired(fs, r, append(notReady, overdue...))
			continue
		}
		if len(notReady) > 0 {
			tier := Info
			if slices.ContainsFunc(notReady, func(is *atrest.Issuance) bool { return is.Since.IsZero() || e.now.Sub(is.Since) >= CertManagerGrace }) {
				tier = Warning
			}
			fs = e.certManagerFinding(fs, sv, r, CertManagerNotReady, tier, notReady)
		}
		if len(overdue) > 0 {
			fs = e.certManagerFinding(fs, sv, r, CertManagerRenewalOverdue, Warning, overdue)
		}
	}
	return fs
}

// renewalOverdue reports whether is, Ready, was to renew r (the leaf of its
// Secret) more than CertManagerGrace ago: its renewal time has passed and
// r was issued before it.
func (e *Evaluator) renewalOverdue(r *atrest.Certificate, is *atrest.Issuance) bool {
	return !is.RenewalTime.IsZero() && !e.now.Before(is.RenewalTime.Add(CertManagerGrace)) && r.NotBefore.Before(is.RenewalTime)
}

// certManagerFinding adds the finding of kind about r beside r's own
// expiry finding, which it leaves as it is: at least at floor and at r's
// expiry tier, but at most page, as renewal_missed, so that it and the
// expiry finding never both escalate to critical (the expiry finding
// alone carries the last tier).
func (e *Evaluator) certManagerFinding(fs []Finding, sv servedIndex, r *atrest.Certificate, kind Kind, floor Tier, iss []*atrest.Issuance) []Finding {
	f := restFinding(kind, max(floor, TierFor(r.NotBefore, r.NotAfter, e.rules.Tiers, e.now)), r, "")
	if e.cert(r.SHA256) != nil {
		f.Endpoints = sv.endpoints(r.SHA256)
		if f.Endpoints == nil {
			f.Endpoints = []Endpoint{}
		}
	}
	if j := slices.IndexFunc(fs, func(x Finding) bool {
		return x.Kind == Expiring && x.Certificate == r.SHA256 && x.Deadline.Equal(r.NotAfter)
	}); j >= 0 {
		f.Tier = max(f.Tier, fs[j].Tier)
		if len(fs[j].Endpoints) > 0 {
			f.Endpoints = slices.Clone(fs[j].Endpoints)
		}
		f.withRecords(func(rs *Records) { rs.ACM, rs.IAM = slices.Clone(fs[j].Refs().ACM), slices.Clone(fs[j].Refs().IAM) })
	}
	f.Tier = min(f.Tier, Page)
	var says []string
	for _, is := range iss[:min(3, len(iss))] {
		if kind == CertManagerNotReady {
			says = append(says, e.notReadyClause(is))
		} else {
			says = append(says, e.overdueClause(is, r))
		}
	}
	more := ""
	if len(iss) > 3 {
		more = fmt.Sprintf(" (and %d more Certificate resources)", len(iss)-3)
	}
	var secrets []atrest.Location
	for _, is := range iss {
		if is.Secret.Where != "" && !slices.Contains(secrets, is.Secret) {
			secrets = append(secrets, is.Secret)
		}
	}
	held := fmt.Sprintf("the certificate in %s (%q, serial %s) expires in %s (%s)",
		cmp.Or(atrest.Where(secrets, 3), "its Secret"), r.Subject, r.Serial, humanBetween(e.now, r.NotAfter), stamp(r.NotAfter))
	f.Message = Printable(fmt.Sprintf("%s%s; %s. To do: %s", strings.Join(says, "; "), more, held, certManagerAdvice(iss[0])))
	return append(fs, f)
}

// explainExpired adds what cert-manager says to the expired finding of r.
func (e *Evaluator) explainExpired(fs []Finding, r *atrest.Certificate, iss []*atrest.Issuance) []Finding {
	for j := range fs {
		if f := &fs[j]; f.Kind == Expired && f.Certificate == r.SHA256 {
			clause := e.notReadyClause(iss[0])
			if iss[0].Ready {
				clause = e.overdueClause(iss[0], r)
			}
			f.Message = Printable(fmt.Sprintf("%s. Also, %s. To do: %s", f.Message, clause, certManagerAdvice(iss[0])))
		}
	}
	return fs
}

// notReadyClause says that is is not Ready, with cert-manager's reason and
// message and since when: "cert-manager's certificate payments/api is not
// Ready (Failed: issuer ca not ready) since 2030-01-01".
func (e *Evaluator) notReadyClause(is *atrest.Issuance) string {
	why := cmp.Or(is.Reason, "no reason given")
	if is.Message != "" {
		why += ": " + is.Message
	}
	s := fmt.Sprintf("cert-manager's %s is not Ready (%s)", is.Location, why)
	if !is.Since.IsZero() {
		s += fmt.Sprintf(" since %s (%s ago)", stamp(is.Since), humanBetween(is.Since, e.now))
	}
	if is.Failure != "" && is.Failure != is.Message {
		s += "; its last issuance failed: " + is.Failure
	}
	return s
}

// overdueClause says that is was to renew r and has not.
func (e *Evaluator) overdueClause(is *atrest.Issuance, r *atrest.Certificate) string {
	s := fmt.Sprintf("cert-manager was to renew %s on %s (status.renewalTime, %s ago), but renewal is overdue: its Secret still holds the certificate issued %s, before that",
		is.Location, stamp(is.RenewalTime), humanBetween(is.RenewalTime, e.now), stamp(r.NotBefore))
	if is.Failure != "" {
		s += "; its last issuance failed: " + is.Failure
	}
	return s
}

// certManagerAdvice says what to do about is: the kubectl commands that
// say why, and its issuer. A name that is not a valid Kubernetes name
// gets no command (kubectl).
func certManagerAdvice(is *atrest.Issuance) string {
	ns, name, ok := strings.Cut(is.Location.Where, "/")
	if !ok {
		ns, name = "", is.Location.Where
	}
	ctx := ""
	if is.Location.Cluster != "" {
		ctx = " (cluster " + is.Location.Cluster + ")"
	}
	describe := "read the Certificate's events and CertificateRequests"
	if cmd, ok := kubectl("describe", "certificate", ns, name); ok {
		describe = cmd + ctx + " (its events and CertificateRequests say why)"
	} else {
		describe += ctx + " (" + cmd + ")"
	}
	return fmt.Sprintf("%s, then check its issuer (%s): a missing CA Secret, a failing ACME challenge, an expired issuer credential; cert-manager retries on its own once the cause is fixed",
		describe, issuerCommand(is.Issuer, ns))
}

// issuerCommand is the kubectl command describing issuer, of a
// Certificate in namespace ns, or why there is none.
func issuerCommand(ref atrest.IssuerRef, ns string) string {
	if ref.Name == "" {
		cmd, _ := kubectl("get", "certificaterequest", ns, "")
		return cmd
	}
	kind := cmp.Or(ref.Kind, "Issuer")
	if !kubeKind.MatchString(kind) {
		return fmt.Sprintf("the issuer kind %s is not a valid Kubernetes kind, so no kubectl command is given", singleQuote(kind))
	}
	resource := strings.ToLower(kind)
	if ref.Group != "" && ref.Group != "cert-manager.io" {
		if !isKubeSubdomain(ref.Group) {
			return fmt.Sprintf("the issuer group %s is not a valid Kubernetes API group, so no kubectl command is given", singleQuote(ref.Group))
		}
		resource += "." + ref.Group
	}
	if strings.Contains(resource, "clusterissuer") {
		ns = "" // cluster-scoped
	}
	cmd, _ := kubectl("describe", resource, ns, ref.Name)
	return cmd
}

// judgeUnattached judges the cert-manager Certificates whose Secret held
// no certificate (AddUnattached): one not Ready is a certmanager_not_ready
// finding about the resource (its Name), one Ready a coverage_gap
// (secret_not_read) at Rules.CoverageUnverified. gaps are the gaps so far;
// fs and gaps are extended.
func (e *Evaluator) judgeUnattached(fs []Finding, gaps []Gap) ([]Finding, []Gap) {
	seen := map[atrest.Location]bool{}
	for i := range e.inv.unattached {
		is := &e.inv.unattached[i]
		if seen[is.Location] {
			continue // read by two sources
		}
		seen[is.Location] = true
		where := is.Location.String()
		secret := is.Secret.String()
		if is.Secret.Where == "" {
			secret = "its Secret"
		}
		if !is.Ready {
			tier := Warning
			if !is.Since.IsZero() && e.now.Sub(is.Since) < CertManagerGrace {
				tier = Info
			}
			if !is.NotAfter.IsZero() {
				tier = max(tier, TierFor(time.Time{}, is.NotAfter, e.rules.Tiers, e.now))
			}
			msg := fmt.Sprintf("%s, and %s, which it writes, holds no certificate certwatch read: nothing is issued for it yet, or the Secret was deleted. To do: %s",
				e.notReadyClause(is), secret, certManagerAdvice(is))
			fs = append(fs, Finding{Kind: CertManagerNotReady, Tier: tier, Name: where, Subject: where, Deadline: At(e.now), Endpoints: []Endpoint{},
				Records: &Records{Locations: []atrest.Location{is.Location}}, Message: Printable(msg)})
			continue
		}
		ns, sname, _ := strings.Cut(is.Secret.Where, "/")
		getSecret, _ := kubectl("get", "secret", ns, sname)
		gap := Gap{Gap: found.Gap{Reason: found.GapSecretNotRead, Zone: where,
			Detail: fmt.Sprintf("cert-manager reports %s Ready, but %s, which it writes, held no certificate certwatch read", where, secret),
			Fix: fmt.Sprintf("check that the Secret exists (%s) and that the source's label_selector and secret_types select it (cert-manager writes Secrets of type kubernetes.io/tls)",
				getSecret)},
			Tier: e.rules.CoverageUnverified}
		gaps = append(gaps, gap)
		if gap.Tier == None {
			continue
		}
		fs = append(fs, Finding{Kind: CoverageGap, Tier: gap.Tier, Name: where, Subject: where, Deadline: At(e.now), Endpoints: []Endpoint{},
			Records: &Records{Locations: []atrest.Location{is.Location}},
			Message: Printable(gap.Detail + ": the expiry of the certificate it holds is not watched; " + gap.Fix)})
	}
	return fs, gaps
}

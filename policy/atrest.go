package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/certwatch/certwatch/discovery/atrest"
)

// AtRestCertificate is a certificate held at rest (files, keystores,
// Kubernetes objects) with the probed endpoints that serve it.
type AtRestCertificate struct {
	atrest.Certificate
	// Endpoints are the probed endpoints that serve it.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// AddAtRest adds certificates held at rest to judge; the evaluator keeps
// certs itself (read only) when it has none yet. Result merges the
// copies several sources hold by fingerprint, gives every finding about a
// served certificate the places it is held in, judges each certificate
// no endpoint serves by the same expiry and crypto policy as a served one,
// and makes an endpoint serving an older certificate than one held at rest
// for its names a stale deployment.
func (e *Evaluator) AddAtRest(certs ...atrest.Certificate) {
	if len(e.inv.atRest) == 0 {
		e.inv.atRest = slices.Clip(certs)
		return
	}
	e.inv.atRest = append(e.inv.atRest, certs...)
}

// mergeAtRest merges the certificates held at rest by fingerprint (two
// sources may hold one), locations sorted and without duplicates, into
// e.rest and restIdx. A copy found verified by any source is verified.
func (e *Evaluator) mergeAtRest() {
	if len(e.inv.atRest) == 0 || e.restIdx != nil {
		return
	}
	e.restIdx = make(map[string]int, len(e.inv.atRest))
	e.rest = make([]atrest.Certificate, 0, len(e.inv.atRest))
	for i := range e.inv.atRest {
		c := &e.inv.atRest[i]
		if k, ok := e.restIdx[c.SHA256]; ok {
			r := &e.rest[k]
			r.Locations = append(slices.Clip(r.Locations), c.Locations...)
			r.Issuances = append(slices.Clip(r.Issuances), c.Issuances...)
			r.Verified = r.Verified || c.Verified
			if len(r.Issuers) < len(c.Issuers) {
				r.Issuers = c.Issuers
			}
			continue
		}
		e.restIdx[c.SHA256] = len(e.rest)
		e.rest = append(e.rest, *c)
	}
	for i := range e.rest {
		r := &e.rest[i]
		slices.SortFunc(r.Locations, atrest.Location.Compare)
		r.Locations = slices.Compact(r.Locations)
	}
	slices.SortFunc(e.rest, func(a, b atrest.Certificate) int {
		return cmp.Or(a.NotAfter.Compare(b.NotAfter), strings.Compare(a.SHA256, b.SHA256))
	})
	for i := range e.rest {
		e.restIdx[e.rest[i].SHA256] = i
	}
}

// atRest returns the certificate held at rest with fingerprint fp, or nil.
func (e *Evaluator) atRest(fp string) *atrest.Certificate {
	if i, ok := e.restIdx[fp]; ok {
		return &e.rest[i]
	}
	return nil
}

// judgeAtRest gives every finding about a certificate held at rest its
// locations, adds the findings of the certificates held at rest that no
// endpoint serves (expiry, weak key, weak signature; a CA's expiry names
// what it issued), and returns the list the report carries. It edits and
// extends fs, which is Result's own; run it after the stale deployments
// are known.
func (e *Evaluator) judgeAtRest(fs []Finding) ([]Finding, []AtRestCertificate) {
	if len(e.rest) == 0 {
		return fs, nil
	}
	sv := e.servedIndex()
	for i := range fs {
		f := &fs[i]
		if f.Kind == InconsistentDeployment {
			continue // about a name, not one certificate
		}
		if r := e.atRest(f.Certificate); r != nil {
			f.withRecords(func(rs *Records) { rs.Locations = r.Locations })
		}
	}
	report := make([]AtRestCertificate, len(e.rest))
	for i := range e.rest {
		r := &e.rest[i]
		eps := sv.endpoints(r.SHA256)
		report[i] = AtRestCertificate{Certificate: *r, Endpoints: eps}
		if e.cert(r.SHA256) != nil {
			continue // served: judged as served, its findings carry the locations
		}
		fs = e.judgeRestExpiry(fs, r)
		fs = e.judgeRestCrypto(fs, r)
	}
	return e.judgeCertManager(fs, sv), report
}

// restFinding is a finding about a certificate held at rest that no
// endpoint serves: it lists no endpoint (an empty list) and its locations.
func restFinding(kind Kind, tier Tier, r *atrest.Certificate, msg string) Finding {
	return Finding{Kind: kind, Tier: tier, Certificate: r.SHA256, Subject: Printable(r.Subject), Deadline: At(r.NotAfter),
		Endpoints: []Endpoint{}, Records: recordsOf(Records{Locations: r.Locations}), Message: Printable(msg)}
}

// judgeRestExpiry judges the expiry of r by the expiry tiers, as a served
// leaf's.
func (e *Evaluator) judgeRestExpiry(fs []Finding, r *atrest.Certificate) []Finding {
	tier := TierFor(r.NotBefore, r.NotAfter, e.rules.Tiers, e.now)
	if tier < Notice {
		return fs
	}
	what := "certificate"
	if r.CA {
		what = "CA certificate"
	}
	where := atrest.Where(r.Locations, 3)
	advice := "renew it and replace every copy listed, then reload what reads them"
	if r.CA {
		advice = "issue a new CA certificate (same key, or a new CA whose certificates replace those it issued) and put it beside this one in every place listed before this one expires, then remove this one"
	}
	if !r.NotAfter.After(e.now) {
		msg := fmt.Sprintf("%s %q held at rest in %s expired %s ago (%s)%s: %s",
			what, r.Subject, where, humanBetween(r.NotAfter, e.now), stamp(r.NotAfter), e.underCA(r), advice)
		return append(fs, restFinding(Expired, Critical, r, msg))
	}
	msg := fmt.Sprintf("%s %q held at rest in %s expires in %s (%s)%s: %s",
		what, r.Subject, where, humanBetween(e.now, r.NotAfter), stamp(r.NotAfter), e.underCA(r), advice)
	return append(fs, restFinding(Expiring, tier, r, msg))
}

// underCA says, for a CA certificate, what its expiry takes down: the
// certificates held at rest that it issued (directly or through an
// intermediate) and the served leaves issued in its name.
func (e *Evaluator) underCA(r *atrest.Certificate) string {
	if !r.CA {
		return ""
	}
	var rest []string
	for i := range e.rest {
		if slices.Contains(e.rest[i].Issuers, r.SHA256) {
			rest = append(rest, fmt.Sprintf("%q (%s)", e.rest[i].Subject, atrest.Where(e.rest[i].Locations, 1)))
		}
	}
	var served []string
	for i := range e.certs {
		if c := &e.certs[i]; c.Issuer == r.Subject && c.SHA256 != r.SHA256 {
			served = append(served, fmt.Sprintf("%q", c.Subject))
		}
	}
	var parts []string
	if len(rest) > 0 {
		parts = append(parts, fmt.Sprintf("%d held at rest (%s)", len(rest), listN(rest, 3)))
	}
	if len(served) > 0 {
		parts = append(parts, fmt.Sprintf("%d served leaves issued in its name (%s)", len(served), listN(served, 3)))
	}
	if len(parts) == 0 {
		return "; it is a CA: every certificate it issued stops verifying when it expires"
	}
	return "; it is a CA: every certificate it issued stops verifying when it expires, among them " + strings.Join(parts, " and ")
}

func listN(items []string, n int) string {
	if len(items) > n {
		return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
	}
	return strings.Join(items, ", ")
}

// judgeRestCrypto judges r's key and, below a root, its signature, as a
// served certificate's.
func (e *Evaluator) judgeRestCrypto(fs []Finding, r *atrest.Certificate) []Finding {
	if e.rules.WeakKey != None {
		weak := ""
		switch {
		case r.KeyAlgorithm == "RSA" && r.KeyBits > 0 && r.KeyBits < MinRSABits:
			weak = fmt.Sprintf("a %d-bit RSA key", r.KeyBits)
		case r.KeyAlgorithm == "ECDSA" && r.KeyBits > 0 && r.KeyBits < MinECBits:
			weak = fmt.Sprintf("a %d-bit elliptic curve key", r.KeyBits)
		}
		if weak != "" {
			fs = append(fs, restFinding(WeakKey, e.rules.WeakKey, r, fmt.Sprintf("certificate %q held at rest in %s has %s; clients may refuse it and it can be broken: reissue it with an RSA key of at least %d bits or an ECDSA P-256 key",
				r.Subject, atrest.Where(r.Locations, 3), weak, MinRSABits)))
			fs[len(fs)-1].Deadline = At(e.now)
		}
	}
	if e.rules.WeakSignature != None && r.WeakSignature && !r.SelfSigned {
		fs = append(fs, restFinding(WeakSignature, e.rules.WeakSignature, r, fmt.Sprintf("certificate %q held at rest in %s is signed with %s; browsers and Go, Java and OpenSSL clients refuse it: reissue it signed with SHA-256 or better",
			r.Subject, atrest.Where(r.Locations, 3), r.SignatureAlgorithm)))
		fs[len(fs)-1].Deadline = At(e.now)
	}
	return fs
}

// restCandidate is the newer certificate r, held at rest, as a candidate
// replacement: the description names where it is held.
func restCandidate(r *atrest.Certificate) newer {
	return newer{names: normalizeNames(r.DNSNames), notBefore: r.NotBefore, notAfter: r.NotAfter, serial: r.Serial, fp: r.SHA256, rest: r,
		advice: "install it where the old one is used (import it into the same ARN for ACM) and reload or restart what serves it"}
}

// restStaleMessage explains the stale deployment of old, which f's
// endpoints serve, when n, held at rest, replaced it: "renewed in file
// /etc/ssl/api.pem on 2026-11-20; 10.0.0.7:443 still serves the old one,
// which expires in 3 days: reload or restart what serves it".
func (e *Evaluator) restStaleMessage(f *Finding, old newer, n newer) string {
	verb := "serve"
	if len(f.Endpoints) == 1 {
		verb = "serves"
	}
	return fmt.Sprintf("renewed in %s on %s (serial %s, not after %s); %s still %s the old one (serial %s), which %s: reload or restart what serves it so that it reads the renewed certificate",
		atrest.Where(n.rest.Locations, 3), stamp(n.notBefore), n.serial, stamp(n.notAfter), endpointList(f.Endpoints, 8), verb, old.serial, e.lifeState(old.notAfter))
}

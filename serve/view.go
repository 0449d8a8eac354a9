package serve

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
)

// view is what one report looks like to the metrics and the status page,
// computed once when the report is recorded. The page's rows are not
// kept with it: a row per certificate of a fleet's 100,000 was 28 MB held
// between runs for a page seldom looked at. They are kept compressed
// beside the report (heldReport.rows), and a rendering reads them back
// one at a time (Server.pickRows).
type view struct {
	generated time.Time
	// rows are the page's rows while the view is being built (nil
	// once buildView returns).
	rows []row
	// kinds and sources are the filter choices, sorted.
	kinds, sources []string

	// certRefs and endpointRefs are every certificate's and endpoint's
	// series while the view is built; certSeries and endpointSeries the
	// kept ones (at most the series limit), copied out of the report.
	certRefs        []certRef
	certSeries      []certSeries
	certDropped     int
	endpointRefs    []endpointRef
	endpointSeries  []endpointSeries
	endpointDropped int
	// certEndpointSeries are the endpoints that served a leaf, with its
	// dates and the TLS version and cipher negotiated.
	certEndpointSeries  []certEndpointSeries
	certEndpointDropped int
	// restSeries are the places certificates are held at rest.
	restSeries  []restSeries
	restDropped int
	// summary is the report's (scan.Summary): every count the page and
	// the metrics show, as `certwatch scan` gives them.
	summary scan.Summary
	// keyExchange counts the endpoints that completed a handshake by the
	// key exchange group negotiated ("" for none: RSA key transport), and
	// hybridOffered those whose probe offered the post-quantum hybrid.
	keyExchange map[string]int
	// revocation is the report's revocation coverage and CRLs (at most
	// the series limit of them).
	revocation    policy.RevocationSummary
	hybridOffered int
	// coverage is the report's (never changed once recorded); nil for a
	// report without one.
	coverage *scan.Coverage
}

// row is one line of the status page: a certificate with every finding
// about it, or a finding about no certificate (an unreachable target, a
// degraded discovery source). One is built for every certificate of the
// report (a fleet's 100,000), so what the served certificate already says
// (subject, issuer, fingerprint, expiry) is read from it, and what few
// rows have (ACM, places at rest, unverified findings) is behind one
// pointer. A row read back (rowOf) has no certificate: what it says of
// it is its own.
type row struct {
	Tier     policy.Tier
	Deadline time.Time
	// Findings point into the report's, which the server keeps with
	// the view (a copy of each would cost a finding's 144 bytes more).
	Findings  []*policy.Finding
	Kinds     []string
	Endpoints []policy.Endpoint
	Names     []string
	Sources   []string
	Renewal   string
	// cert is the served certificate of the row, in the report; nil for
	// a row of an ACM certificate or one held at rest that no endpoint
	// serves, or of a finding about no certificate.
	cert *policy.Certificate
	// more is what the row says beyond its certificate; nil for most.
	more *rowMore
	// seq is the row's place in the order rows are built (eachRow), the
	// last tie-break of their order (compareRows).
	seq int
}

// rowMore is what a row without a served certificate says of itself, and
// what only some rows have.
type rowMore struct {
	// own says subject, issuer, sha256 and notAfter are the row's rather
	// than its certificate's: a row without one, or one whose
	// certificate's text is not printable as it is.
	own             bool
	subject, issuer string
	sha256          string
	notAfter        time.Time
	acm, resources  []string
	locations       []string
	unverified      time.Time
	// expectedRenewal, firstSeen and lastChanged are the certificate's
	// (certTime) for a row read back (rowOf), which has no certificate.
	expectedRenewal, firstSeen, lastChanged time.Time
}

// own returns the row's rowMore, made when it has none.
func (rw *row) own() *rowMore {
	if rw.more == nil {
		rw.more = &rowMore{}
	}
	return rw.more
}

// identity is what the row says it is about: its certificate's, or its
// own.
func (rw *row) identity() (subject, issuer, sha256 string, notAfter time.Time) {
	if m := rw.more; m != nil && (m.own || rw.cert == nil) {
		return m.subject, m.issuer, m.sha256, m.notAfter
	}
	if c := rw.cert; c != nil {
		return c.Subject, c.Issuer, c.SHA256, c.NotAfter.Time()
	}
	return "", "", "", time.Time{}
}

// Subject is what the row is about: its certificate's subject, an ACM
// certificate's domain name, or a finding's name.
func (rw *row) Subject() string { s, _, _, _ := rw.identity(); return s }

// Issuer is the row's certificate's issuer.
func (rw *row) Issuer() string { _, s, _, _ := rw.identity(); return s }

// SHA256 is the row's certificate's fingerprint; empty for an ACM
// certificate ACM gave no PEM of, or a finding about no certificate.
func (rw *row) SHA256() string { _, _, s, _ := rw.identity(); return s }

// NotAfter is when the row's certificate expires.
func (rw *row) NotAfter() time.Time { _, _, _, t := rw.identity(); return t }

// ACM are the ACM certificates of the row (by ARN).
func (rw *row) ACM() []string { return rw.moreOf(func(m *rowMore) []string { return m.acm }) }

// Resources are the AWS resources that use the row's ACM certificates
// (InUseBy).
func (rw *row) Resources() []string {
	return rw.moreOf(func(m *rowMore) []string { return m.resources })
}

// Locations are the places the certificate is held at rest
// (atrest.Location.String), sorted.
func (rw *row) Locations() []string {
	return rw.moreOf(func(m *rowMore) []string { return m.locations })
}

// Unverified is the earliest UnverifiedSince of the row's findings: since
// then its endpoints have not answered. Zero when none is unverified.
func (rw *row) Unverified() time.Time {
	if rw.more == nil {
		return time.Time{}
	}
	return rw.more.unverified
}

func (rw *row) moreOf(of func(*rowMore) []string) []string {
	if rw.more == nil {
		return nil
	}
	return of(rw.more)
}

// certRef is a certificate's series from one source while the view is
// built. It reads the certificate's labels and dates from the report: 24
// bytes a series, where copies of them took 160 (16 MB as the view of
// 100,000 certificates was built, before the cap).
type certRef struct {
	cert   *policy.Certificate
	source string
}

// certSeries is a kept certificate series: what its gauges read of the
// certificate, copied, so that the view does not hold the report's
// certificates (the server keeps the report compressed, heldReport).
type certSeries struct {
	sha, subject, issuer, source                      string
	notBefore, notAfter, lastChanged, expectedRenewal policy.Instant
}

// restSeries is one place a certificate is held at rest.
type restSeries struct {
	sha, subject, kind, location string
	notAfter                     time.Time
}

type certEndpointSeries struct {
	name, port, address, sha string
	version, cipher, kx      string
	notBefore, notAfter      time.Time
}

// endpointRef is an endpoint's probe series while the view is built. It
// reads the endpoint (its probe's Duration too) from the report, as
// certRef does: 24 bytes an endpoint rather than 64.
type endpointRef struct {
	ep   *policy.Probed
	port string
}

// ok says the endpoint served a certificate.
func (e endpointRef) ok() bool { return e.ep.Certificate != "" }

// endpointSeries is a kept endpoint series, copied as certSeries is.
type endpointSeries struct {
	name, port, address string
	ok                  bool
	duration            time.Duration
}

// buildView derives the metric series and the page's filter choices from
// r, a report of the daemon's (its endpoints' Sources and Duration set).
func buildView(r *scan.Report, limit int) *view {
	v := &view{generated: r.GeneratedAt, revocation: r.Revocation, summary: scan.SummaryOf(r), keyExchange: map[string]int{},
		coverage: r.Coverage}
	v.addSeriesAndChoices(r)
	v.capCertSeries(limit)
	v.capEndpointSeries(limit)
	v.certEndpointSeries, v.certEndpointDropped = certEndpoints(r, limit)
	v.restSeries, v.restDropped = atRestSeries(r, limit)
	return v
}

// buildRows returns the status page's rows of r, most urgent first
// (compareRows).
func buildRows(r *scan.Report) []row {
	var rows []row
	eachRow(r, func(rw *row) { rows = append(rows, *rw) })
	slices.SortFunc(rows, func(a, b row) int { return compareRows(&a, &b) })
	return rows
}

// compareRows orders the page's rows most urgent first, as the CLI lists
// findings: by tier, then deadline, subject, fingerprint, and the order
// they were built in (eachRow).
func compareRows(a, b *row) int {
	return cmp.Or(cmp.Compare(b.Tier, a.Tier), a.Deadline.Compare(b.Deadline), strings.Compare(a.Subject(), b.Subject()),
		strings.Compare(a.SHA256(), b.SHA256()), cmp.Compare(a.seq, b.seq))
}

// addSeriesAndChoices adds the series of each certificate and endpoint
// of r, and sets the page's filter choices: every finding kind of the
// page's rows, and every source of a row or of the report, whether or not
// a row came from it (static targets that all answer, a failed source).
// It builds the few rows of certificates no endpoint serves and of
// findings about no certificate, as the page does, for their sources,
// but no row of a served certificate: the rows of a fleet's 100,000, with
// the endpoints of each, were about 35 MB of the heap as a run published
// its report, for two short lists.
func (v *view) addSeriesAndChoices(r *scan.Report) {
	_, sources := v.addEndpoints(r, true)
	reported := reportedCertificates(r)
	kinds, all := map[string]bool{}, map[string]bool{}
	v.certRefs = slices.Grow(v.certRefs, len(r.Certificates))
	for i := range r.Certificates {
		c := &r.Certificates[i]
		v.addCertSeries(c, sources[c.SHA256])
		for _, s := range sources[c.SHA256] {
			all[policy.Printable(s)] = true
		}
	}
	var loose []*policy.Finding
	for i := range r.Findings {
		f := &r.Findings[i]
		kinds[string(f.Kind)] = true // every finding is on a row
		if f.Certificate == "" || !reported[f.Certificate] {
			loose = append(loose, f)
		}
	}
	acmRows := v.addUnservedACMRows(r)
	restRows := v.addUnservedAtRestRows(r, reported)
	v.addLooseFindings(loose, acmRows, restRows, endpointSources(r, loose))
	for _, rw := range v.rows {
		for _, s := range rw.Sources {
			all[policy.Printable(s)] = true
		}
	}
	v.rows = nil
	for _, s := range r.Sources {
		all[policy.Printable(s.Name)] = true
	}
	v.kinds, v.sources = sortedKeys(kinds), sortedKeys(all)
}

// eachRow calls yield with each of the status page's rows of r, complete
// (completeRow), in the order it builds them, which compareRows breaks
// ties by: a row per certificate of r, then those of ACM certificates and
// certificates at rest that no endpoint serves, and of findings about no
// certificate. The row passed is yield's only for the call: only the few
// rows without a served certificate are held until the end, not a row
// for each of a fleet's 100,000 certificates (27 MB).
func eachRow(r *scan.Report, yield func(*row)) {
	v := &view{generated: r.GeneratedAt}
	served, sources := v.addEndpoints(r, false)
	reported := reportedCertificates(r)
	byCert, loose := findingsByCertificate(r, reported)
	seq := 0
	v.eachCertificateRow(r, byCert, served, sources, func(rw *row) {
		completeRow(rw)
		rw.seq = seq
		seq++
		yield(rw)
	})
	acmRows := v.addUnservedACMRows(r)
	restRows := v.addUnservedAtRestRows(r, reported)
	v.addLooseFindings(loose, acmRows, restRows, endpointSources(r, loose))
	for i := range v.rows {
		rw := &v.rows[i]
		completeRow(rw)
		rw.seq = seq
		seq++
		yield(rw)
	}
}

// addEndpoints returns through which sources each certificate of r is
// served, and, for the metrics (series), records each endpoint's series
// and the key exchange it negotiated, or, for the page's rows, returns
// where each certificate is served.
func (v *view) addEndpoints(r *scan.Report, series bool) (served map[string][]policy.Endpoint, sources map[string][]string) {
	// sources are sorted lists, shared (with the probes' and each other)
	// until a certificate's sources differ from what it has: a set per
	// certificate was a map of its own for each of a fleet's 100,000,
	// 25 MB as the view was built.
	served, sources = map[string][]policy.Endpoint{}, map[string][]string{}
	addSources := func(cert string, ep *policy.Probed) {
		sources[cert] = unionSorted(sources[cert], ep.Sources)
	}
	kept := keptCertificates(r)
	ports := portTexts{}
	if series {
		v.endpointRefs = slices.Grow(v.endpointRefs, len(r.Endpoints)) // one per endpoint, sized once
	}
	for i := range r.Endpoints {
		ep := &r.Endpoints[i]
		for _, c := range kept[endpointKey{ep.Name, ep.Port, ep.Address}] {
			addSources(c, ep)
		}
		if series {
			if ep.Certificate != "" {
				v.keyExchange[ep.KeyExchange.String()]++
				if ep.PostQuantum != nil {
					v.hybridOffered++
				}
			}
			v.endpointRefs = append(v.endpointRefs, endpointRef{ep: ep, port: ports.text(ep.Port)})
		}
		if ep.Certificate == "" {
			continue
		}
		// The endpoint as policy names it in findings, Via included: one
		// reached through a load balancer is listed once, not once with
		// the load balancer and once without.
		if !series {
			served[ep.Certificate] = append(served[ep.Certificate], policy.Endpoint{Name: ep.Name, Port: ep.Port, Address: ep.Address, Via: ep.Via})
		}
		addSources(ep.Certificate, ep)
	}
	return served, sources
}

// portTexts is each port number's decimal text, made once: a fleet's
// hundred thousand series share a handful of ports.
type portTexts map[int]string

func (p portTexts) text(port int) string {
	t, ok := p[port]
	if !ok {
		t = strconv.Itoa(port)
		p[port] = t
	}
	return t
}

// keptCertificates returns, by endpoint, the certificates kept with an
// unverified finding: served nowhere this run, their sources are those of
// their finding's endpoints.
func keptCertificates(r *scan.Report) map[endpointKey][]string {
	kept := map[endpointKey][]string{}
	for _, f := range r.Findings {
		if f.UnverifiedSince.IsZero() || f.Certificate == "" {
			continue
		}
		for _, e := range f.Endpoints {
			k := endpointKey{e.Name, e.Port, e.Address}
			kept[k] = append(kept[k], f.Certificate)
		}
	}
	return kept
}

// reportedCertificates returns the fingerprints of r's certificates.
func reportedCertificates(r *scan.Report) map[string]bool {
	reported := map[string]bool{}
	for _, c := range r.Certificates {
		reported[c.SHA256] = true
	}
	return reported
}

// findingsByCertificate splits r's findings into those about a reported
// certificate, by fingerprint, and the loose rest.
func findingsByCertificate(r *scan.Report, reported map[string]bool) (byCert map[string][]*policy.Finding, loose []*policy.Finding) {
	byCert = map[string][]*policy.Finding{}
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Certificate != "" && reported[f.Certificate] {
			byCert[f.Certificate] = append(byCert[f.Certificate], f)
		} else {
			loose = append(loose, f)
		}
	}
	return byCert, loose
}

// eachCertificateRow calls yield with a row for each certificate of r.
func (v *view) eachCertificateRow(r *scan.Report, byCert map[string][]*policy.Finding, served map[string][]policy.Endpoint, sources map[string][]string, yield func(*row)) {
	acmBySHA := map[string][]policy.ACMCertificate{}
	for _, a := range r.ACM {
		if a.SHA256 != "" {
			acmBySHA[a.SHA256] = append(acmBySHA[a.SHA256], a)
		}
	}
	restBySHA := map[string]*policy.AtRestCertificate{}
	for i := range r.AtRest {
		restBySHA[r.AtRest[i].SHA256] = &r.AtRest[i]
	}
	for i := range r.Certificates {
		c := &r.Certificates[i]
		fs := byCert[c.SHA256]
		rw := row{cert: c,
			Tier: policy.None, Deadline: c.NotAfter.Time(), Findings: fs, Endpoints: served[c.SHA256],
			Sources: sources[c.SHA256],
		}
		for _, f := range fs {
			rw.Tier = max(rw.Tier, f.Tier)
			if f.Deadline.Before(rw.Deadline) {
				rw.Deadline = f.Deadline.Time()
			}
			rw.Endpoints = appendNew(rw.Endpoints, f.Endpoints)
		}
		if a := restBySHA[c.SHA256]; a != nil {
			rw.own().locations = locationStrings(a.Locations)
		}
		rw.Renewal = renewal(*c, fs, r)
		for _, a := range acmBySHA[c.SHA256] {
			m := rw.own()
			m.acm = append(m.acm, a.ARN)
			m.resources = append(m.resources, a.InUseBy...)
			if !slices.ContainsFunc(fs, aboutRenewal) {
				rw.Renewal = acmRenewal(a)
			}
		}
		yield(&rw)
	}
}

// appendNew appends to eps those of more it does not hold yet, when it
// holds few: most certificates are served on one endpoint, which each of
// their findings names again, and appending it made the row's list anew
// at twice the size (112 bytes kept for each such row). A long list takes
// them all; completeRow sorts and compacts it.
func appendNew(eps, more []policy.Endpoint) []policy.Endpoint {
	if len(eps) > 8 {
		return append(eps, more...)
	}
	for _, ep := range more {
		if !slices.Contains(eps, ep) {
			eps = append(eps, ep)
		}
	}
	return eps
}

// addCertSeries adds c's series, one per source it came from ("unknown"
// when none).
func (v *view) addCertSeries(c *policy.Certificate, sources []string) {
	if len(sources) == 0 {
		sources = []string{"unknown"}
	}
	for _, s := range sources {
		v.certRefs = append(v.certRefs, certRef{cert: c, source: s})
	}
}

// addUnservedACMRows adds a row for each ACM certificate no endpoint
// serves and returns the row of each by ARN.
func (v *view) addUnservedACMRows(r *scan.Report) map[string]int {
	rows := map[string]int{}
	for _, a := range r.ACM {
		if a.SHA256 != "" {
			continue
		}
		rows[a.ARN] = len(v.rows)
		v.rows = append(v.rows, row{
			Tier: policy.None, Deadline: cmp.Or(a.NotAfter, r.GeneratedAt), Renewal: acmRenewal(a),
			Sources: acmSource(r.Sources, a.Account),
			more:    &rowMore{own: true, subject: a.DomainName, issuer: a.Issuer, notAfter: a.NotAfter, acm: []string{a.ARN}, resources: a.InUseBy},
		})
	}
	return rows
}

// addUnservedAtRestRows adds a row for each certificate at rest that is
// not a reported certificate and returns the row of each by fingerprint.
func (v *view) addUnservedAtRestRows(r *scan.Report, reported map[string]bool) map[string]int {
	rows := map[string]int{}
	for i := range r.AtRest {
		a := &r.AtRest[i]
		if reported[a.SHA256] {
			continue
		}
		rows[a.SHA256] = len(v.rows)
		v.rows = append(v.rows, row{
			Tier: policy.None, Deadline: a.NotAfter,
			more: &rowMore{own: true, subject: a.Subject, issuer: a.Issuer, sha256: a.SHA256, notAfter: a.NotAfter, locations: locationStrings(a.Locations)},
		})
	}
	return rows
}

// addLooseFindings puts each finding about no reported certificate on the
// row of its ACM certificate (by ARN) or certificate at rest, else on a row
// of its own.
func (v *view) addLooseFindings(loose []*policy.Finding, acmRows, restRows map[string]int, sources map[endpointKey][]string) {
	for _, f := range loose {
		i, ok := acmRows[f.Name]
		if !ok && f.Certificate != "" {
			i, ok = restRows[f.Certificate]
		}
		if ok {
			rw := &v.rows[i]
			rw.Findings = append(rw.Findings, f)
			if rw.Renewal == "" && aboutRenewal(f) {
				rw.Renewal = strings.ReplaceAll(string(f.Kind), "_", " ")
			}
			rw.Tier = max(rw.Tier, f.Tier)
			if f.Deadline.Before(rw.Deadline) {
				rw.Deadline = f.Deadline.Time()
			}
			continue
		}
		v.rows = append(v.rows, row{
			Tier: f.Tier, Deadline: f.Deadline.Time(),
			// The row's own list: completeRow sorts it.
			Findings: []*policy.Finding{f}, Endpoints: slices.Clone(f.Endpoints), Sources: sourcesOfFinding(*f, sources),
			more: &rowMore{own: true, subject: cmp.Or(f.Name, f.Subject, string(f.Kind))},
		})
	}
}

// completeRow derives what the page shows of a row from its findings and
// endpoints: printable text, since when it is unverified, its endpoints
// sorted once each, its names and its finding kinds.
func completeRow(rw *row) {
	printableRow(rw)
	for _, f := range rw.Findings {
		if u := f.UnverifiedSince; !u.IsZero() && (rw.Unverified().IsZero() || u.Before(rw.Unverified())) {
			rw.own().unverified = u.Time()
		}
	}
	slices.SortFunc(rw.Endpoints, func(a, b policy.Endpoint) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), strings.Compare(a.Address, b.Address))
	})
	rw.Endpoints = slices.Compact(rw.Endpoints)
	names := map[string]bool{}
	for _, ep := range rw.Endpoints {
		names[ep.Name] = true
	}
	rw.Names = sortedKeys(names)
	kinds := map[string]bool{}
	for _, f := range rw.Findings {
		kinds[string(f.Kind)] = true
	}
	rw.Kinds = sortedKeys(kinds)
}

// ExpectedRenewal, FirstSeen and LastChanged are the served
// certificate's (policy.Certificate): when it is normally renewed, when
// certwatch first saw it for its names, and when it was seen replacing an
// earlier one; zero when unknown.
func (rw *row) ExpectedRenewal() time.Time {
	return rw.certTime(func(c *policy.Certificate) time.Time { return c.ExpectedRenewal.Time() },
		func(m *rowMore) time.Time { return m.expectedRenewal })
}

// FirstSeen: see ExpectedRenewal.
func (rw *row) FirstSeen() time.Time {
	return rw.certTime(func(c *policy.Certificate) time.Time { return c.History().FirstSeen },
		func(m *rowMore) time.Time { return m.firstSeen })
}

// LastChanged: see ExpectedRenewal.
func (rw *row) LastChanged() time.Time {
	return rw.certTime(func(c *policy.Certificate) time.Time { return c.History().LastChanged },
		func(m *rowMore) time.Time { return m.lastChanged })
}

// certTime is of the row's certificate; for a row read back (rowOf),
// which has none, kept of what it kept of it.
func (rw *row) certTime(of func(*policy.Certificate) time.Time, kept func(*rowMore) time.Time) time.Time {
	switch {
	case rw.cert != nil:
		return of(rw.cert)
	case rw.more != nil:
		return kept(rw.more)
	}
	return time.Time{}
}

// searchText is what the page's search matches a row on, lower-case:
// built when a search or the page asks for it, not kept with every row
// (about 120 bytes a row, 12 MB at 100,000 certificates).
func (rw *row) searchText() string {
	parts := []string{rw.Subject(), rw.Issuer(), rw.SHA256()}
	parts = append(parts, rw.Names...)
	for _, ep := range rw.Endpoints {
		parts = append(parts, ep.Address)
	}
	for _, f := range rw.Findings {
		parts = append(parts, f.Name)
	}
	parts = append(parts, rw.ACM()...)
	parts = append(parts, rw.Resources()...)
	parts = append(parts, rw.Locations()...)
	return strings.ToLower(strings.Join(parts, " "))
}

// capCertSeries keeps the limit most urgent certificate series (soonest
// expiry first, so the cap drops the least interesting) as copies, and
// lets go of the rest.
func (v *view) capCertSeries(limit int) {
	slices.SortStableFunc(v.certRefs, func(a, b certRef) int {
		return cmp.Or(cmp.Compare(a.cert.NotAfter, b.cert.NotAfter), strings.Compare(a.cert.SHA256, b.cert.SHA256), strings.Compare(a.source, b.source))
	})
	kept := v.certRefs[:min(len(v.certRefs), limit)]
	v.certDropped = len(v.certRefs) - len(kept)
	v.certSeries = make([]certSeries, len(kept))
	for i, cr := range kept {
		c := cr.cert
		// The source as the page shows it (printableRow), escaped.
		v.certSeries[i] = certSeries{sha: c.SHA256, subject: c.Subject, issuer: c.Issuer, source: policy.Printable(cr.source),
			notBefore: c.NotBefore, notAfter: c.NotAfter, lastChanged: policy.At(c.History().LastChanged), expectedRenewal: c.ExpectedRenewal}
	}
	v.certRefs = nil
}

// capEndpointSeries keeps limit endpoint series (failing endpoints first,
// so the cap drops the least interesting) as copies, and lets go of the
// rest.
func (v *view) capEndpointSeries(limit int) {
	slices.SortStableFunc(v.endpointRefs, func(a, b endpointRef) int {
		if a.ok() != b.ok() {
			if !a.ok() {
				return -1
			}
			return 1
		}
		return cmp.Or(strings.Compare(a.ep.Name, b.ep.Name), strings.Compare(a.port, b.port), strings.Compare(a.ep.Address, b.ep.Address))
	})
	kept := v.endpointRefs[:min(len(v.endpointRefs), limit)]
	v.endpointDropped = len(v.endpointRefs) - len(kept)
	v.endpointSeries = make([]endpointSeries, len(kept))
	for i, e := range kept {
		v.endpointSeries[i] = endpointSeries{name: e.ep.Name, port: e.port, address: e.ep.Address, ok: e.ok(), duration: e.ep.Duration}
	}
	v.endpointRefs = nil
}

// atRestSeries returns one series per place a certificate of r is held at
// rest, in the report's order (soonest expiry first), at most limit of
// them, and how many more were left out.
func atRestSeries(r *scan.Report, limit int) (out []restSeries, dropped int) {
	for i := range r.AtRest {
		a := &r.AtRest[i]
		for _, l := range a.Locations {
			if len(out) == limit {
				dropped++
				continue
			}
			out = append(out, restSeries{sha: a.SHA256, subject: a.Subject, kind: string(l.Kind), location: l.String(), notAfter: a.NotAfter})
		}
	}
	return out, dropped
}

// locationStrings names each location for the page.
func locationStrings(locs []atrest.Location) []string {
	out := make([]string, len(locs))
	for i, l := range locs {
		out[i] = l.String()
	}
	return out
}

// printableRow escapes control and format characters (policy.Printable) in
// everything the row shows: a certificate's subject, a name from DNS or a
// finding kept from an earlier report must not reorder or hide what a
// person reads. A finding, and the endpoints, are copied when one changes,
// since they belong to the report.
func printableRow(rw *row) {
	// A served certificate's subject and issuer are policy's, printable
	// already; a report read from elsewhere may say otherwise, and then
	// the row keeps printable copies of its own.
	if subject, issuer, sha, notAfter := rw.identity(); policy.Printable(subject) != subject || policy.Printable(issuer) != issuer {
		m := rw.own()
		m.own, m.subject, m.issuer, m.sha256, m.notAfter = true, policy.Printable(subject), policy.Printable(issuer), sha, notAfter
	}
	rw.Renewal = policy.Printable(rw.Renewal)
	// The lists may be the report's, or the inventory's (sources): a
	// printable copy replaces one that needs escaping, and none is written
	// in place, as a rendering builds rows while the daemon reads them.
	rw.Sources = printableList(rw.Sources)
	if m := rw.more; m != nil {
		m.acm, m.resources, m.locations = printableList(m.acm), printableList(m.resources), printableList(m.locations)
	}
	for i, rf := range rw.Findings {
		if policy.Printable(rf.Message) == rf.Message && policy.Printable(rf.Name) == rf.Name && policy.Printable(rf.Subject) == rf.Subject && rf.Silenced == nil {
			continue
		}
		// The row's list is its own; the finding is the report's.
		f := new(*rf)
		rw.Findings[i] = f
		f.Message, f.Name, f.Subject = policy.Printable(f.Message), policy.Printable(f.Name), policy.Printable(f.Subject)
		if si := f.Silenced; si != nil {
			// Who and why were typed by people: no escape reaches the page.
			f.Silenced = &policy.Silenced{ID: si.ID, Author: policy.Printable(si.Author), Reason: policy.Printable(si.Reason), Until: si.Until, UpTo: si.UpTo}
		}
	}
	if slices.ContainsFunc(rw.Endpoints, func(ep policy.Endpoint) bool { return policy.Printable(ep.Name) != ep.Name }) {
		rw.Endpoints = slices.Clone(rw.Endpoints)
		for i := range rw.Endpoints {
			rw.Endpoints[i].Name = policy.Printable(rw.Endpoints[i].Name)
		}
	}
}

// printableList returns l when all of it is printable (policy.Printable),
// else a printable copy of it.
func printableList(l []string) []string {
	for i, s := range l {
		if policy.Printable(s) != s {
			out := slices.Clone(l)
			for j := i; j < len(out); j++ {
				out[j] = policy.Printable(out[j])
			}
			return out
		}
	}
	return l
}

// certEndpoints returns the per-endpoint certificate series of r: every
// endpoint that served a leaf, soonest expiry first, at most limit of them,
// and how many more were left out. The endpoints are ordered by index and
// only the kept ones made into series (at 100,000 endpoints and the
// default limit, 10,000 series of 160 bytes, not 100,000 grown step by
// step: 51 MB in use as the view was built).
func certEndpoints(r *scan.Report, limit int) ([]certEndpointSeries, int) {
	certs := make(map[string]*policy.Certificate, len(r.Certificates))
	for i := range r.Certificates {
		certs[r.Certificates[i].SHA256] = &r.Certificates[i]
	}
	type served struct {
		notAfter time.Time
		ep       int32
		cert     *policy.Certificate
	}
	var all []served
	for i := range r.Endpoints {
		if c := certs[r.Endpoints[i].Certificate]; c != nil {
			if all == nil {
				all = make([]served, 0, len(r.Endpoints)-i)
			}
			all = append(all, served{notAfter: c.NotAfter.Time(), ep: int32(i), cert: c})
		}
	}
	ports := portTexts{}
	slices.SortStableFunc(all, func(a, b served) int {
		ea, eb := &r.Endpoints[a.ep], &r.Endpoints[b.ep]
		return cmp.Or(a.notAfter.Compare(b.notAfter), strings.Compare(ea.Name, eb.Name),
			strings.Compare(ports.text(ea.Port), ports.text(eb.Port)), strings.Compare(ea.Address, eb.Address))
	})
	dropped := max(len(all)-limit, 0)
	if dropped > 0 {
		all = all[:limit]
	}
	if len(all) == 0 {
		return nil, dropped
	}
	out := make([]certEndpointSeries, 0, len(all))
	for _, s := range all {
		ep := &r.Endpoints[s.ep]
		out = append(out, certEndpointSeries{
			name: ep.Name, port: ports.text(ep.Port), address: ep.Address, sha: ep.Certificate,
			version: ep.TLSVersion.String(), cipher: ep.CipherSuite.String(), kx: ep.KeyExchange.String(),
			notBefore: s.cert.NotBefore.Time(), notAfter: s.cert.NotAfter.Time(),
		})
	}
	return out, dropped
}

// endpointSources returns the sources of each endpoint of r that one of
// findings names (Probed.Sources; of all its probes, when one address was
// reached through several resources).
func endpointSources(r *scan.Report, findings []*policy.Finding) map[endpointKey][]string {
	named := map[endpointKey][]string{}
	for _, f := range findings {
		for _, ep := range f.Endpoints {
			named[endpointKey{ep.Name, ep.Port, ep.Address}] = nil
		}
	}
	if len(named) == 0 {
		return named
	}
	for i := range r.Endpoints {
		ep := &r.Endpoints[i]
		k := endpointKey{ep.Name, ep.Port, ep.Address}
		if l, ok := named[k]; ok {
			named[k] = unionSorted(l, ep.Sources)
		}
	}
	return named
}

// sourcesOfFinding returns the sources of a finding about no certificate:
// the source itself for a degraded source, else the sources that led to
// its endpoints (by endpoint, endpointSources); an unreachable target was
// listed by hand (static).
func sourcesOfFinding(f policy.Finding, sources map[endpointKey][]string) []string {
	if f.Kind == policy.DiscoveryDegraded && f.Name != "" {
		return []string{f.Name}
	}
	set := map[string]bool{}
	for _, ep := range f.Endpoints {
		for _, s := range sources[endpointKey{ep.Name, ep.Port, ep.Address}] {
			set[s] = true
		}
	}
	if len(set) == 0 && f.Kind == policy.Unreachable {
		set["static"] = true
	}
	return sortedKeys(set)
}

// renewal says, for the status page, whether the certificate has been
// renewed, as policy judged it: renewed and still served here
// (Certificate.RenewedBy); else a finding about its renewal; else what the
// deadline implies.
func renewal(c policy.Certificate, fs []*policy.Finding, r *scan.Report) string {
	if c.RenewedBy != nil && len(c.RenewedBy.Locations) > 0 {
		return "renewed in " + atrest.Where(c.RenewedBy.Locations, 1) + ", but not deployed on these endpoints"
	}
	if c.RenewedBy != nil {
		return "renewed, but not deployed on these endpoints"
	}
	for _, f := range fs {
		if aboutRenewal(f) {
			return strings.ReplaceAll(string(f.Kind), "_", " ")
		}
	}
	return renewalByDeadline(c, fs, r)
}

// aboutRenewal reports whether f says its certificate's renewal is late or
// failed (policy.KindInfo.Renewal).
func aboutRenewal(f *policy.Finding) bool {
	k, _ := f.Kind.Info()
	return k.Renewal
}

// renewalByDeadline is renewal's answer when no newer certificate is
// served: what the deadline implies.
func renewalByDeadline(c policy.Certificate, fs []*policy.Finding, r *scan.Report) string {
	switch {
	case !c.NotAfter.After(r.GeneratedAt):
		return "not renewed: expired"
	case slices.ContainsFunc(fs, func(f *policy.Finding) bool { return f.Kind == policy.Expiring }):
		return "due: not renewed yet"
	}
	return ""
}

// acmRenewal describes an ACM certificate's renewal for the status page.
func acmRenewal(a policy.ACMCertificate) string {
	s := "ACM: " + string(a.Renewal)
	if !a.RenewBy.IsZero() {
		s += ", renew by " + a.RenewBy.UTC().Format(time.DateOnly)
	}
	if a.RenewalStatus != "" {
		s += " (" + strings.ToLower(strings.ReplaceAll(string(a.RenewalStatus), "_", " ")) + ")"
	}
	return s
}

// acmSource names the discovery source of an ACM certificate: "acm:<account>"
// when that source exists, else "acm".
func acmSource(sources []scan.SourceResult, account string) []string {
	for _, s := range sources {
		if account != "" && s.Name == "acm:"+account {
			return []string{s.Name}
		}
	}
	return []string{"acm"}
}

// unionSorted returns the sorted union of a, sorted without duplicates
// (or nil), and b, in any order: a itself when it holds all of b (b
// itself when a is nil and b is sorted), else a new list. Neither is
// modified.
func unionSorted(a, b []string) []string {
	if a == nil && strictlySorted(b) {
		return b
	}
	missing := false
	for _, s := range b {
		if _, ok := slices.BinarySearch(a, s); !ok {
			missing = true
			break
		}
	}
	if !missing {
		return a
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// strictlySorted says whether l is sorted without duplicates.
func strictlySorted(l []string) bool {
	for i := 1; i < len(l); i++ {
		if l[i-1] >= l[i] {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

package policy

import (
	"cmp"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"iter"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/probes"
)

// Result is what Evaluate concludes from one scan's observations.
type Result struct {
	// Endpoints are every probed endpoint, by name, port and address.
	Endpoints []Probed
	// Findings, most urgent first (tier, then deadline).
	Findings []Finding
	// Certificates are the leaf certificates seen, by deadline.
	Certificates []Certificate
	// ACM are the certificates given to AddACM with their renewal state,
	// by NotAfter.
	ACM []ACMCertificate
	// IAM are the server certificates given to AddIAM, by NotAfter.
	IAM []IAMCertificate
	// Gaps are the coverage gaps, by reason and zone (see CoverageGap).
	Gaps []Gap
	// AtRest are the certificates given to AddAtRest, one per
	// fingerprint with every location, by NotAfter.
	AtRest []AtRestCertificate
	// Revocation says how the leaves' revocation was checked, and the
	// freshness of the CRLs relied on.
	Revocation RevocationSummary
	// Sources are the endpoints observed and leaves served per source
	// named by the observations, by name.
	Sources []SourceCoverage
}

// Evaluator accumulates observations one at a time and reduces them as they
// arrive, so a scan need not keep every observation (or chain) until the end.
// It keeps no *x509.Certificate: per endpoint it holds one Probed (what the
// report lists), per certificate its description, and per finding the
// finding. It is not safe for concurrent use; the zero value is not
// usable, see NewEvaluator.
type Evaluator struct {
	rules Rules
	now   time.Time
	// findings are the findings so far, in blocks that never move (a
	// fleet's tens of thousands are not copied at each growth), each with
	// only the fields evaluation sets (Result makes them Findings);
	// findingIdx finds one by kind and subject.
	findings   blocks[finding]
	findingIdx findingIndex
	// certs describes each leaf seen; certIdx finds one by fingerprint
	// (lower-case hex SHA-256, Certificate.SHA256). Result hands certs out
	// as they are, sorted: no copy.
	certs   []Certificate
	certIdx fpIndex
	// certMatched says, by the index of certs, whether the leaf was
	// served on a name it is valid for (or where names are not checked):
	// the names of a leaf served only where it does not belong tell
	// nothing of the estate (uncoveredNames).
	certMatched []bool
	// probed lists every endpoint observed, with its leaf's fingerprint
	// or its failure: the report's list, and the evaluation's view of
	// who serves what. Result sorts it by name, port and address
	// (inconsistent deployments; see also servedIndex) and hands it out.
	probed []Probed
	// issuers interns issuer names, which thousands of leaves share.
	issuers map[string]string
	// inv is the cloud inventory (AddACM, SetZones), judged in Result.
	inv inventory
	// rest are the certificates held at rest (AddAtRest) merged by
	// fingerprint, by NotAfter; restIdx finds one by fingerprint. Built
	// in Result.
	rest    []atrest.Certificate
	restIdx map[string]int
	// sources counts, per source name, the endpoints observed and the
	// distinct leaves they served (SourceCoverage).
	sources map[string]*sourceCount
	// zonesOf are the zones of names on certificates that no source
	// watches, as a lookup found them (SetZonesOf).
	zonesOf map[string]string
	// stalls are the addresses that stalled after connecting, with the
	// names the sweep gave up on there, judged in Result (tls_broken).
	stalls stalls
	// revocation tallies how each leaf's revocation was checked.
	revocation revocationTally
	// distrust indexes rules.Distrust, made at the first verified path.
	distrust *distrusts
	// history is what the state remembers of each certificate name,
	// sorted by name (SetHistory, historyFor); hasHistory says it was
	// given.
	history    []NameHistory
	hasHistory bool
	// ct is what Certificate Transparency shows (AddCT), judged in Result.
	ct ctInventory
}

// finding is a Finding while evaluating: the fields Add sets, without the
// references to ACM, IAM, at rest and CT and the later states a Finding
// has, empty until Result.
type finding struct {
	kind     Kind
	tier     Tier
	cert     string
	name     string
	deadline Instant
	// probed are its endpoints while Add judges: indices in e.probed, as
	// Add met them. One takes 4 bytes where an Endpoint takes 56, 2.4 MB
	// of a scan of 100,000 endpoints with 42,000 findings, at the end of
	// its probing, when its heap is largest. Result turns them into
	// endpoints before it sorts e.probed.
	probed    []int32
	endpoints []Endpoint
	message   string
}

// findingKey identifies a finding while evaluating: its kind and the
// fingerprint or "name:port" it is about.
type findingKey struct {
	kind Kind
	key  string
}

// is says whether f is the finding of kind about key (add).
func (f *finding) is(kind Kind, key string) bool {
	return f.kind == kind && (f.name == key || f.name == "" && f.cert == key)
}

// findingIndex finds an evaluating finding by its findingKey. It is keyed
// by a 64-bit hash of the key: a slot takes 16 bytes where one keyed by
// the two strings takes 40, about 1.5 MB at 40,000 findings, at the end of
// probing, when a scan's heap is largest. The finding a hash leads to is
// checked against the key; a finding whose hash leads to another (which
// practically never happens) is found by its key in a map of its own.
type findingIndex struct {
	seed   maphash.Seed
	byHash map[uint64]int32
	other  map[findingKey]int32
}

func newFindingIndex() findingIndex {
	return findingIndex{seed: maphash.MakeSeed(), byHash: make(map[uint64]int32)}
}

func (x *findingIndex) hash(kind Kind, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(x.seed)
	h.WriteString(string(kind))
	h.WriteByte(0)
	h.WriteString(key)
	return h.Sum64()
}

// find returns the index in fs of the finding of kind about key, whose
// hash is h.
func (x *findingIndex) find(fs *blocks[finding], h uint64, kind Kind, key string) (int32, bool) {
	if i, ok := x.byHash[h]; ok && fs.at(i).is(kind, key) {
		return i, true
	}
	i, ok := x.other[findingKey{kind, key}]
	return i, ok
}

// insert records that the finding of kind about key, whose hash is h, is
// at index i.
func (x *findingIndex) insert(h uint64, kind Kind, key string, i int32) {
	if _, taken := x.byHash[h]; !taken {
		x.byHash[h] = i
		return
	}
	if x.other == nil {
		x.other = make(map[findingKey]int32)
	}
	x.other[findingKey{kind, key}] = i
}

// NewEvaluator returns an Evaluator judging at time now.
func NewEvaluator(rules Rules, now time.Time) *Evaluator {
	e := &Evaluator{
		rules:      rules,
		now:        now,
		findingIdx: newFindingIndex(),
		issuers:    make(map[string]string),
	}
	return e
}

// Evaluate judges a whole set of observations at time now.
func Evaluate(obs []probes.Observation, rules Rules, now time.Time) Result {
	e := NewEvaluator(rules, now)
	for i := range obs {
		e.Add(&obs[i])
	}
	return e.Result()
}

// lookup returns c's fingerprint and the index of its description in
// e.certs, if c was seen. A certificate that the name history records
// for name, the name it was served for (as most are, from one run to
// the next), takes the history's fingerprint rather than a copy: at
// 100,000 names, 6.4 MB less as a run judges, with the history held.
func (e *Evaluator) lookup(c *x509.Certificate, name string) (string, int32, bool) {
	sum := sha256.Sum256(c.Raw)
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], sum[:])
	if i, ok := e.certIdx.findBytes(e.certs, buf[:]); ok {
		return e.certs[i].SHA256, i, true
	}
	if h := e.historyFor(discovery.NormalizeName(name)); h != nil && h.SHA256 == string(buf[:]) {
		return h.SHA256, -1, false
	}
	return string(buf[:]), -1, false
}

// add records a finding (kind, key) of the endpoint Add is judging, the
// last of e.probed, or adds that endpoint to it; msg words it the first
// time.
func (e *Evaluator) add(kind Kind, tier Tier, key, cert string, deadline time.Time, msg func() string) {
	e.addAt(kind, tier, key, cert, deadline, int32(len(e.probed)-1), msg)
}

// addAt is add for the endpoint e.probed[p].
func (e *Evaluator) addAt(kind Kind, tier Tier, key, cert string, deadline time.Time, p int32, msg func() string) {
	if tier == None {
		return
	}
	h := e.findingIdx.hash(kind, key)
	i, ok := e.findingIdx.find(&e.findings, h, kind, key)
	if !ok {
		// Messages quote certificate fields and server errors: Printable.
		f := finding{kind: kind, tier: tier, cert: cert, deadline: At(deadline), message: Printable(msg())}
		if cert == "" || kind == InconsistentDeployment {
			f.name = key
		}
		i = int32(e.findings.len())
		e.findingIdx.insert(h, kind, key, i)
		e.findings.append(f)
	}
	f := e.findings.at(i)
	f.probed = append(f.probed, p)
}

// placeEndpoints gives each finding the endpoints its indices in e.probed
// name (add), before e.probed is sorted.
func (e *Evaluator) placeEndpoints() {
	for _, b := range e.findings.b {
		for j := range b {
			f := &b[j]
			f.endpoints = make([]Endpoint, len(f.probed))
			for k, p := range f.probed {
				f.endpoints[k] = e.probed[p].endpoint()
			}
			f.probed = nil
		}
	}
}

// Add folds one observation into the result: the endpoint joins Result's
// Endpoints, and its certificate is judged.
func (e *Evaluator) Add(o *probes.Observation) {
	ep := Endpoint{Name: o.Name, Port: o.Port, Via: o.Via}
	if o.Address.IsValid() {
		ep.Address = o.Address.String()
	}
	leaf := o.Leaf()
	if leaf == nil {
		e.countSources(o.Sources, -1)
		e.probed = append(e.probed, Probed{Name: ep.Name, Port: ep.Port, Address: ep.Address, Via: ep.Via, Protocol: o.Protocol,
			Sources: o.Sources, Duration: o.Duration, Failed: &Failed{Error: o.Error, Failure: string(o.Failure)}})
		e.noteCTOnly(o.Sources)
		switch {
		case o.Failure == probes.FailNotProbed:
			// A cut-short sweep did not reach the endpoint (or gave up on
			// it mid-probe): that says nothing about the target, neither
			// unreachable nor broken.
		case o.Failure == probes.FailAddressSkipped:
			// Discovery aimed the probe at certwatch's own host or its
			// link: named, never dialled, never notified.
			nameKey := net.JoinHostPort(o.Name, strconv.Itoa(o.Port))
			e.add(AddressSkipped, Info, nameKey, "", e.now, func() string {
				return fmt.Sprintf("%s was not probed at an address discovery named (%s); if the record is wrong, fix it; a lab on loopback sets probe.allow_loopback", nameKey, o.Error)
			})
		case o.Explicit:
			nameKey := net.JoinHostPort(o.Name, strconv.Itoa(o.Port))
			e.add(Unreachable, e.rules.Unreachable, nameKey, "", e.now, func() string {
				return fmt.Sprintf("%s could not be probed (%s: %s); check that it is up and reachable from certwatch, or remove it from targets", nameKey, o.Failure, o.Error)
			})
		default:
			e.judgeTLSBroken(o)
		}
		return
	}
	fp, ci, seen := e.lookup(leaf, o.Name)
	if !seen {
		ci = int32(len(e.certs))
		e.certs = append(e.certs, e.describe(leaf, fp, o.Name))
		e.certIdx.insert(e.certs, ci)
		e.certMatched = append(e.certMatched, false)
	}
	e.revocation.add(o, !seen, e.now)
	if o.NameMatch || isIPLiteral(o.Name) || awsResourceName(o.Sources) {
		e.certMatched[ci] = true
	}
	e.countSources(o.Sources, ci)
	// A handshake that completed has no error to report.
	e.probed = append(e.probed, Probed{Name: ep.Name, Port: ep.Port, Address: ep.Address, Via: ep.Via, Protocol: o.Protocol, Certificate: fp,
		TLSVersion: o.TLSVersion, CipherSuite: o.CipherSuite, KeyExchange: o.KeyExchange, PostQuantum: postQuantum(o), Renewal: o.Renewal,
		Sources: o.Sources, Duration: o.Duration})
	e.noteCTOnly(o.Sources)

	switch o.Trust {
	case probes.TrustSelfSigned:
		e.add(SelfSigned, e.rules.Broken, fp, fp, e.now, func() string {
			return fmt.Sprintf("self-signed certificate %q is not trusted by clients; issue it from a trusted CA, or add it to ca_files if it is deliberately pinned", atrest.SubjectName(leaf))
		})
	case probes.TrustUnknownAuthority, probes.TrustInvalid:
		e.add(ChainUntrusted, e.rules.Broken, fp, fp, e.now, func() string {
			return fmt.Sprintf("chain of %q does not verify: %s; serve the full chain (leaf and intermediates) and check clients trust its root (ca_files for a private CA)", atrest.SubjectName(leaf), o.TrustError)
		})
	}
	// A target given as an IP address has no name to match: the operator
	// asked about the certificate, not about a name.
	// Nor does an AWS load balancer probed under its own DNS name, which
	// serves its default certificate, made for the names pointing at it,
	// nor one asked for a certificate's name at its own address (Via),
	// which no client reaches unless that name's DNS leads there: whether
	// it served the certificate attached for the name is the listener's
	// verdict (judgeUnverified).
	if !o.NameMatch && !isIPLiteral(o.Name) && !awsResourceName(o.Sources) && o.Via == "" {
		e.add(HostnameMismatch, e.rules.Broken, fp, fp, e.now, func() string {
			return fmt.Sprintf("certificate %q is valid for %s, not for %s; reissue it with %s among its names or point the record elsewhere", atrest.SubjectName(leaf), namesOf(leaf), o.Name, o.Name)
		})
	}
	e.judgeExpiry(o, leaf, fp)
	e.judgeCrypto(o, leaf, fp)
	e.judgeDistrust(o, leaf, fp)
	e.judgeRenewalWindow(o, leaf, fp)
	e.judgeRevocation(o, fp)
}

// judgeExpiry rates expiry along the verified path that lives longest, so an
// extra expired cross-sign the server sends alongside a valid path is at most
// a notice. Without a verified path only the leaf is judged.
func (e *Evaluator) judgeExpiry(o *probes.Observation, leaf *x509.Certificate, fp string) {
	path := []*x509.Certificate{leaf}
	if len(o.Paths) > 0 {
		path = bestPath(o.Paths)
	}
	worst := path[0]
	for _, c := range path[1:] {
		if c.NotAfter.Before(worst.NotAfter) {
			worst = c
		}
	}
	for _, c := range path {
		if e.now.Before(c.NotBefore) {
			e.add(ChainUntrusted, e.rules.Broken, fp, fp, e.now, func() string {
				return fmt.Sprintf("%s %q is not valid before %s; clients reject it until then (premature deployment or clock skew)", role(c, leaf), atrest.SubjectName(c), c.NotBefore.UTC().Format(time.RFC3339))
			})
			break
		}
	}
	tier := TierFor(worst.NotBefore, worst.NotAfter, e.rules.Tiers, e.now)
	switch {
	case !worst.NotAfter.After(e.now):
		e.add(Expired, Critical, fp, fp, worst.NotAfter, func() string {
			return fmt.Sprintf("%s %q expired %s ago (%s); clients reject this chain now: %s", role(worst, leaf), atrest.SubjectName(worst), humanBetween(worst.NotAfter, e.now), worst.NotAfter.UTC().Format(time.RFC3339), renewAdvice(worst, leaf))
		})
	case tier >= Notice:
		e.add(Expiring, tier, fp, fp, worst.NotAfter, func() string {
			return fmt.Sprintf("%s %q expires in %s (%s): %s", role(worst, leaf), atrest.SubjectName(worst), humanBetween(e.now, worst.NotAfter), worst.NotAfter.UTC().Format(time.RFC3339), renewAdvice(worst, leaf))
		})
	}
	if len(o.Paths) == 0 {
		return
	}
	for _, c := range o.Chain[1:] {
		if onAnyPath(c, o.Paths) {
			continue
		}
		tier := Info
		if !c.NotAfter.After(e.now) {
			tier = Notice
		} else if TierFor(c.NotBefore, c.NotAfter, e.rules.Tiers, e.now) < Notice {
			continue
		}
		e.add(BundleExpired, tier, fp, fp, c.NotAfter, func() string {
			return fmt.Sprintf("the server also sends %q issued by %q (not after %s), which no verified path needs; clients are fine, but drop it from the bundle to avoid confusing older clients and other tools", atrest.SubjectName(c), atrest.IssuerName(c), c.NotAfter.UTC().Format(time.RFC3339))
		})
		break
	}
}

func bestPath(paths [][]*x509.Certificate) []*x509.Certificate {
	var best []*x509.Certificate
	var bestEnd time.Time
	for _, p := range paths {
		end := p[0].NotAfter
		for _, c := range p[1:] {
			if c.NotAfter.Before(end) {
				end = c.NotAfter
			}
		}
		if best == nil || end.After(bestEnd) {
			best, bestEnd = p, end
		}
	}
	return best
}

func onAnyPath(c *x509.Certificate, paths [][]*x509.Certificate) bool {
	for _, p := range paths {
		for _, pc := range p {
			if pc == c || pc.Equal(c) {
				return true
			}
		}
	}
	return false
}

// Result returns the endpoints, the findings (inconsistent deployments
// added) and the certificates. It ends the evaluation: call it once, after
// the last Add.
func (e *Evaluator) Result() Result {
	e.judgeGivenUp()
	e.placeEndpoints()
	slices.SortFunc(e.probed, func(a, b Probed) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), strings.Compare(a.Address, b.Address), strings.Compare(a.Via, b.Via))
	})
	if e.rules.Inconsistent != None {
		for _, run := range e.nameRuns() {
			e.inconsistent(run)
		}
	}
	// Room for the renewal_missed findings judgeCadence adds: growing
	// the list there copied every finding while the first copy was live,
	// at the end of a scan, when its heap is largest.
	fs := e.findingList(e.renewalsOverdue())
	e.findingIdx = findingIndex{} // an entry per finding: the judging below adds none through it
	for i := range fs {
		f := &fs[i]
		sortEndpoints(f.Endpoints)
		f.Endpoints = slices.Compact(f.Endpoints)
		if c := e.cert(f.Certificate); c != nil {
			f.Subject = c.Subject
		}
	}
	out := Result{Endpoints: e.probed, Revocation: e.revocation.result(), Sources: e.sourceCoverage()}
	e.mergeAtRest()
	out.Findings, out.ACM = e.judgeInventory(fs)
	out.Findings, out.IAM = e.judgeIAM(out.Findings)
	out.Findings, out.AtRest = e.judgeAtRest(out.Findings)
	out.Findings = e.judgeCT(out.Findings)
	out.Findings = e.judgeCadence(out.Findings, out.ACM, out.IAM)
	// The name history is read by judgeCadence alone: let go before the
	// rest of the judging, and what the caller does with the report
	// (tens of megabytes at 100,000 names).
	e.history = nil
	out.Findings, out.Gaps = e.judgeCoverage(out.Findings)
	out.Findings, out.Gaps = e.judgeUnattached(out.Findings, out.Gaps)
	out.Findings, out.Gaps = e.judgeUncovered(out.Findings, out.Gaps)
	out.Findings, out.Gaps = e.judgeUnverified(out.Findings, out.Gaps, out.ACM, out.IAM)
	out.Gaps = append(out.Gaps, e.ct.gaps...)
	slices.SortFunc(out.Gaps, func(a, b Gap) int {
		return cmp.Or(strings.Compare(string(a.Reason), string(b.Reason)), strings.Compare(a.Zone, b.Zone))
	})
	SortFindings(out.Findings)
	if cap(out.Findings) > 2*len(out.Findings)+64 {
		out.Findings = slices.Clone(out.Findings) // room for renewals that were seen
	}
	// Sorting certs moves them under certIdx: the Evaluator is spent.
	out.Certificates = e.certs
	if cap(out.Certificates) > 2*len(out.Certificates)+64 {
		out.Certificates = slices.Clone(out.Certificates) // room Grow made for leaves that never came
	}
	slices.SortFunc(out.Certificates, func(a, b Certificate) int {
		return cmp.Or(cmp.Compare(a.NotAfter, b.NotAfter), strings.Compare(a.SHA256, b.SHA256))
	})
	e.certs, e.certIdx, e.probed = nil, fpIndex{}, nil
	return out
}

// cert returns the description of the leaf with fingerprint fp, or nil.
func (e *Evaluator) cert(fp string) *Certificate {
	if i, ok := e.certIdx.find(e.certs, fp); ok {
		return &e.certs[i]
	}
	return nil
}

// Grow makes room for about n more endpoints, each with its own leaf (the
// worst case), so that a scan that knows its size does not grow its lists
// step by step, copying them each time. Result gives back the room a fleet
// that shares certificates did not use.
func (e *Evaluator) Grow(n int) {
	e.probed = slices.Grow(e.probed, n)
	e.certs = slices.Grow(e.certs, n)
	e.certIdx.grow(e.certs, len(e.certs)+n)
}

// nameRuns yields the runs of the sorted probed list that share a name
// and port.
func (e *Evaluator) nameRuns() iter.Seq2[int, []Probed] {
	return func(yield func(int, []Probed) bool) {
		for i := 0; i < len(e.probed); {
			j := i + 1
			for j < len(e.probed) && e.probed[j].Name == e.probed[i].Name && e.probed[j].Port == e.probed[i].Port {
				j++
			}
			if !yield(i, e.probed[i:j]) {
				return
			}
			i = j
		}
	}
}

// servedIndex orders the endpoints of the sorted probed list that served a
// leaf by fingerprint, so that the endpoints serving one certificate can be
// found without a map of every certificate's endpoints.
type servedIndex struct {
	probed []Probed
	byFP   []int32 // indices into probed, by fingerprint, then name, port and address
}

// servedIndex indexes e.probed, which Result has sorted.
func (e *Evaluator) servedIndex() servedIndex {
	byFP := make([]int32, 0, len(e.probed))
	for i := range e.probed {
		if e.probed[i].Certificate != "" {
			byFP = append(byFP, int32(i))
		}
	}
	// Stable: within a fingerprint the order stays name, port, address.
	slices.SortStableFunc(byFP, func(a, b int32) int { return strings.Compare(e.probed[a].Certificate, e.probed[b].Certificate) })
	return servedIndex{probed: e.probed, byFP: byFP}
}

// servers returns the indices into probed of the endpoints that serve the
// leaf with fingerprint fp, by name, port and address.
func (x servedIndex) servers(fp string) []int32 {
	if fp == "" {
		return nil
	}
	i, _ := slices.BinarySearchFunc(x.byFP, fp, func(j int32, fp string) int { return strings.Compare(x.probed[j].Certificate, fp) })
	j := i
	for j < len(x.byFP) && x.probed[x.byFP[j]].Certificate == fp {
		j++
	}
	return x.byFP[i:j]
}

// endpoints returns the endpoints that serve the leaf with fingerprint fp,
// sorted, in a new slice; nil when none does.
func (x servedIndex) endpoints(fp string) []Endpoint {
	var eps []Endpoint
	for _, i := range x.servers(fp) {
		eps = append(eps, x.probed[i].endpoint())
	}
	return slices.Compact(eps)
}

func nameKeyOf(ep Endpoint) string { return net.JoinHostPort(ep.Name, strconv.Itoa(ep.Port)) }

// inconsistent records it when the addresses of one name and port (run,
// sorted by address) serve different leaves. Addresses that served none do
// not count.
func (e *Evaluator) inconsistent(run []Probed) {
	// An address asked for the name at a resource (Via) is judged by its
	// listener (judgeUnverified), not against where the name's DNS leads.
	if slices.ContainsFunc(run, func(p Probed) bool { return p.Via != "" }) {
		run = slices.DeleteFunc(slices.Clone(run), func(p Probed) bool { return p.Via != "" })
	}
	first := slices.IndexFunc(run, func(p Probed) bool { return p.Certificate != "" })
	if first < 0 || !slices.ContainsFunc(run[first+1:], func(p Probed) bool { return p.Certificate != "" && p.Certificate != run[first].Certificate }) {
		return
	}
	nameKey := nameKeyOf(run[0].endpoint())
	addrs := map[string][]string{}
	var fps []string
	var eps []Endpoint
	for _, p := range run {
		if p.Certificate == "" {
			continue
		}
		if len(addrs[p.Certificate]) == 0 {
			fps = append(fps, p.Certificate)
		}
		addrs[p.Certificate] = append(addrs[p.Certificate], p.Address)
		eps = append(eps, p.endpoint())
	}
	slices.SortFunc(fps, func(a, b string) int {
		return cmp.Or(cmp.Compare(e.cert(a).NotAfter, e.cert(b).NotAfter), strings.Compare(a, b))
	})
	var parts []string
	for _, fp := range fps {
		c := e.cert(fp)
		verb := "serves"
		if len(addrs[fp]) > 1 {
			verb = "serve"
		}
		parts = append(parts, fmt.Sprintf("%s %s %q (sha256 %s…, not after %s)", strings.Join(addrs[fp], ", "), verb, c.Subject, fp[:12], c.NotAfter.UTC().Format(time.DateOnly)))
	}
	e.findings.append(finding{
		kind: InconsistentDeployment, tier: e.rules.Inconsistent, cert: fps[0], name: nameKey,
		deadline:  e.cert(fps[0]).NotAfter,
		endpoints: eps,
		message:   fmt.Sprintf("addresses of %s serve %d different certificates: %s; finish the rollout so every address serves the newest", nameKey, len(fps), strings.Join(parts, "; ")),
	})
}

// SortFindings orders findings most urgent first: by tier, then deadline,
// then kind and identity, so output is stable.
func SortFindings(fs []Finding) {
	slices.SortFunc(fs, func(a, b Finding) int {
		// Kinds compare first, so comparing what the IDs are about orders
		// as comparing the IDs would, without building them.
		return cmp.Or(cmp.Compare(b.Tier, a.Tier), cmp.Compare(a.Deadline, b.Deadline), strings.Compare(string(a.Kind), string(b.Kind)), strings.Compare(a.subjectOfID(), b.subjectOfID()))
	})
}

func sortEndpoints(eps []Endpoint) {
	slices.SortFunc(eps, func(a, b Endpoint) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), strings.Compare(a.Address, b.Address), strings.Compare(a.Via, b.Via))
	})
}

// describe returns the description of leaf c, served for the name
// served. It shares what it can: a DNS name equal to served with the
// endpoint's name (which the report keeps anyway), the subject with an
// equal first DNS name, the issuer with other leaves.
func (e *Evaluator) describe(c *x509.Certificate, fp, served string) Certificate {
	// What a server puts in its certificate is shown to people: Printable.
	subject := Printable(atrest.SubjectName(c))
	names := c.DNSNames
	if slices.ContainsFunc(names, func(n string) bool { return Printable(n) != n }) {
		names = make([]string, len(c.DNSNames))
		for i, n := range c.DNSNames {
			names[i] = Printable(n)
		}
	}
	if i := slices.Index(names, served); i >= 0 {
		if &names[0] == &c.DNSNames[0] {
			names = slices.Clone(names)
		}
		names[i] = served
	}
	if len(names) > 0 && names[0] == subject {
		subject = names[0]
	}
	issuer := Printable(atrest.IssuerName(c))
	if is, ok := e.issuers[issuer]; ok {
		issuer = is
	} else {
		e.issuers[issuer] = issuer
	}
	return Certificate{
		SHA256:    fp,
		Subject:   subject,
		Issuer:    issuer,
		Serial:    c.SerialNumber.Text(16),
		DNSNames:  names,
		NotBefore: At(c.NotBefore),
		NotAfter:  At(c.NotAfter),

		SignatureAlgorithm: probes.SignatureAlgorithm(c),
	}
}

func namesOf(c *x509.Certificate) string {
	names := append(slices.Clone(c.DNSNames), ipStrings(c)...)
	if len(names) == 0 {
		return "no DNS names (subject " + c.Subject.String() + ")"
	}
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

func ipStrings(c *x509.Certificate) []string {
	var out []string
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

func role(c, leaf *x509.Certificate) string {
	switch {
	case c == leaf || c.Equal(leaf):
		return "leaf certificate"
	case c.IsCA && c.CheckSignatureFrom(c) == nil:
		return "root certificate"
	}
	return "intermediate certificate"
}

func renewAdvice(c, leaf *x509.Certificate) string {
	if c == leaf || c.Equal(leaf) {
		return "renew it and deploy the new certificate to every endpoint listed"
	}
	return "the leaf is fine but its chain is not; deploy the chain with the renewed intermediate (or reissue from a current one) on every endpoint listed"
}

// humanBetween renders the time from from to to (to not before from),
// exactly also beyond the 292 years a Duration holds.
//
// Two or more days are counted as DaysUntil counts them, in calendar days,
// so the number agrees with the date printed beside it ("5 days" to a
// deadline on the 6th from the 1st, whatever the hours); closer, hours or
// minutes.
func humanBetween(from, to time.Time) string {
	if n := DaysUntil(to, from); n >= 2 {
		return fmt.Sprintf("%d days", n)
	}
	return humanDuration(to.Sub(from))
}

// humanDuration renders d as "3 days", "5 hours" or "12 minutes".
func humanDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", int(d/day))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", int(d/time.Hour))
	}
	return fmt.Sprintf("%d minutes", int(d/time.Minute))
}

// awsResourceName reports whether every source of an endpoint is a load
// balancer's own DNS name (certconsumer.LoadBalancerSource).
func awsResourceName(sources []string) bool {
	return len(sources) > 0 && !slices.ContainsFunc(sources, func(s string) bool { return !strings.HasPrefix(s, certconsumer.LoadBalancerSource) })
}

// isIPLiteral reports whether name is an IP address.
func isIPLiteral(name string) bool {
	if !strings.Contains(name, ":") && strings.ContainsFunc(name, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }) {
		return false // not an address: spares ParseAddr's error, for every name
	}
	_, err := netip.ParseAddr(name)
	return err == nil
}

// blocks is a list that grows by whole blocks, so that appending never
// copies what is already there and pointers to elements stay valid.
type blocks[T any] struct {
	b [][]T
	n int
}

const blockLen = 512

func (l *blocks[T]) append(v T) {
	if l.n%blockLen == 0 {
		l.b = append(l.b, make([]T, 0, blockLen))
	}
	last := &l.b[len(l.b)-1]
	*last = append(*last, v)
	l.n++
}

func (l *blocks[T]) at(i int32) *T { return &l.b[i/blockLen][i%blockLen] }

func (l *blocks[T]) len() int { return l.n }

// findingList returns the findings as Findings, in one new slice with
// room for extra more, and empties e.findings, block by block.
func (e *Evaluator) findingList(extra int) []Finding {
	out := make([]Finding, 0, e.findings.len()+extra)
	for i, b := range e.findings.b {
		for j := range b {
			f := &b[j]
			out = append(out, Finding{Kind: f.kind, Tier: f.tier, Certificate: f.cert, Name: f.name, Deadline: f.deadline, Endpoints: f.endpoints, Message: f.message})
		}
		e.findings.b[i] = nil
	}
	e.findings = blocks[finding]{}
	return out
}

// postQuantum is whether the server took the post-quantum hybrid o's probe
// offered; nil when it offered none.
func postQuantum(o *probes.Observation) *bool {
	if !o.HybridOffered {
		return nil
	}
	pq := o.KeyExchange.Hybrid()
	return &pq
}

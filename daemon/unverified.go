package daemon

import (
	"fmt"
	"slices"

	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/probes"
	"github.com/certwatch/certwatch/scan"
)

type endpointKey struct {
	name    string
	port    int
	address string
}

// failed reports whether ep gave no certificate and a reason (refused, timed
// out, not probed before the sweep timeout).
func failed(ep *scan.Endpoint) bool {
	fault := ep.Fault()
	return ep.Certificate == "" && (fault.Failure != "" || fault.Error != "")
}

// anyFailed reports whether any of eps failed: only then does
// carryForward carry anything.
func anyFailed(eps []scan.Endpoint) bool {
	for i := range eps {
		if failed(&eps[i]) {
			return true
		}
	}
	return false
}

// carryForward returns the report to publish for cur, the report of this
// run, given prev, the report published for the run before. A finding of
// prev that cur lacks, and whose every endpoint cur lists as failed, is
// not fixed: certwatch could not look. It stays in the published report at
// its tier, with UnverifiedSince set to when it was last observed, and its
// certificate stays listed. Findings without endpoints (the daemon's own,
// discovery's) are never carried: each run states them afresh. cur is not
// modified; the result shares its slices' elements.
func carryForward(prev, cur *scan.Report) *scan.Report {
	if prev == nil || cur == nil {
		return cur
	}
	down := map[endpointKey]bool{}
	for i := range cur.Endpoints {
		if ep := &cur.Endpoints[i]; failed(ep) {
			down[endpointKey{ep.Name, ep.Port, ep.Address}] = true
		}
	}
	if len(down) == 0 {
		return cur
	}
	have := map[string]bool{}
	for _, f := range cur.Findings {
		have[f.ID()] = true
	}
	certs := map[string]bool{}
	for _, c := range cur.Certificates {
		certs[c.SHA256] = true
	}
	out := *cur
	out.Findings = slices.Clone(cur.Findings)
	out.Certificates = slices.Clone(cur.Certificates)
	carried := 0
	var prevCerts map[string]int // prev's certificates by fingerprint, made when first needed
	for _, f := range prev.Findings {
		if have[f.ID()] || len(f.Endpoints) == 0 || !allDown(f.Endpoints, down) {
			continue
		}
		if f.UnverifiedSince.IsZero() {
			f.UnverifiedSince = policy.At(prev.GeneratedAt)
		}
		have[f.ID()] = true
		out.Findings = append(out.Findings, f)
		carried++
		if f.Certificate == "" || certs[f.Certificate] {
			continue
		}
		if prevCerts == nil {
			// A lookup each instead of a scan of prev's certificates:
			// half a fleet of 100,000 gone silent took 4.7 s.
			prevCerts = make(map[string]int, len(prev.Certificates))
			for i := len(prev.Certificates) - 1; i >= 0; i-- {
				prevCerts[prev.Certificates[i].SHA256] = i // the first of a fingerprint listed twice
			}
		}
		if i, ok := prevCerts[f.Certificate]; ok {
			out.Certificates = append(out.Certificates, prev.Certificates[i])
			certs[f.Certificate] = true
		}
	}
	if carried == 0 {
		return cur
	}
	policy.SortFindings(out.Findings)
	return &out
}

func allDown(eps []policy.Endpoint, down map[endpointKey]bool) bool {
	for _, e := range eps {
		if !down[endpointKey{e.Name, e.Port, e.Address}] {
			return false
		}
	}
	return true
}

// failureShare returns how many of r's endpoints failed, and a sentence
// when every one failed or more than share of them went unanswered
// (policy.Unanswered: a refused port is an answer), by the rule of the
// notifier's storm guard (policy.FailureShareExceeded): certwatch probably
// cannot see, rather than everything being down. Every endpoint failing
// counts however few there are. share 0 disables the check.
func failureShare(r *scan.Report, share float64) (int, string) {
	return tallyOf(r.Endpoints).share(share)
}

// tally counts a run's endpoints by how they fared: what the failure share
// and the probe_cut_short finding need of them, without keeping them.
type tally struct {
	endpoints, failed, unanswered, notProbed int
}

// add counts one endpoint: answered when it served a certificate, else
// its failure class and error.
func (t *tally) add(answered bool, failure, errText string) {
	t.endpoints++
	if !answered && (failure != "" || errText != "") {
		t.failed++
		if policy.Unanswered(failure) {
			t.unanswered++
		}
	}
	if failure == string(probes.FailNotProbed) {
		t.notProbed++
	}
}

func tallyOf(eps []scan.Endpoint) tally {
	var t tally
	for i := range eps {
		fault := eps[i].Fault()
		t.add(eps[i].Certificate != "", fault.Failure, fault.Error)
	}
	return t
}

// share is failureShare of the endpoints counted.
func (t tally) share(share float64) (int, string) {
	n, unanswered, total := t.failed, t.unanswered, t.endpoints
	// Nothing answered: loud whatever the estate's size, as certwatch scan
	// exits 3. The share's minimum run (policy.MinEndpointsForFailureShare)
	// keeps a few refused ports from making the share jump; below it, a
	// host that lost its network would otherwise ping the heartbeat.
	nothing := share > 0 && total > 0 && n == total
	if !nothing && (share <= 0 || !policy.FailureShareExceeded(n, unanswered, total, share)) {
		return n, ""
	}
	if n == total {
		return n, fmt.Sprintf("%d of %d endpoints failed, none answered with a certificate (storm.max_failure_share): likely an outage or a network problem on certwatch's side", n, total)
	}
	return n, fmt.Sprintf("%d of %d endpoints (%.0f%%) went unanswered, more than storm.max_failure_share (%.0f%%): likely an outage or a network problem on certwatch's side",
		unanswered, total, 100*float64(unanswered)/float64(total), 100*share)
}

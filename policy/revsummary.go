package policy

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/probes"
)

// RevocationSummary says how the revocation of the leaves seen was
// checked, and the CRLs the checks relied on: the coverage of revocation,
// and each CRL's freshness.
type RevocationSummary struct {
	// ByCRL, ByOCSP and ByNeither count the distinct leaves whose
	// revocation a CRL answered, an OCSP response answered (stapled or
	// fetched), or nothing answered (no CRL or OCSP URL, none that could
	// be reached or trusted, or revocation checking off).
	ByCRL     int `json:"by_crl"`
	ByOCSP    int `json:"by_ocsp"`
	ByNeither int `json:"by_neither"`
	// CRLs are the CRLs that answered, by URL.
	CRLs []CRLState `json:"crls,omitempty"`
}

// CRLState is one CRL certwatch relied on.
type CRLState struct {
	URL        string    `json:"url"`
	ThisUpdate time.Time `json:"this_update"`
	NextUpdate time.Time `json:"next_update,omitzero"`
	// Stale: the CRL is past its next update (revocation_stale).
	Stale bool `json:"stale,omitempty"`
	// Leaves counts the distinct leaves it answered for.
	Leaves int `json:"leaves"`
}

// revocationTally accumulates the RevocationSummary as observations come.
type revocationTally struct {
	sum  RevocationSummary
	crls map[string]*CRLState
}

// add counts o's facts; newLeaf is true the first time o's leaf is seen,
// so each leaf is counted once however many endpoints serve it.
func (t *revocationTally) add(o *probes.Observation, newLeaf bool, now time.Time) {
	method := ""
	for i := range o.Revocation {
		r := &o.Revocation[i]
		if r.Status == probes.RevocationUnavailable {
			continue
		}
		url, isCRL := strings.CutPrefix(r.Source, "crl ")
		if r.Depth == 0 && method == "" {
			method = "ocsp"
			if isCRL {
				method = "crl"
			}
		}
		if !isCRL {
			continue
		}
		if t.crls == nil {
			t.crls = map[string]*CRLState{}
		}
		c, ok := t.crls[url]
		if !ok {
			c = &CRLState{URL: url, ThisUpdate: r.ThisUpdate.UTC(), NextUpdate: r.NextUpdate.UTC()}
			t.crls[url] = c
		}
		if r.NextUpdate.After(c.NextUpdate) { // the newest copy seen
			c.ThisUpdate, c.NextUpdate = r.ThisUpdate.UTC(), r.NextUpdate.UTC()
		}
		c.Stale = !c.NextUpdate.IsZero() && now.After(c.NextUpdate)
		if newLeaf && r.Depth == 0 {
			c.Leaves++
		}
	}
	if !newLeaf {
		return
	}
	switch method {
	case "crl":
		t.sum.ByCRL++
	case "ocsp":
		t.sum.ByOCSP++
	default:
		t.sum.ByNeither++
	}
}

func (t *revocationTally) result() RevocationSummary {
	s := t.sum
	for _, c := range t.crls {
		s.CRLs = append(s.CRLs, *c)
	}
	slices.SortFunc(s.CRLs, func(a, b CRLState) int { return cmp.Compare(a.URL, b.URL) })
	return s
}

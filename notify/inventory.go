package notify

import (
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/certwatch/certwatch/state"
)

// CertificateRefresh is how often a certificate seen again, unchanged, has
// its LastSeen rewritten in the state: a run writes only the certificates
// that are new to this process or changed (subject, issuer, expiry, where
// they are served), and the others once they were last written between
// half a CertificateRefresh and a whole one ago (spread by certificate, so
// the rewrites do not all fall in one run). A stored LastSeen is thus at
// most CertificateRefresh old while the certificate is seen, far inside
// Retention.
const CertificateRefresh = time.Hour

// written remembers what a Notifier last wrote of each certificate, so
// that Apply writes the certificate inventory incrementally. A new process
// (a restart, a replica taking over) starts empty and writes every
// certificate once. It is safe for concurrent use.
type written struct {
	seed maphash.Seed

	mu   sync.Mutex
	last map[string]writtenCert
}

type writtenCert struct {
	sum uint64    // of the fields compared
	at  time.Time // LastSeen as written
}

func newWritten() *written {
	return &written{seed: maphash.MakeSeed(), last: map[string]writtenCert{}}
}

func (w *written) sum(c state.Certificate) uint64 {
	var h maphash.Hash
	h.SetSeed(w.seed)
	h.WriteString(c.Subject)
	h.WriteByte(0)
	h.WriteString(c.Issuer)
	h.WriteByte(0)
	h.WriteString(strconv.FormatInt(c.NotAfter.UnixNano(), 10))
	eps := make([]string, len(c.Endpoints))
	for i, e := range c.Endpoints {
		eps[i] = e.Name + " " + strconv.Itoa(e.Port) + " " + e.Address
	}
	slices.Sort(eps)
	for _, e := range eps {
		h.WriteByte(0)
		h.WriteString(e)
	}
	return h.Sum64()
}

// changed returns the certificates of certs (seen at now) that need
// writing, with their sums for record. It filters certs in place (a
// first run writes every one of a fleet's: no second list of them).
func (w *written) changed(certs []state.Certificate, now time.Time) ([]state.Certificate, []uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := certs[:0]
	var sums []uint64
	half := CertificateRefresh / 2
	for _, c := range certs {
		s := w.sum(c)
		last, ok := w.last[c.SHA256]
		if ok && last.sum == s {
			due := half + time.Duration(s%uint64(half))
			if age := now.Sub(last.at); age >= 0 && age < due {
				continue
			}
		}
		out = append(out, c)
		sums = append(sums, s)
	}
	switch {
	case len(out) == 0:
		out = nil // not the whole list for none
	case len(out) < len(certs)/2:
		out = append([]state.Certificate(nil), out...) // nor for a few
	}
	return out, sums
}

// record notes that certs were written, once the transaction committed.
func (w *written) record(certs []state.Certificate, sums []uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range certs {
		w.last[c.SHA256] = writtenCert{sum: sums[i], at: c.LastSeen}
	}
}

// forget drops what was recorded of certificates last written before t,
// as the store prunes them.
func (w *written) forget(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range w.last {
		if v.at.Before(t) {
			delete(w.last, k)
		}
	}
}

package notify

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"iter"
	"slices"
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

	mu sync.Mutex
	// last is one entry per certificate written, sorted by key: 32 bytes
	// each, 3.2 MB at 100,000 certificates, held between runs
	// (TestWrittenHeldAt100k). A map of the same entries was 5.2 MB built
	// at once, and 8.3 MB in a replica between runs (a heap profile): its
	// tables are up to half empty after they grow. Searching the list
	// costs a steady run of 100,000 certificates about 20 ms more than the
	// map did (BenchmarkApply100k/sqlite/steady: 143 ms against 122–126).
	last []writtenEntry
}

type writtenEntry struct {
	key certKey
	writtenCert
}

// compareKeys orders entries by key (as bytes.Compare would), compared as
// two big-endian halves.
func compareKeys(e writtenEntry, k certKey) int {
	return cmp.Or(cmp.Compare(binary.BigEndian.Uint64(e.key[:8]), binary.BigEndian.Uint64(k[:8])),
		cmp.Compare(binary.BigEndian.Uint64(e.key[8:]), binary.BigEndian.Uint64(k[8:])))
}

// find returns the index of k's entry in last, or where it would go.
// Called with mu held.
func (w *written) find(k certKey) (int, bool) {
	return slices.BinarySearchFunc(w.last, k, compareKeys)
}

// certKey is a certificate's fingerprint folded to 16 bytes (its halves
// XORed: every byte of it counts, so identifiers that differ only in one
// half, as made-up ones do, keep keys of their own).
// Keyed by the hex string, the map kept alive the strings of the run that
// first wrote each certificate (64 bytes each, 6.4 MB at 100,000
// certificates) long after that run's report was let go; by the whole 32
// bytes, an entry was 48 bytes, and the map 6–8 MB at 100,000 (held
// between runs). Two certificates sharing a key (a chance of about 2^-128
// for a pair) would each be written at every run, never skipped: each
// finds the other's sum.
type certKey [16]byte

// keyOf is the key of the certificate whose fingerprint is sha: the
// fingerprint folded, or for anything else than 64 hex digits (no store
// writes such a one) the SHA-256 of the text folded.
func keyOf(sha string) certKey {
	var full [sha256.Size]byte
	if len(sha) != 2*len(full) {
		full = sha256.Sum256([]byte(sha))
	} else if _, err := hex.Decode(full[:], []byte(sha)); err != nil {
		full = sha256.Sum256([]byte(sha))
	}
	var k certKey
	for i := range k {
		k[i] = full[i] ^ full[i+len(k)]
	}
	return k
}

type writtenCert struct {
	sum uint64 // of the fields compared
	at  int64  // LastSeen as written, in Unix nanoseconds
}

func newWritten() *written {
	return &written{seed: maphash.MakeSeed()}
}

func (w *written) sum(c state.Certificate) uint64 {
	var h maphash.Hash
	h.SetSeed(w.seed)
	h.WriteString(c.Subject)
	h.WriteByte(0)
	h.WriteString(c.Issuer)
	h.WriteByte(0)
	// The endpoints in any order: the sum of each one's hash.
	var eps uint64
	var port [8]byte
	for _, e := range c.Endpoints {
		var he maphash.Hash
		he.SetSeed(w.seed)
		he.WriteString(e.Name)
		he.WriteByte(0)
		he.WriteString(e.Address)
		binary.LittleEndian.PutUint64(port[:], uint64(e.Port))
		he.Write(port[:])
		eps += he.Sum64()
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(c.NotAfter.UnixNano()))
	binary.LittleEndian.PutUint64(b[8:], eps)
	h.Write(b[:])
	return h.Sum64()
}

// changed returns the certificates of certs (seen at now) that need
// writing, and the sum of each of certs for record (0 for one that need
// not be written): in a steady run a few of a fleet's, in a first run or
// a renewal of everything, every one. certs is read once to decide, and
// once more by whoever reads what changed returns (the store, as it
// writes them): no list of them is made, which in a first run of 100,000
// certificates was 15 MB at the run's peak. Nil when none changed.
func (w *written) changed(certs iter.Seq[state.Certificate], now time.Time) (iter.Seq[state.Certificate], []uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var all []uint64 // each certificate's sum, or 0 when it need not be written
	kept := 0
	half := CertificateRefresh / 2
	for c := range certs {
		s := w.sum(c) | 1 // never 0
		if j, ok := w.find(keyOf(c.SHA256)); ok && w.last[j].sum == s {
			due := half + time.Duration(s%uint64(half))
			if age := now.Sub(time.Unix(0, w.last[j].at)); age >= 0 && age < due {
				all = append(all, 0)
				continue
			}
		}
		all = append(all, s)
		kept++
	}
	if kept == 0 {
		return nil, nil
	}
	return func(yield func(state.Certificate) bool) {
		i := 0
		for c := range certs {
			if i < len(all) && all[i] != 0 && !yield(c) {
				return
			}
			i++
		}
	}, all
}

// record notes that the certificates of certs changed gave a sum for were
// written, once the transaction committed.
func (w *written) record(certs iter.Seq[state.Certificate], sums []uint64) {
	if sums == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i := 0
	var added []writtenEntry // certificates not written before
	for c := range certs {
		if i < len(sums) && sums[i] != 0 {
			e := writtenEntry{keyOf(c.SHA256), writtenCert{sum: sums[i], at: c.LastSeen.UnixNano()}}
			if j, ok := w.find(e.key); ok {
				w.last[j].writtenCert = e.writtenCert
			} else {
				added = append(added, e)
			}
		}
		i++
	}
	if len(added) == 0 {
		return
	}
	// Merged into a new list: the last of a certificate listed twice wins.
	slices.SortStableFunc(added, func(a, b writtenEntry) int { return compareKeys(a, b.key) })
	merged := make([]writtenEntry, 0, len(w.last)+len(added))
	old := w.last
	for _, e := range added {
		j, _ := slices.BinarySearchFunc(old, e.key, compareKeys)
		merged, old = append(merged, old[:j]...), old[j:]
		if n := len(merged); n > 0 && merged[n-1].key == e.key {
			merged[n-1] = e
			continue
		}
		merged = append(merged, e)
	}
	w.last = append(merged, old...)
}

// forget drops what was recorded of certificates last written before t,
// as the store prunes them.
func (w *written) forget(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = slices.DeleteFunc(w.last, func(e writtenEntry) bool { return e.at < t.UnixNano() })
	if cap(w.last) > 2*len(w.last)+1024 { // most were let go: so is their room
		w.last = slices.Clone(w.last)
	}
}

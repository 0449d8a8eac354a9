// Package cttest is a local Static CT log for tests and the demo's lab
// (https://c2sp.org/static-ct-api): on a loopback port it serves a
// checkpoint signed with the log's ECDSA P-256 key as RFC 6962 requires,
// Merkle hash tiles (full and partial), data tiles of TileLeaf entries and
// issuer certificates, all built from the certificates and precertificates
// a test appends. Faults are scripted: a checkpoint with a bad signature, a
// tampered data tile, a log that hangs or answers 500, a log that grows.
//
// The log computes its Merkle tree with golang.org/x/mod/sumdb/tlog and
// encodes entries with cryptobyte; it shares no code with discovery/ct.
package cttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Entry is a certificate to log.
type Entry struct {
	// Cert is the DER of the certificate, or of the precertificate (with
	// its poison extension) when Precert is set.
	Cert    []byte
	Precert bool
	// Chain holds the DER of the issuing CA certificates, issuer first.
	// The issuer's key must have signed Cert: a precert entry names the
	// hash of Chain[0]'s public key.
	Chain [][]byte
	// Timestamp is when the log accepted the entry; zero means the log's
	// Now.
	Timestamp time.Time
}

// Fault is how the log misbehaves.
type Fault int

// Faults.
const (
	// Healthy answers every request.
	Healthy Fault = iota
	// Hang accepts requests and never answers them.
	Hang
	// Fail500 answers every request with 500 Internal Server Error.
	Fail500
	// BadSignature serves a checkpoint whose signature does not verify.
	BadSignature
	// Redirect answers every request with a redirect to the same path.
	Redirect
)

// Log is a Static CT log on a loopback port. Its methods are safe for
// concurrent use with the requests it serves.
type Log struct {
	// URL is the monitoring prefix, ending in "/".
	URL string
	// Origin is the checkpoint origin and key name.
	Origin string
	// Key is the log's signing key.
	Key *ecdsa.PrivateKey
	// Now dates checkpoints and entries without a timestamp; set before
	// the first Append.
	Now func() time.Time

	server    *http.Server
	base      string // "http://127.0.0.1:port"
	release   chan struct{}
	closeOnce sync.Once

	mu         sync.Mutex
	size       int64             // entries logged
	explicit   map[int64][]byte  // encoded TileLeaf of entries appended as they are
	generated  []generatedRange  // entries made again by AppendFunc's function when served
	tbs        map[string][]byte // precertificate TBS by precertificate, a bounded memo
	hashes     []tlog.Hash       // every stored hash (tlog's layout)
	checkpoint []byte
	issuers    map[[32]byte][]byte
	fault      Fault
	tampered   map[int64]bool // data tiles served with a flipped byte
	hung       map[int64]bool // data tiles never answered
	requests   []string
}

// TB is what Start needs of a test: testing.TB has it. It is declared
// here so that a program (certwatch demo's lab) can start a log with New
// without linking package testing.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// Start starts a log with no entries (and a checkpoint of size 0) on a
// loopback port; it is closed when the test ends.
func Start(tb TB) *Log {
	tb.Helper()
	l, err := New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// New starts a log with no entries (and a checkpoint of size 0) on a
// loopback port. Close stops it.
func New() (*Log, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cttest: log key: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cttest: listen: %w", err)
	}
	l := &Log{
		Key:      key,
		Now:      time.Now,
		release:  make(chan struct{}),
		issuers:  make(map[[32]byte][]byte),
		tampered: make(map[int64]bool),
		hung:     make(map[int64]bool),
		explicit: make(map[int64][]byte),
		tbs:      make(map[string][]byte),
		server:   &http.Server{ReadHeaderTimeout: 10 * time.Second},
		base:     "http://" + ln.Addr().String(),
	}
	l.server.Handler = http.HandlerFunc(l.serve)
	go l.server.Serve(ln)
	l.URL = l.base + "/logs/test2026h1/"
	l.Origin = ln.Addr().String() + "/logs/test2026h1"
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.sign(); err != nil {
		l.server.Close()
		return nil, err
	}
	return l, nil
}

// Close stops the log: requests left hanging (Hang) end unanswered.
func (l *Log) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.release)
		if err = l.server.Close(); errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	})
	return err
}

// PublicKey returns the log's public key as CT log lists publish it: the
// base64 of its DER SubjectPublicKeyInfo.
func (l *Log) PublicKey() string {
	der, err := x509.MarshalPKIXPublicKey(&l.Key.PublicKey)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(der)
}

// Append logs entries and signs a new checkpoint covering them.
func (l *Log) Append(entries ...Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range entries {
		leaf, err := l.encode(l.size, e)
		if err != nil {
			return fmt.Errorf("entry %d: %w", l.size, err)
		}
		for _, issuer := range e.Chain {
			l.issuers[sha256.Sum256(issuer)] = issuer
		}
		l.explicit[l.size] = leaf
		if err := l.appendLeaf(leaf); err != nil {
			return err
		}
	}
	return l.sign()
}

// AppendFunc logs n entries made by entry(i), i being the entry's index,
// and signs a new checkpoint. entry must return the same entry every time
// it is called with the same index: entries are not kept but made again
// when served, so a log of millions of entries fits in memory (its hashes
// take 64 bytes an entry).
func (l *Log) AppendFunc(n int64, entry func(i int64) Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := generatedRange{start: l.size, end: l.size + n, entry: entry}
	for index := r.start; index < r.end; index++ {
		e := entry(index)
		leaf, err := l.encode(index, e)
		if err != nil {
			return fmt.Errorf("entry %d: %w", index, err)
		}
		for _, issuer := range e.Chain {
			l.issuers[sha256.Sum256(issuer)] = issuer
		}
		if err := l.appendLeaf(leaf); err != nil {
			return err
		}
	}
	l.generated = append(l.generated, r)
	return l.sign()
}

// generatedRange is entries [start, end) made by AppendFunc's function.
type generatedRange struct {
	start, end int64
	entry      func(i int64) Entry
}

// leaf is entry i's encoded TileLeaf. Called with mu held.
func (l *Log) leaf(i int64) []byte {
	if b, ok := l.explicit[i]; ok {
		return b
	}
	for _, r := range l.generated {
		if r.start <= i && i < r.end {
			b, err := l.encode(i, r.entry(i))
			if err != nil {
				panic(fmt.Sprintf("cttest: AppendFunc's entry %d no longer encodes: %v", i, err))
			}
			return b
		}
	}
	panic(fmt.Sprintf("cttest: no entry %d", i))
}

// appendLeaf adds an entry's hashes to the tree. Called with mu held.
func (l *Log) appendLeaf(encoded []byte) error {
	te, err := timestampedEntry(encoded)
	if err != nil {
		return err
	}
	// MerkleTreeLeaf: version v1, leaf type timestamped_entry (RFC 6962, 3.4).
	mtl := append([]byte{0, 0}, te...)
	hashes, err := tlog.StoredHashesForRecordHash(l.size, tlog.RecordHash(mtl), l.hashReader())
	if err != nil {
		return err
	}
	l.hashes = append(l.hashes, hashes...)
	l.size++
	return nil
}

func (l *Log) hashReader() tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			if x >= int64(len(l.hashes)) {
				return nil, fmt.Errorf("hash %d not stored", x)
			}
			out[i] = l.hashes[x]
		}
		return out, nil
	})
}

// SetFault makes the log misbehave from now on; Healthy restores it, and
// undoes TamperDataTile and HangDataTile too.
func (l *Log) SetFault(f Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = f
	if f == Healthy {
		clear(l.tampered)
		clear(l.hung)
	}
}

// HangDataTile makes requests for data tile n (full or partial) hang: a log
// that stops answering halfway through a read.
func (l *Log) HangDataTile(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hung[n] = true
}

// TamperDataTile serves data tile n (the entries from n*256) with one byte
// of its first certificate changed, as a corrupt or lying log would.
func (l *Log) TamperDataTile(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tampered[n] = true
}

// Size is the tree size of the current checkpoint.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Requests returns the paths requested so far, under the monitoring prefix
// (e.g. "checkpoint", "tile/data/000", "issuer/ab12…").
func (l *Log) Requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.requests...)
}

// sign makes the checkpoint of the current tree. Called with mu held.
func (l *Log) sign() error {
	size := l.size
	root, err := tlog.TreeHash(size, l.hashReader())
	if err != nil {
		return err
	}
	l.checkpoint, err = l.Checkpoint(size, root)
	return err
}

// Checkpoint is a checkpoint of the tree head (size, root), whatever the
// log holds, signed with the log's key: what a hostile or broken log can
// serve (a tree it does not have, an older one).
func (l *Log) Checkpoint(size int64, root tlog.Hash) ([]byte, error) {
	text := fmt.Sprintf("%s\n%d\n%s\n", l.Origin, size, base64.StdEncoding.EncodeToString(root[:]))
	s, err := l.signer(uint64(l.Now().UnixMilli()), size, root)
	if err != nil {
		return nil, err
	}
	return note.Sign(&note.Note{Text: text}, s)
}

// treeHeadSigner is a note.Signer making the RFC6962NoteSignature of one
// tree head (c2sp.org/static-ct-api, "Checkpoints").
type treeHeadSigner struct {
	name      string
	keyHash   uint32
	key       *ecdsa.PrivateKey
	timestamp uint64
	size      int64
	root      tlog.Hash
}

func (l *Log) signer(timestamp uint64, size int64, root tlog.Hash) (*treeHeadSigner, error) {
	spki, err := x509.MarshalPKIXPublicKey(&l.Key.PublicKey)
	if err != nil {
		return nil, err
	}
	logID := sha256.Sum256(spki)
	id := sha256.Sum256(append([]byte(l.Origin+"\n\x05"), logID[:]...))
	return &treeHeadSigner{
		name: l.Origin, keyHash: binary.BigEndian.Uint32(id[:4]), key: l.Key,
		timestamp: timestamp, size: size, root: root,
	}, nil
}

func (s *treeHeadSigner) Name() string    { return s.name }
func (s *treeHeadSigner) KeyHash() uint32 { return s.keyHash }

func (s *treeHeadSigner) Sign([]byte) ([]byte, error) {
	// TreeHeadSignature (RFC 6962, 3.5).
	var th cryptobyte.Builder
	th.AddUint8(0) // v1
	th.AddUint8(1) // tree_hash
	th.AddUint64(s.timestamp)
	th.AddUint64(uint64(s.size))
	th.AddBytes(s.root[:])
	digest := sha256.Sum256(th.BytesOrPanic())
	sig, err := ecdsa.SignASN1(rand.Reader, s.key, digest[:])
	if err != nil {
		return nil, err
	}
	var b cryptobyte.Builder
	b.AddUint64(s.timestamp)
	b.AddUint8(4) // sha256
	b.AddUint8(3) // ecdsa
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(sig) })
	return b.Bytes()
}

// encode makes entry index's TileLeaf.
func (l *Log) encode(index int64, e Entry) ([]byte, error) {
	ts := e.Timestamp
	if ts.IsZero() {
		ts = l.Now()
	}
	var b cryptobyte.Builder
	b.AddUint64(uint64(ts.UnixMilli()))
	if e.Precert {
		if len(e.Chain) == 0 {
			return nil, fmt.Errorf("a precert entry needs its issuer in Chain")
		}
		keyHash, tbs, err := l.precertEntry(e)
		if err != nil {
			return nil, err
		}
		b.AddUint16(1) // precert_entry
		b.AddBytes(keyHash[:])
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(tbs) })
	} else {
		b.AddUint16(0) // x509_entry
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(e.Cert) })
	}
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint8(0) // leaf_index
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
			b.AddBytes([]byte{byte(index >> 32), byte(index >> 24), byte(index >> 16), byte(index >> 8), byte(index)})
		})
	})
	if e.Precert {
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(e.Cert) })
	}
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, c := range e.Chain {
			fp := sha256.Sum256(c)
			b.AddBytes(fp[:])
		}
	})
	return b.Bytes()
}

// precertEntry returns what a precert entry holds: the hash of the
// issuer's key and the precertificate's TBS without poison. They are
// memoised (a bounded cache), for AppendFunc's entries are encoded again
// each time they are served.
func (l *Log) precertEntry(e Entry) ([]byte, []byte, error) {
	memoKey := string(e.Cert) + string(e.Chain[0])
	if b, ok := l.tbs[memoKey]; ok {
		return b[:sha256.Size], b[sha256.Size:], nil
	}
	issuer, err := x509.ParseCertificate(e.Chain[0])
	if err != nil {
		return nil, nil, fmt.Errorf("issuer: %w", err)
	}
	tbs, err := precertTBS(e.Cert)
	if err != nil {
		return nil, nil, err
	}
	keyHash := sha256.Sum256(issuer.RawSubjectPublicKeyInfo)
	if len(l.tbs) >= 1024 {
		clear(l.tbs)
	}
	l.tbs[memoKey] = append(keyHash[:], tbs...)
	return keyHash[:], tbs, nil
}

// timestampedEntry returns the TimestampedEntry at the start of a TileLeaf.
func timestampedEntry(leaf []byte) ([]byte, error) {
	s := cryptobyte.String(leaf)
	var entryType uint16
	var skip cryptobyte.String
	ok := s.Skip(8) && s.ReadUint16(&entryType)
	if entryType == 1 {
		ok = ok && s.Skip(32)
	}
	ok = ok && s.ReadUint24LengthPrefixed(&skip) && s.ReadUint16LengthPrefixed(&skip)
	if !ok {
		return nil, fmt.Errorf("malformed TileLeaf")
	}
	return leaf[:len(leaf)-len(s)], nil
}

func (l *Log) serve(w http.ResponseWriter, r *http.Request) {
	prefix := strings.TrimPrefix(l.URL, l.base)
	path, ok := strings.CutPrefix(r.URL.Path, prefix)
	l.mu.Lock()
	l.requests = append(l.requests, path)
	fault := l.fault
	if t, err := tlog.ParseTilePath("tile/8/" + strings.TrimPrefix(path, "tile/")); err == nil && t.L == -1 && l.hung[t.N] {
		fault = Hang
	}
	l.mu.Unlock()
	switch {
	case !ok || r.Method != http.MethodGet:
		http.NotFound(w, r)
		return
	case fault == Hang:
		select {
		case <-r.Context().Done():
		case <-l.release:
		}
		return
	case fault == Fail500:
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	case fault == Redirect:
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
		return
	}
	body, contentType, found := l.asset(path, fault)
	if !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Write(body)
}

// asset is the body and content type served at path.
func (l *Log) asset(path string, fault Fault) ([]byte, string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case path == "checkpoint":
		cp := l.checkpoint
		if fault == BadSignature {
			cp = badSignature(cp)
		}
		return cp, "text/plain; charset=utf-8", true
	case strings.HasPrefix(path, "issuer/"):
		fp, err := hex.DecodeString(strings.TrimPrefix(path, "issuer/"))
		if err != nil || len(fp) != 32 {
			return nil, "", false
		}
		der, ok := l.issuers[[32]byte(fp)]
		return der, "application/pkix-cert", ok
	case strings.HasPrefix(path, "tile/"):
		t, err := tlog.ParseTilePath("tile/8/" + strings.TrimPrefix(path, "tile/"))
		if err != nil || t.L > 5 {
			return nil, "", false
		}
		// A tile exists once the tree holds its W entries (hashes).
		size := l.size
		if t.L >= 0 {
			size >>= 8 * t.L
		}
		if t.N<<8+int64(t.W) > size {
			return nil, "", false
		}
		if t.L == -1 {
			return l.dataTile(t), "application/octet-stream", true
		}
		data, err := tlog.ReadTileData(t, l.hashReader())
		return data, "application/octet-stream", err == nil
	}
	return nil, "", false
}

func (l *Log) dataTile(t tlog.Tile) []byte {
	var out []byte
	for i := range int64(t.W) {
		leaf := l.leaf(t.N<<8 + i)
		if i == 0 && l.tampered[t.N] {
			leaf = append([]byte(nil), leaf...)
			leaf[len(leaf)/2] ^= 1
		}
		out = append(out, leaf...)
	}
	return out
}

// badSignature flips a bit in the signature of a signed note.
func badSignature(signed []byte) []byte {
	text, sigs, _ := strings.Cut(string(signed), "\n\n")
	name, b64, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(sigs, "— "), "\n"), " ")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	raw[len(raw)-1] ^= 1
	return []byte(text + "\n\n— " + name + " " + base64.StdEncoding.EncodeToString(raw) + "\n")
}

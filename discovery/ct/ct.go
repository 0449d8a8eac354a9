// Package ct reads Certificate Transparency logs that serve the Static CT
// API (https://c2sp.org/static-ct-api) and reports the certificates issued
// for watched domains.
//
// A read fetches the log's checkpoint and checks its signature with the
// log's configured key, then streams the data tiles from a position to the
// checkpoint's tree size, one tile at a time with a bounded number of
// fetches in flight. Every data tile's entries are hashed and the hashes
// checked against the checkpoint's root hash (through the log's hash tiles,
// with golang.org/x/mod/sumdb/tlog) before any of its entries is reported,
// so nothing the log serves is believed before it is proven part of the
// signed tree. Memory stays bounded whatever the log's size: at most
// Parallelism+1 data tiles and a few dozen hash tiles are held at once.
//
// Every HTTP read is capped in size and time, and redirects are refused.
package ct

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ErrVerification is matched (errors.Is) by the errors of a read that
// fetched something the log's signed tree does not vouch for: a checkpoint
// whose signature does not verify with the configured key or names another
// origin, a tile whose hashes do not match the checkpoint, a checkpoint
// inconsistent with the one read before. Such a log is misbehaving or being
// impersonated, unlike one that merely does not answer.
var ErrVerification = errors.New("log data does not verify")

// Default limits used where the Reader's field is zero.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultParallelism  = 4
	DefaultMaxTileBytes = 16 << 20
)

// Log is one Static CT log as configured.
type Log struct {
	// URL is the log's monitoring prefix, e.g. https://log.example/2025h1/.
	URL string
	// Origin is the checkpoint's origin line, which is also the name of the
	// log's key in the checkpoint signature, e.g. log.example/2025h1.
	Origin string
	// Key is the log's public key (ECDSA P-256 or RSA), as ParseKey returns.
	Key crypto.PublicKey
}

// ParseKey parses a log key as CT log lists publish it: the base64 of the
// DER SubjectPublicKeyInfo. Only ECDSA and RSA keys are accepted (RFC 6962
// signatures).
func ParseKey(b64 string) (crypto.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, fmt.Errorf("log key is not base64 (want the base64 of the DER public key, as in CT log lists): %w", err)
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("log key: %w", err)
	}
	if _, err := newVerifier("x", key); err != nil {
		return nil, err
	}
	return key, nil
}

// Position is how far a log has been read: the caller keeps it between
// reads and hands it back to the next one.
type Position struct {
	// Next is the index of the next entry to read; FromTreeSize starts at
	// the end of the log's current tree, reporting only what is logged after.
	Next int64
	// Size and Root are the tree size and root hash of the checkpoint the
	// entries before Next were verified against; zero Size means none. When
	// set, the next read checks that the log's new tree extends this one.
	Size int64
	Root [32]byte
	// Back, with Next FromTreeSize, starts a first read that many entries
	// before the end of the log's current tree (at its first entry when
	// the tree is smaller), so that a first read sees what was logged
	// lately.
	Back int64
}

// FromTreeSize, as Position.Next, starts a first read at the log's current
// tree size instead of its first entry.
const FromTreeSize = -1

// Entry is a certificate, or a precertificate, logged for a watched name.
type Entry struct {
	// Log is the log's origin.
	Log string
	// Index is the entry's position in the log.
	Index int64
	// Timestamp is when the log accepted the entry (the SCT's timestamp).
	Timestamp time.Time
	// Precert reports a precertificate: the promise of a certificate whose
	// final form (with embedded SCTs) may be logged separately or not at all.
	Precert bool
	// Serial is the serial number in lower-case hex without leading zeros
	// (x509.Certificate.SerialNumber.Text(16)).
	Serial string
	// Issuer is the issuing CA.
	Issuer Issuer
	// Names are the DNS names of the certificate: its DNS SANs, and its
	// subject common name when it is a host name the SANs do not list.
	Names []string
	// NotBefore and NotAfter bound the certificate's validity.
	NotBefore, NotAfter time.Time
	// SHA256 is the hex SHA-256 fingerprint of the certificate as served,
	// empty for a precertificate (whose final form carries SCTs the log
	// never saw).
	SHA256 string
	// ID is one issuance: the hex SHA-256 of the issuer name and serial
	// number. A precertificate and its final certificate share it, so that
	// the two are reported as one certificate.
	ID string
}

// Issuer is the CA that signed a logged certificate.
type Issuer struct {
	// Name is the issuer's distinguished name as the certificate states it.
	Name string
	// SHA256 is the hex SHA-256 fingerprint of the issuing CA certificate the
	// log holds, and KeySHA256 that of its public key (SubjectPublicKeyInfo).
	// They are set only when proven: the CA's key verifies the certificate's
	// signature or, for a precertificate, hashes to the key hash the logged
	// entry names. KeySHA256 is always set for a precertificate.
	SHA256    string
	KeySHA256 string
	// Organization and CommonName are the issuer name's O and CN, as the
	// certificate states them.
	Organization []string
	CommonName   string
}

// Reader reads Static CT logs. Its fields are set before the first Read and
// not changed afterwards; a Reader is then safe for concurrent use, and
// caches issuer certificates across reads.
type Reader struct {
	// Domains selects the entries reported.
	Domains Domains
	// Client makes the HTTP requests; nil means http.DefaultClient's
	// transport. Redirects are never followed, whatever the client says.
	Client *http.Client
	// Timeout bounds each HTTP request, its body included; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Parallelism is how many data tiles are fetched at once; zero means
	// DefaultParallelism.
	Parallelism int
	// MaxTileBytes caps the size of a data tile (hash tiles are at most 8
	// KiB, checkpoints and issuers 64 KiB); zero means DefaultMaxTileBytes.
	MaxTileBytes int64
	// MaxEntries bounds the entries one Read reads: it stops at the end
	// of the first data tile past that many, and the next Read goes on
	// from there. Zero reads to the checkpoint's tree size.
	MaxEntries int64
	// Logger receives debug detail; nil discards it.
	Logger *slog.Logger

	issuersMu sync.Mutex
	issuers   map[[32]byte]*x509.Certificate // by certificate fingerprint
}

// Result summarises one read.
type Result struct {
	// Position is where the next read starts.
	Position Position
	// Checkpoint is the verified checkpoint's timestamp.
	Checkpoint time.Time
	// Entries is the number of entries read and verified.
	Entries int64
	// Unparsed counts entries that name a watched domain in their bytes but
	// that crypto/x509 cannot parse: they are not reported.
	Unparsed int64
}

func (r *Reader) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

func (r *Reader) parallelism() int {
	if r.Parallelism > 0 {
		return r.Parallelism
	}
	return DefaultParallelism
}

func (r *Reader) maxTileBytes() int64 {
	if r.MaxTileBytes > 0 {
		return r.MaxTileBytes
	}
	return DefaultMaxTileBytes
}

func (r *Reader) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// fingerprint is the lower-case hex SHA-256 of b.
func fingerprint(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:])
}

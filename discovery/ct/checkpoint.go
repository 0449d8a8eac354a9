package ct

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// checkpoint is a verified Signed Tree Head.
type checkpoint struct {
	tree      tlog.Tree
	timestamp time.Time
}

// RFC 6962 TLS enum values.
const (
	sigTypeTreeHash  = 1 // SignatureType.tree_hash (RFC 6962, 3.5)
	hashAlgSHA256    = 4 // HashAlgorithm.sha256 (RFC 5246, 7.4.1.4.1)
	sigAlgRSA        = 1 // SignatureAlgorithm.rsa
	sigAlgECDSA      = 3 // SignatureAlgorithm.ecdsa
	noteSigRFC6962   = 0x05
	maxCheckpointLen = 64 << 10
)

// maxTreeSize is the largest tree a Static CT log can have: an entry's
// leaf_index is a uint40. It also keeps tlog's arithmetic, which does not
// hold for trees of 2^62 entries and more, well clear of overflow.
const maxTreeSize = 1 << 40

// verifier is a note.Verifier for an RFC 6962 tree head signature carried in
// a checkpoint (c2sp.org/static-ct-api, "Checkpoints").
type verifier struct {
	name string
	hash uint32
	key  crypto.PublicKey
}

func newVerifier(origin string, key crypto.PublicKey) (*verifier, error) {
	switch k := key.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey:
	default:
		return nil, fmt.Errorf("log key is a %T: a CT log signs with ECDSA or RSA", k)
	}
	spki, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("log key: %w", err)
	}
	// The key ID is the first four bytes of SHA-256(key name || 0x0A ||
	// 0x05 || LogID), LogID being the SHA-256 of the DER public key.
	logID := sha256.Sum256(spki)
	h := sha256.New()
	h.Write([]byte(origin + "\n"))
	h.Write([]byte{noteSigRFC6962})
	h.Write(logID[:])
	return &verifier{name: origin, hash: binary.BigEndian.Uint32(h.Sum(nil)), key: key}, nil
}

func (v *verifier) Name() string    { return v.name }
func (v *verifier) KeyHash() uint32 { return v.hash }

// Verify checks sig, an RFC6962NoteSignature (timestamp, then the
// TreeHeadSignature's digitally-signed value), over the tree head that the
// checkpoint text msg states.
func (v *verifier) Verify(msg, sig []byte) bool {
	tree, err := parseCheckpointText(msg, v.name)
	if err != nil {
		return false
	}
	s := cryptobyte.String(sig)
	var timestamp uint64
	var hashAlg, sigAlg uint8
	var signature []byte
	if !s.ReadUint64(&timestamp) || !s.ReadUint8(&hashAlg) || !s.ReadUint8(&sigAlg) ||
		!s.ReadUint16LengthPrefixed((*cryptobyte.String)(&signature)) || !s.Empty() || hashAlg != hashAlgSHA256 {
		return false
	}
	// TreeHeadSignature (RFC 6962, 3.5): version v1, tree_hash, timestamp,
	// tree_size, sha256_root_hash.
	var b cryptobyte.Builder
	b.AddUint8(0)
	b.AddUint8(sigTypeTreeHash)
	b.AddUint64(timestamp)
	b.AddUint64(uint64(tree.N))
	b.AddBytes(tree.Hash[:])
	digest := sha256.Sum256(b.BytesOrPanic())
	switch k := v.key.(type) {
	case *ecdsa.PublicKey:
		return sigAlg == sigAlgECDSA && ecdsa.VerifyASN1(k, digest[:], signature)
	case *rsa.PublicKey:
		return sigAlg == sigAlgRSA && rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], signature) == nil
	}
	return false
}

// parseCheckpointText parses a checkpoint's body: origin, tree size, root
// hash, and no extension line (which an RFC 6962 signed checkpoint must
// not have).
func parseCheckpointText(text []byte, origin string) (tlog.Tree, error) {
	lines := strings.Split(string(text), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return tlog.Tree{}, errors.New("checkpoint is not three lines (origin, size, root hash)")
	}
	if lines[0] != origin {
		return tlog.Tree{}, fmt.Errorf("checkpoint origin is %q, not the configured %q", lines[0], origin)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return tlog.Tree{}, fmt.Errorf("checkpoint tree size %q is not a decimal number", lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return tlog.Tree{}, fmt.Errorf("checkpoint root hash %q is not 32 bytes of base64", lines[2])
	}
	return tlog.Tree{N: size, Hash: tlog.Hash(root)}, nil
}

// openCheckpoint verifies a checkpoint's signature by the log's key and
// returns the tree head it signs. Signatures by other keys (witnesses) are
// ignored, as the spec requires.
func openCheckpoint(body []byte, l Log) (checkpoint, error) {
	v, err := newVerifier(l.Origin, l.Key)
	if err != nil {
		return checkpoint{}, err
	}
	n, err := note.Open(body, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &invalid):
			return checkpoint{}, fmt.Errorf("%w: checkpoint signature by %q does not verify with the configured key", ErrVerification, l.Origin)
		case errors.As(err, &unverified):
			return checkpoint{}, fmt.Errorf("%w: checkpoint carries no signature by the configured key for origin %q (check ct.logs origin and key)", ErrVerification, l.Origin)
		}
		return checkpoint{}, fmt.Errorf("%w: checkpoint: %v", ErrVerification, err)
	}
	tree, err := parseCheckpointText([]byte(n.Text), l.Origin)
	if err != nil {
		return checkpoint{}, fmt.Errorf("%w: %v", ErrVerification, err)
	}
	if tree.N > maxTreeSize {
		return checkpoint{}, fmt.Errorf("%w: checkpoint tree size %d is larger than a Static CT log can hold (2^40 entries)", ErrVerification, tree.N)
	}
	for _, sig := range n.Sigs {
		if sig.Name != v.name || sig.Hash != v.hash {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig.Base64)
		if err != nil || len(raw) < 12 || !bytes.Equal(raw[:4], binary.BigEndian.AppendUint32(nil, v.hash)) {
			break
		}
		ms := int64(binary.BigEndian.Uint64(raw[4:12]))
		return checkpoint{tree: tree, timestamp: time.UnixMilli(ms).UTC()}, nil
	}
	return checkpoint{}, fmt.Errorf("%w: checkpoint signature has no timestamp", ErrVerification)
}

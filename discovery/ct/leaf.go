package ct

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
	"golang.org/x/mod/sumdb/tlog"
)

// LogEntryType values (RFC 6962, 3.1).
const (
	entryX509    = 0
	entryPrecert = 1
)

// extLeafIndex is the static-ct-api leaf_index SCT extension.
const extLeafIndex = 0

// tileLeaf is one TileLeaf of a data tile (c2sp.org/static-ct-api, "Log
// entries"). Only timestampedEntry is covered by the tree's hashes: the
// precertificate and the chain fingerprints ride along unauthenticated.
type tileLeaf struct {
	timestampedEntry []byte
	timestamp        uint64
	precert          bool
	// der is the certificate of an x509 entry, or the TBSCertificate of a
	// precert entry (the precertificate without its poison extension, and
	// with the final issuer).
	der           []byte
	issuerKeyHash []byte
	leafIndex     int64 // -1 when the entry has no leaf_index extension
	chain         []byte
}

// readTileLeaf reads a TileLeaf from s.
func readTileLeaf(s *cryptobyte.String) (tileLeaf, error) {
	l := tileLeaf{leafIndex: -1}
	start := *s
	var entryType uint16
	var extensions cryptobyte.String
	if !s.ReadUint64(&l.timestamp) || !s.ReadUint16(&entryType) {
		return l, errors.New("truncated timestamped_entry")
	}
	switch entryType {
	case entryX509:
		if !s.ReadUint24LengthPrefixed((*cryptobyte.String)(&l.der)) {
			return l, errors.New("truncated x509_entry")
		}
	case entryPrecert:
		l.precert = true
		if !s.ReadBytes(&l.issuerKeyHash, sha256.Size) || !s.ReadUint24LengthPrefixed((*cryptobyte.String)(&l.der)) {
			return l, errors.New("truncated precert_entry")
		}
	default:
		return l, fmt.Errorf("unknown entry type %d", entryType)
	}
	if !s.ReadUint16LengthPrefixed(&extensions) {
		return l, errors.New("truncated extensions")
	}
	l.timestampedEntry = start[:len(start)-len(*s)]
	for !extensions.Empty() {
		var extType uint8
		var data cryptobyte.String
		if !extensions.ReadUint8(&extType) || !extensions.ReadUint16LengthPrefixed(&data) {
			return l, errors.New("malformed extensions")
		}
		if extType == extLeafIndex {
			var b []byte
			if !data.ReadBytes(&b, 5) || !data.Empty() {
				return l, errors.New("malformed leaf_index extension")
			}
			l.leafIndex = int64(b[0])<<32 | int64(b[1])<<24 | int64(b[2])<<16 | int64(b[3])<<8 | int64(b[4])
		}
	}
	if l.precert {
		var preCertificate cryptobyte.String
		if !s.ReadUint24LengthPrefixed(&preCertificate) {
			return l, errors.New("truncated pre_certificate")
		}
	}
	if !s.ReadUint16LengthPrefixed((*cryptobyte.String)(&l.chain)) || len(l.chain)%sha256.Size != 0 {
		return l, errors.New("malformed certificate_chain")
	}
	return l, nil
}

// leafHash is the Merkle leaf hash of an entry: the record hash of the
// MerkleTreeLeaf (version v1, timestamped_entry leaf type, then the
// TimestampedEntry; RFC 6962, 3.4). buf is scratch space.
func (l *tileLeaf) leafHash(buf []byte) (tlog.Hash, []byte) {
	buf = append(append(buf[:0], 0, 0), l.timestampedEntry...)
	return tlog.RecordHash(buf), buf
}

// candidate is an entry for a watched name, not yet reported: its issuer
// is looked up once its tile has been verified.
type candidate struct {
	entry         Entry
	cert          *x509.Certificate
	issuerKeyHash []byte
	chain         [][sha256.Size]byte
}

// parseCandidate parses the certificate of an entry whose bytes name a
// watched domain, and keeps it if one of its names is watched. It returns
// an error when crypto/x509 cannot parse it.
func (r *Reader) parseCandidate(origin string, index int64, l *tileLeaf) (*candidate, error) {
	der := l.der
	if l.precert {
		var err error
		if der, err = wrapTBS(l.der); err != nil {
			return nil, err
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	names := certNames(cert)
	if !r.Domains.MatchAny(names) {
		return nil, nil
	}
	var id cryptobyte.Builder
	id.AddUint32LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(cert.RawIssuer) })
	id.AddBytes(cert.SerialNumber.Bytes())
	c := &candidate{
		entry: Entry{
			Log:       origin,
			Index:     index,
			Timestamp: time.UnixMilli(int64(l.timestamp)).UTC(),
			Precert:   l.precert,
			Serial:    cert.SerialNumber.Text(16),
			Issuer:    Issuer{Name: cert.Issuer.String(), Organization: cert.Issuer.Organization, CommonName: cert.Issuer.CommonName},
			Names:     names,
			NotBefore: cert.NotBefore,
			NotAfter:  cert.NotAfter,
			ID:        fingerprint(id.BytesOrPanic()),
		},
		cert: cert,
	}
	if l.precert {
		c.issuerKeyHash = append([]byte(nil), l.issuerKeyHash...)
		c.entry.Issuer.KeySHA256 = hex.EncodeToString(l.issuerKeyHash)
	} else {
		c.entry.SHA256 = fingerprint(l.der)
	}
	for fp := range slices.Chunk(l.chain, sha256.Size) {
		c.chain = append(c.chain, [sha256.Size]byte(fp))
	}
	return c, nil
}

// certNames are a certificate's DNS SANs, and its subject common name when
// the SANs do not list it and it looks like a host name.
func certNames(cert *x509.Certificate) []string {
	names := append([]string(nil), cert.DNSNames...)
	cn := cert.Subject.CommonName
	if cn == "" || !looksLikeHostName(cn) {
		return names
	}
	for _, n := range names {
		if n == cn {
			return names
		}
	}
	return append(names, cn)
}

func looksLikeHostName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '.' || c == '-' || c == '*' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// wrapTBS wraps a bare TBSCertificate into a Certificate with an empty
// signature, so that crypto/x509 parses it: the outer signature algorithm
// repeats the TBS's own, as the parser requires.
func wrapTBS(tbs []byte) ([]byte, error) {
	s := cryptobyte.String(tbs)
	var inner, sigAlg cryptobyte.String
	if !s.ReadASN1(&inner, cbasn1.SEQUENCE) || !s.Empty() ||
		!inner.SkipOptionalASN1(cbasn1.Tag(0).Constructed().ContextSpecific()) ||
		!inner.SkipASN1(cbasn1.INTEGER) ||
		!inner.ReadASN1Element(&sigAlg, cbasn1.SEQUENCE) {
		return nil, errors.New("malformed TBSCertificate")
	}
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs)
		b.AddBytes(sigAlg)
		b.AddASN1BitString(nil)
	})
	return b.Bytes()
}

package probes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cryptobyte_asn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// crlEntry is one fetched CRL whose issuer and signature checked out
// against the issuer that asked for it (the cache key names both: the CRL
// alone does not say which certificate's key must have signed it). It
// keeps only what a lookup needs: the CRL's dates and its revoked serials.
type crlEntry struct {
	src        string // "crl URL"
	thisUpdate time.Time
	nextUpdate time.Time
	revoked    revokedSet
}

// maxConcurrentCRLParses bounds the CRLs checked and decoded at once, and
// with them the memory their decoding takes.
const maxConcurrentCRLParses = 2

// crlCheck returns the status of c according to the CRL at url, fetched at
// most once while it is current (see fetchCache), and trusted only when
// issuer signed it. A CRL that is not the issuer's, or whose signature does
// not check out, is a failed fetch: kept for RetryAfter, never until the
// next update it claims, so one forged answer cannot hide a revocation
// for longer than that.
func (rc *revocationChecker) crlCheck(ctx context.Context, url string, c, issuer *x509.Certificate, now time.Time) Revocation {
	sum := sha256.Sum256(issuer.Raw)
	key := url + "\x00" + string(sum[:])
	e, ok, err := rc.crls.peek(key, rc.now())
	if !ok {
		e, err = rc.crls.get(ctx, key, rc.now, func(ctx context.Context) (*crlEntry, time.Time, error) {
			e, err := rc.fetchCRL(ctx, url, issuer)
			until := rc.now().Add(rc.retryAfter)
			if err == nil && e.nextUpdate.After(rc.now()) {
				until = e.nextUpdate
			}
			return e, until, err
		})
	}
	if err != nil {
		return Revocation{Status: RevocationUnavailable, Source: "crl " + url, Error: fmt.Sprintf("crl %s: %v", url, err)}
	}
	r := Revocation{Status: RevocationGood, Source: e.src, ThisUpdate: e.thisUpdate, NextUpdate: e.nextUpdate}
	var buf [32]byte
	if at, reason, ok := e.revoked.lookup(serialContent(c.SerialNumber, buf[:])); ok {
		r.Status, r.RevokedAt, r.Reason = RevocationRevoked, at, reason
		return r
	}
	if !e.nextUpdate.IsZero() && now.After(e.nextUpdate) {
		r.Status = RevocationStale
		r.Error = fmt.Sprintf("crl %s is past its next update (%s)", url, e.nextUpdate.UTC().Format(time.RFC3339))
	}
	return r
}

// fetchCRL fetches the CRL at url and checks that issuer issued and signed
// it before it decodes a single entry; a CRL that does not check out is an
// error.
func (rc *revocationChecker) fetchCRL(ctx context.Context, url string, issuer *x509.Certificate) (*crlEntry, error) {
	der, err := rc.get(ctx, revocationFetch{url: url, limit: rc.maxCRL, what: "the CRL", capName: "revocation.max_crl_bytes"})
	if err != nil {
		return nil, err
	}
	if err := rc.parses.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	defer rc.parses.Release(1)
	crl, err := parseCRL(der, issuer)
	if err != nil {
		var ne *notIssuerError
		if errors.As(err, &ne) {
			return nil, fmt.Errorf("%v; not trusted, fetched again after the retry interval (%v)", err, rc.retryAfter)
		}
		return nil, err
	}
	return &crlEntry{src: "crl " + url, thisUpdate: crl.ThisUpdate, nextUpdate: crl.NextUpdate, revoked: crl.revoked}, nil
}

// size is the memory e holds, for the cache's budget.
func (e *crlEntry) size() int64 {
	const overhead = 256 // the entry, its cache entry and key
	return overhead + int64(len(e.src)) + e.revoked.size()
}

// checkedCRL is a CRL whose issuer and signature checked out, with its
// revoked certificates decoded.
type checkedCRL struct {
	ThisUpdate, NextUpdate time.Time
	revoked                revokedSet
}

// notIssuerError is a CRL that is not the issuer's, or not signed by it.
type notIssuerError struct{ msg string }

func (e *notIssuerError) Error() string { return e.msg }

// parseCRL checks that der is a CRL issuer issued and signed, and only
// then decodes its revoked certificates. x509.ParseRevocationList decodes
// every entry (several hundred bytes each once decoded) before anyone can
// check the signature, so a forged CRL near max_crl_bytes cost hundreds of
// megabytes; here the entries of a CRL that does not check out are never
// read, and those of one that does are kept in a revokedSet.
//
// The outer structure is read with cryptobyte, without a copy; the CRL
// without its entries (a few hundred bytes) is handed to
// x509.ParseRevocationList for its header, so the signature algorithm,
// the issuer's name and the dates are read exactly as crypto/x509 reads
// them, and the signature is checked over the original signed bytes.
func parseCRL(der []byte, issuer *x509.Certificate) (*checkedCRL, error) {
	h, err := parseCRLHeader(der)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(h.list.RawIssuer, issuer.RawSubject) {
		return nil, &notIssuerError{fmt.Sprintf("it is not signed by %q, the certificate's issuer: its issuer is %q", certName(issuer), h.list.Issuer.String())}
	}
	if err := h.list.CheckSignatureFrom(issuer); err != nil {
		return nil, &notIssuerError{fmt.Sprintf("it is not signed by %q, the certificate's issuer: %v", certName(issuer), err)}
	}
	set, err := walkRevoked(h.revoked)
	if err != nil {
		return nil, err
	}
	return &checkedCRL{ThisUpdate: h.list.ThisUpdate, NextUpdate: h.list.NextUpdate, revoked: set}, nil
}

// crlHeader is a CRL read down to its entries, which are left undecoded.
type crlHeader struct {
	// list is the CRL as x509.ParseRevocationList reads it without its
	// entries, with RawTBSRevocationList set to the original signed bytes,
	// so that CheckSignatureFrom checks the CRL as it was signed.
	list *x509.RevocationList
	// revoked is the contents of revokedCertificates (RFC 5280, 5.1):
	// a series of entries, not yet walked.
	revoked cryptobyte.String
}

// maxCRLHeaderBytes caps a CRL without its entries: its issuer's name,
// dates, extensions and signature, a few hundred bytes in practice.
const maxCRLHeaderBytes = 64 << 10

// parseCRLHeader reads the structure of RFC 5280, 5.1, without decoding
// the entries of revokedCertificates:
//
//	CertificateList ::= SEQUENCE { tbsCertList, signatureAlgorithm, signatureValue }
//	TBSCertList ::= SEQUENCE { version, signature, issuer, thisUpdate,
//	    nextUpdate OPTIONAL, revokedCertificates SEQUENCE OF ... OPTIONAL,
//	    crlExtensions [0] EXPLICIT OPTIONAL }
//
// It is stricter than crypto/x509, which ignores what follows the last
// element it knows of: here nothing may follow, so that no bytes but the
// entries are left unread, and the rest (the header) is capped at
// maxCRLHeaderBytes before crypto/x509 decodes it.
func parseCRLHeader(der []byte) (*crlHeader, error) {
	input := cryptobyte.String(der)
	var outer, tbsElem, tbs, sigAI, sig cryptobyte.String
	if !input.ReadASN1(&outer, cryptobyte_asn1.SEQUENCE) {
		return nil, errors.New("malformed crl")
	}
	if !outer.ReadASN1Element(&tbsElem, cryptobyte_asn1.SEQUENCE) {
		return nil, errors.New("malformed crl: its signed part (tbsCertList)")
	}
	if !outer.ReadASN1Element(&sigAI, cryptobyte_asn1.SEQUENCE) || !outer.ReadASN1Element(&sig, cryptobyte_asn1.BIT_STRING) || !outer.Empty() {
		return nil, errors.New("malformed crl: its signature")
	}
	tbs = tbsElem
	if !tbs.ReadASN1(&tbs, cryptobyte_asn1.SEQUENCE) {
		return nil, errors.New("malformed crl: its signed part (tbsCertList)")
	}
	rest := tbs
	if !rest.SkipASN1(cryptobyte_asn1.INTEGER) {
		return nil, errors.New("malformed crl: no version 2 (version 1 CRLs are not supported)")
	}
	if !rest.SkipASN1(cryptobyte_asn1.SEQUENCE) {
		return nil, errors.New("malformed crl: its signature algorithm")
	}
	if !rest.SkipASN1(cryptobyte_asn1.SEQUENCE) {
		return nil, errors.New("malformed crl: its issuer")
	}
	for i := range 2 { // thisUpdate, and nextUpdate when present
		switch {
		case rest.PeekASN1Tag(cryptobyte_asn1.UTCTime):
			rest.SkipASN1(cryptobyte_asn1.UTCTime)
		case rest.PeekASN1Tag(cryptobyte_asn1.GeneralizedTime):
			rest.SkipASN1(cryptobyte_asn1.GeneralizedTime)
		case i == 0:
			return nil, errors.New("malformed crl: its this update")
		}
	}
	head := tbs[:len(tbs)-len(rest)]
	var revoked, exts cryptobyte.String
	if rest.PeekASN1Tag(cryptobyte_asn1.SEQUENCE) && !rest.ReadASN1(&revoked, cryptobyte_asn1.SEQUENCE) {
		return nil, errors.New("malformed crl: its revoked certificates")
	}
	extsTag := cryptobyte_asn1.Tag(0).Constructed().ContextSpecific()
	if rest.PeekASN1Tag(extsTag) && !rest.ReadASN1Element(&exts, extsTag) {
		return nil, errors.New("malformed crl: its extensions")
	}
	if !rest.Empty() {
		return nil, errors.New("malformed crl: data after its extensions")
	}
	if n := len(head) + len(exts) + len(sigAI) + len(sig); n > maxCRLHeaderBytes {
		return nil, fmt.Errorf("malformed crl: %d bytes besides its entries, more than %d", n, maxCRLHeaderBytes)
	}
	// The CRL without its entries, for crypto/x509 to read the header of
	// as it would read the whole.
	var b cryptobyte.Builder
	b.AddASN1(cryptobyte_asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cryptobyte_asn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddBytes(head)
			b.AddBytes(exts)
		})
		b.AddBytes(sigAI)
		b.AddBytes(sig)
	})
	stripped, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("malformed crl: %w", err)
	}
	list, err := x509.ParseRevocationList(stripped)
	if err != nil {
		return nil, err
	}
	list.Raw, list.RawTBSRevocationList = nil, tbsElem
	return &crlHeader{list: list, revoked: revoked}, nil
}

// revokedSet is the revoked certificates of a CRL, as compact as a lookup
// by serial allows: about 14 bytes plus the serial per entry, where
// x509.RevocationListEntry keeps several hundred.
type revokedSet struct {
	// recs holds one record per entry: the serial's length (1 byte), the
	// serial (the contents of its DER INTEGER), the revocation time (Unix
	// seconds, 8 bytes big-endian) and the reason code (1 byte; 0 when
	// none is given).
	recs []byte
	// offs are the offsets of the records in recs, ordered by serial
	// (see compareSerials).
	offs []uint32
}

const (
	oidReasonCodeDER = "\x55\x1d\x15" // id-ce-cRLReasons, 2.5.29.21
	maxSerialLen     = 255
)

// walkRevoked decodes the entries of revokedCertificates. A first pass
// checks the structure and counts, so the records take one allocation of
// their exact size; the second decodes.
//
//	SEQUENCE { userCertificate INTEGER, revocationDate Time,
//	           crlEntryExtensions Extensions OPTIONAL }
func walkRevoked(s cryptobyte.String) (revokedSet, error) {
	if len(s) > math.MaxUint32 {
		return revokedSet{}, errors.New("malformed crl: too large")
	}
	n, size := 0, 0
	for rest := s; !rest.Empty(); n++ {
		var entry, serial cryptobyte.String
		if !rest.ReadASN1(&entry, cryptobyte_asn1.SEQUENCE) || !entry.ReadASN1(&serial, cryptobyte_asn1.INTEGER) {
			return revokedSet{}, fmt.Errorf("malformed crl: entry %d", n+1)
		}
		if !validInteger(serial) {
			return revokedSet{}, fmt.Errorf("malformed crl: the serial number of entry %d", n+1)
		}
		if len(serial) > maxSerialLen {
			return revokedSet{}, fmt.Errorf("crl entry %d: a serial number of %d bytes, more than %d", n+1, len(serial), maxSerialLen)
		}
		size += 1 + len(serial) + 8 + 1
	}
	set := revokedSet{recs: make([]byte, 0, size), offs: make([]uint32, 0, n)}
	sorted := true
	for i := 0; !s.Empty(); i++ {
		var entry, serial cryptobyte.String
		s.ReadASN1(&entry, cryptobyte_asn1.SEQUENCE)
		entry.ReadASN1(&serial, cryptobyte_asn1.INTEGER)
		at, err := parseCRLTime(&entry)
		if err != nil {
			return revokedSet{}, fmt.Errorf("malformed crl: the revocation date of entry %d: %v", i+1, err)
		}
		reason, err := entryReason(&entry)
		if err != nil {
			return revokedSet{}, fmt.Errorf("malformed crl: entry %d: %v", i+1, err)
		}
		off := uint32(len(set.recs))
		set.recs = append(set.recs, byte(len(serial)))
		set.recs = append(set.recs, serial...)
		set.recs = binary.BigEndian.AppendUint64(set.recs, uint64(at.Unix()))
		set.recs = append(set.recs, reason)
		if sorted && i > 0 && compareSerials(set.serialAt(set.offs[i-1]), serial) > 0 {
			sorted = false
		}
		set.offs = append(set.offs, off)
	}
	if !sorted {
		slices.SortFunc(set.offs, func(a, b uint32) int { return compareSerials(set.serialAt(a), set.serialAt(b)) })
	}
	return set, nil
}

// parseCRLTime reads a UTCTime or GeneralizedTime, as crypto/x509 does.
func parseCRLTime(s *cryptobyte.String) (time.Time, error) {
	if t, ok := fastCRLTime(s); ok {
		return t, nil
	}
	var t time.Time
	switch {
	case s.PeekASN1Tag(cryptobyte_asn1.UTCTime):
		if !s.ReadASN1UTCTime(&t) {
			return t, errors.New("malformed UTCTime")
		}
	case s.PeekASN1Tag(cryptobyte_asn1.GeneralizedTime):
		if !s.ReadASN1GeneralizedTime(&t) {
			return t, errors.New("malformed GeneralizedTime")
		}
	default:
		return t, errors.New("not a time")
	}
	return t, nil
}

// fastCRLTime reads, without allocating, the two forms of a time RFC
// 5280 (4.1.2.5) requires, YYMMDDHHMMSSZ (UTCTime) and YYYYMMDDHHMMSSZ
// (GeneralizedTime), to the same time cryptobyte reads them as; for
// anything else it reports false and consumes nothing. A CRL holds one
// per entry, and time.Parse allocated for each.
func fastCRLTime(s *cryptobyte.String) (time.Time, bool) {
	b := []byte(*s)
	var year int
	switch {
	case len(b) >= 15 && b[0] == 0x17 && b[1] == 13 && b[14] == 'Z': // UTCTime
		yy, ok := digits(b[2:4])
		if !ok {
			return time.Time{}, false
		}
		year, b = 1900+yy, b[4:14]
		if yy < 50 {
			year += 100
		}
	case len(b) >= 17 && b[0] == 0x18 && b[1] == 15 && b[16] == 'Z': // GeneralizedTime
		yyyy, ok := digits(b[2:6])
		if !ok {
			return time.Time{}, false
		}
		year, b = yyyy, b[6:16]
	default:
		return time.Time{}, false
	}
	var f [5]int // month, day, hour, minute, second
	for i := range f {
		v, ok := digits(b[2*i : 2*i+2])
		if !ok {
			return time.Time{}, false
		}
		f[i] = v
	}
	mon, day, hour, minute, sec := f[0], f[1], f[2], f[3], f[4]
	if mon < 1 || mon > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 ||
		day > time.Date(year, time.Month(mon)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return time.Time{}, false
	}
	s.Skip(2 + int((*s)[1]))
	return time.Date(year, time.Month(mon), day, hour, minute, sec, 0, time.UTC), true
}

// digits returns the value of b, ASCII decimal digits only.
func digits(b []byte) (int, bool) {
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// entryReason returns the reason code (RFC 5280, 5.3.1) among the
// extensions that may end an entry, or 0.
func entryReason(entry *cryptobyte.String) (byte, error) {
	var exts cryptobyte.String
	var present bool
	if !entry.ReadOptionalASN1(&exts, &present, cryptobyte_asn1.SEQUENCE) {
		return 0, errors.New("malformed extensions")
	}
	var reason byte
	for !exts.Empty() {
		var ext, oid, val cryptobyte.String
		if !exts.ReadASN1(&ext, cryptobyte_asn1.SEQUENCE) || !ext.ReadASN1(&oid, cryptobyte_asn1.OBJECT_IDENTIFIER) {
			return 0, errors.New("malformed extension")
		}
		if ext.PeekASN1Tag(cryptobyte_asn1.BOOLEAN) && !ext.SkipASN1(cryptobyte_asn1.BOOLEAN) {
			return 0, errors.New("malformed extension")
		}
		if !ext.ReadASN1(&val, cryptobyte_asn1.OCTET_STRING) {
			return 0, errors.New("malformed extension")
		}
		if string(oid) == oidReasonCodeDER {
			var r int
			if !val.ReadASN1Enum(&r) || r < 0 || r > math.MaxUint8 {
				return 0, errors.New("malformed reason code")
			}
			reason = byte(r)
		}
	}
	return reason, nil
}

// validInteger reports whether b is the contents of a DER INTEGER: not
// empty, and minimally encoded.
func validInteger(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	if len(b) == 1 {
		return true
	}
	return !(b[0] == 0 && b[1]&0x80 == 0) && !(b[0] == 0xff && b[1]&0x80 == 0x80)
}

// compareSerials orders serials (DER INTEGER contents) shorter first, then
// bytewise: for positive serials, the order of their values, which most
// CRLs list them in already.
func compareSerials(a, b []byte) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return bytes.Compare(a, b)
}

func (s *revokedSet) serialAt(off uint32) []byte {
	n := uint32(s.recs[off])
	return s.recs[off+1 : off+1+n]
}

// lookup returns when and why serial (DER INTEGER contents) was revoked,
// if the set holds it.
func (s *revokedSet) lookup(serial []byte) (time.Time, int, bool) {
	i, ok := slices.BinarySearchFunc(s.offs, serial, func(off uint32, serial []byte) int {
		return compareSerials(s.serialAt(off), serial)
	})
	if !ok {
		return time.Time{}, 0, false
	}
	off := s.offs[i]
	rec := s.recs[off+1+uint32(s.recs[off]):]
	return time.Unix(int64(binary.BigEndian.Uint64(rec)), 0).UTC(), int(rec[8]), true
}

// len is the number of entries in s.
func (s *revokedSet) len() int { return len(s.offs) }

// size is the memory s holds.
func (s *revokedSet) size() int64 { return int64(cap(s.recs)) + 4*int64(cap(s.offs)) }

// serialContent returns the contents of the DER INTEGER encoding n, as
// CRL entries carry serials, in buf when it fits.
func serialContent(n *big.Int, buf []byte) []byte {
	if n.Sign() > 0 {
		// Room for a sign bit: a leading zero byte when the top bit of
		// the value's first byte is set.
		if l := n.BitLen()/8 + 1; l <= len(buf) {
			return n.FillBytes(buf[:l])
		}
	}
	der, err := asn1.Marshal(n)
	if err != nil { // only for a nil n
		return nil
	}
	var s cryptobyte.String = der
	var content cryptobyte.String
	s.ReadASN1(&content, cryptobyte_asn1.INTEGER)
	return content
}

package probes

import (
	"crypto/x509"
	"encoding/asn1"
	"time"

	"golang.org/x/crypto/cryptobyte"
)

// oidSCTList is the embedded SCT list extension (RFC 6962, 3.3).
var oidSCTList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}

// EarliestSCT returns the earliest timestamp of the signed certificate
// timestamps embedded in c (RFC 6962, 3.3), and whether it has any. The
// SCTs' signatures are not checked: the timestamp places the certificate
// on one side of a distrust date, which browsers judge by the same field.
// A list that does not parse counts as none.
func EarliestSCT(c *x509.Certificate) (time.Time, bool) {
	for _, ext := range c.Extensions {
		if !ext.Id.Equal(oidSCTList) {
			continue
		}
		var raw []byte
		if rest, err := asn1.Unmarshal(ext.Value, &raw); err != nil || len(rest) > 0 {
			return time.Time{}, false
		}
		return earliestSCT(raw)
	}
	return time.Time{}, false
}

// earliestSCT reads a TLS-encoded SignedCertificateTimestampList.
func earliestSCT(raw []byte) (time.Time, bool) {
	in := cryptobyte.String(raw)
	var list cryptobyte.String
	if !in.ReadUint16LengthPrefixed(&list) || !in.Empty() {
		return time.Time{}, false
	}
	var earliest uint64
	found := false
	for !list.Empty() {
		var sct cryptobyte.String
		var version uint8
		var ms uint64
		if !list.ReadUint16LengthPrefixed(&sct) || !sct.ReadUint8(&version) {
			return time.Time{}, false
		}
		if version != 0 || !sct.Skip(32) || !sct.ReadUint64(&ms) {
			continue // an SCT version this reader does not know
		}
		if !found || ms < earliest {
			earliest, found = ms, true
		}
	}
	if !found {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(earliest)).UTC(), true
}

package certtest

import (
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/asn1"
	"time"

	"golang.org/x/crypto/cryptobyte"
)

// oidSCTList is the embedded SCT list extension (RFC 6962, 3.3).
var oidSCTList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}

// SCTList returns the extension of an embedded SignedCertificateTimestampList
// (RFC 6962, 3.3) with one v1 SCT per timestamp, from made-up logs and with
// made-up signatures: encoded as a CA embeds it, for what reads the
// timestamps, not for verification.
func SCTList(timestamps ...time.Time) pkix.Extension {
	var list cryptobyte.Builder
	list.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for i, ts := range timestamps {
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				b.AddUint8(0) // v1
				logID := sha256.Sum256([]byte{byte(i)})
				b.AddBytes(logID[:])
				b.AddUint64(uint64(ts.UnixMilli()))
				b.AddUint16LengthPrefixed(func(*cryptobyte.Builder) {}) // no extensions
				b.AddUint8(4)                                           // sha256
				b.AddUint8(3)                                           // ecdsa
				b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(make([]byte, 70)) })
			})
		}
	})
	// The extension's value is an OCTET STRING holding the TLS-encoded list.
	value, err := asn1.Marshal(list.BytesOrPanic())
	if err != nil {
		panic(err)
	}
	return pkix.Extension{Id: oidSCTList, Value: value}
}

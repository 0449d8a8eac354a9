package cttest

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/certwatch/certwatch/internal/certtest"
)

// oidPoison is the precertificate poison extension (RFC 6962, 3.1).
var oidPoison = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 3}

// Precert issues the precertificate of final, signed by ca: the same
// serial, subject, names, validity and key, with the critical poison
// extension. final's SCT list (and other extensions Go makes itself) are
// left out, as a CA logs a precertificate before embedding SCTs.
func Precert(ca *certtest.CA, final *x509.Certificate) ([]byte, error) {
	tmpl := *final
	tmpl.ExtraExtensions = []pkix.Extension{{Id: oidPoison, Critical: true, Value: []byte{0x05, 0x00}}}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.Cert, final.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("precertificate of %q: %w", final.Subject.CommonName, err)
	}
	return der, nil
}

// precertTBS is the TBSCertificate a log puts in a precert entry: the
// precertificate's, without the poison extension (RFC 6962, 3.2).
func precertTBS(precert []byte) ([]byte, error) {
	cert, err := x509.ParseCertificate(precert)
	if err != nil {
		return nil, fmt.Errorf("precertificate: %w", err)
	}
	in := cryptobyte.String(cert.RawTBSCertificate)
	var fields cryptobyte.String
	if !in.ReadASN1(&fields, cbasn1.SEQUENCE) {
		return nil, fmt.Errorf("precertificate: malformed TBSCertificate")
	}
	extensionsTag := cbasn1.Tag(3).Constructed().ContextSpecific()
	var b cryptobyte.Builder
	var poisoned bool
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		for !fields.Empty() {
			var field cryptobyte.String
			var tag cbasn1.Tag
			if !fields.ReadAnyASN1Element(&field, &tag) {
				b.SetError(fmt.Errorf("precertificate: malformed TBSCertificate"))
				return
			}
			if tag != extensionsTag {
				b.AddBytes(field)
				continue
			}
			var explicit, exts cryptobyte.String
			if !field.ReadASN1(&explicit, extensionsTag) || !explicit.ReadASN1(&exts, cbasn1.SEQUENCE) {
				b.SetError(fmt.Errorf("precertificate: malformed extensions"))
				return
			}
			b.AddASN1(extensionsTag, func(b *cryptobyte.Builder) {
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					for !exts.Empty() {
						var ext, body cryptobyte.String
						var oid asn1.ObjectIdentifier
						if !exts.ReadASN1Element(&ext, cbasn1.SEQUENCE) {
							b.SetError(fmt.Errorf("precertificate: malformed extension"))
							return
						}
						body = ext
						if body.ReadASN1(&body, cbasn1.SEQUENCE) && body.ReadASN1ObjectIdentifier(&oid) && oid.Equal(oidPoison) {
							poisoned = true
							continue
						}
						b.AddBytes(ext)
					}
				})
			})
		}
	})
	tbs, err := b.Bytes()
	if err != nil {
		return nil, err
	}
	if !poisoned {
		return nil, fmt.Errorf("precertificate has no poison extension")
	}
	return tbs, nil
}

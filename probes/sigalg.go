package probes

import (
	"crypto/x509"
	"encoding/asn1"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// postQuantumSignatures names the post-quantum signature algorithms by
// their OIDs (NIST CSOR, 2.16.840.1.101.3.4.3): ML-DSA (FIPS 204) and
// SLH-DSA (FIPS 205), which crypto/x509 reports only as unknown.
var postQuantumSignatures = map[string]string{
	"2.16.840.1.101.3.4.3.17": "ML-DSA-44",
	"2.16.840.1.101.3.4.3.18": "ML-DSA-65",
	"2.16.840.1.101.3.4.3.19": "ML-DSA-87",
	"2.16.840.1.101.3.4.3.20": "SLH-DSA-SHA2-128s",
	"2.16.840.1.101.3.4.3.21": "SLH-DSA-SHA2-128f",
	"2.16.840.1.101.3.4.3.22": "SLH-DSA-SHA2-192s",
	"2.16.840.1.101.3.4.3.23": "SLH-DSA-SHA2-192f",
	"2.16.840.1.101.3.4.3.24": "SLH-DSA-SHA2-256s",
	"2.16.840.1.101.3.4.3.25": "SLH-DSA-SHA2-256f",
	"2.16.840.1.101.3.4.3.26": "SLH-DSA-SHAKE-128s",
	"2.16.840.1.101.3.4.3.27": "SLH-DSA-SHAKE-128f",
	"2.16.840.1.101.3.4.3.28": "SLH-DSA-SHAKE-192s",
	"2.16.840.1.101.3.4.3.29": "SLH-DSA-SHAKE-192f",
	"2.16.840.1.101.3.4.3.30": "SLH-DSA-SHAKE-256s",
	"2.16.840.1.101.3.4.3.31": "SLH-DSA-SHAKE-256f",
}

// SignatureAlgorithm names the algorithm c is signed with: crypto/x509's
// name ("SHA256-RSA", "ECDSA-SHA384", "Ed25519"), the FIPS name of a
// post-quantum one crypto/x509 does not know ("ML-DSA-65",
// "SLH-DSA-SHA2-128s"), or the OID of any other ("1.2.3.4").
func SignatureAlgorithm(c *x509.Certificate) string {
	if c.SignatureAlgorithm != x509.UnknownSignatureAlgorithm {
		return c.SignatureAlgorithm.String()
	}
	oid, ok := signatureOID(c.Raw)
	if !ok {
		return c.SignatureAlgorithm.String()
	}
	if name, ok := postQuantumSignatures[oid.String()]; ok {
		return name
	}
	return oid.String()
}

// signatureOID reads the OID of a DER certificate's outer
// signatureAlgorithm (RFC 5280, 4.1.1.2).
func signatureOID(der []byte) (asn1.ObjectIdentifier, bool) {
	in := cryptobyte.String(der)
	var cert, algo cryptobyte.String
	var oid asn1.ObjectIdentifier
	if !in.ReadASN1(&cert, cbasn1.SEQUENCE) ||
		!cert.SkipASN1(cbasn1.SEQUENCE) || // tbsCertificate
		!cert.ReadASN1(&algo, cbasn1.SEQUENCE) ||
		!algo.ReadASN1ObjectIdentifier(&oid) {
		return nil, false
	}
	return oid, true
}

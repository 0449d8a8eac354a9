package files_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/certwatch/certwatch/discovery/files"
)

// PKCS#12 object identifiers the hostile files are built of.
var (
	oidData          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidEncryptedData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 6}
	oidCertBag       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 3}
	oidShroudedKey   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
	oidX509Cert      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 22, 1}
	oidPBES2         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidPBMAC1        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 14}
	oidHMACSHA256    = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidAES256CBC     = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

func mustDER(t *testing.T, v any, params ...string) []byte {
	t.Helper()
	var b []byte
	var err error
	if len(params) > 0 {
		b, err = asn1.MarshalWithParams(v, params[0])
	} else {
		b, err = asn1.Marshal(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func explicit0(t *testing.T, der []byte) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: der}
}

type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"optional"`
}

type safeBag struct {
	ID    asn1.ObjectIdentifier
	Value asn1.RawValue
}

// pbkdf2Alg is the PBKDF2-HMAC-SHA-256 AlgorithmIdentifier of iter
// iterations, with keyLen when it is not zero.
func pbkdf2Alg(t *testing.T, salt []byte, iter int64, keyLen int) pkix.AlgorithmIdentifier {
	params := struct {
		Salt       []byte
		Iterations int64
		KeyLength  int `asn1:"optional"`
		PRF        pkix.AlgorithmIdentifier
	}{salt, iter, keyLen, pkix.AlgorithmIdentifier{Algorithm: oidHMACSHA256, Parameters: asn1.NullRawValue}}
	return pkix.AlgorithmIdentifier{Algorithm: oidPBKDF2, Parameters: asn1.RawValue{FullBytes: mustDER(t, params)}}
}

// pbes2 is the PBES2 (PBKDF2-HMAC-SHA-256, AES-256-CBC) AlgorithmIdentifier
// of iter iterations and the key and IV it gives pass (unless iter is too
// many to derive it: then none).
func pbes2(t *testing.T, pass string, iter int64) (pkix.AlgorithmIdentifier, []byte, []byte) {
	salt, iv := []byte("saltsalt"), []byte("0123456789abcdef")
	params := struct{ KDF, Enc pkix.AlgorithmIdentifier }{
		pbkdf2Alg(t, salt, iter, 0),
		pkix.AlgorithmIdentifier{Algorithm: oidAES256CBC, Parameters: asn1.RawValue{FullBytes: mustDER(t, iv)}},
	}
	alg := pkix.AlgorithmIdentifier{Algorithm: oidPBES2, Parameters: asn1.RawValue{FullBytes: mustDER(t, params)}}
	if iter > 1_000_000 {
		return alg, nil, iv
	}
	key, err := pbkdf2.Key(sha256.New, pass, salt, int(iter), 32)
	if err != nil {
		t.Fatal(err)
	}
	return alg, key, iv
}

// pfx builds a PKCS#12 file as anyone may write one: its safe bags in one
// content encrypted under pass with encIter PBES2 iterations (in a plain
// data content when encIter is 0), MAC'd by PBMAC1 (HMAC-SHA-256) with
// macIter iterations.
func pfx(t *testing.T, pass string, macIter, encIter int64, bags ...safeBag) []byte {
	safeContents := mustDER(t, bags)
	var content contentInfo
	if encIter == 0 {
		content = contentInfo{oidData, explicit0(t, mustDER(t, safeContents))}
	} else {
		alg, key, iv := pbes2(t, pass, encIter)
		pad := aes.BlockSize - len(safeContents)%aes.BlockSize
		plain := append(safeContents, make([]byte, pad)...)
		for i := len(safeContents); i < len(plain); i++ {
			plain[i] = byte(pad)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		sealed := make([]byte, len(plain))
		cipher.NewCBCEncrypter(block, iv).CryptBlocks(sealed, plain)
		type encryptedContentInfo struct {
			ContentType asn1.ObjectIdentifier
			Algorithm   pkix.AlgorithmIdentifier
			Content     []byte `asn1:"tag:0"`
		}
		encrypted := struct {
			Version int
			Info    encryptedContentInfo
		}{0, encryptedContentInfo{oidData, alg, sealed}}
		content = contentInfo{oidEncryptedData, explicit0(t, mustDER(t, encrypted))}
	}
	authSafe := mustDER(t, []contentInfo{content})
	salt := []byte("macsaltmacsalt")
	macKey, err := pbkdf2.Key(sha256.New, pass, salt, int(macIter), 32)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, macKey)
	mac.Write(authSafe)
	macParams := struct{ KDF, MAC pkix.AlgorithmIdentifier }{
		pbkdf2Alg(t, salt, macIter, 32),
		pkix.AlgorithmIdentifier{Algorithm: oidHMACSHA256, Parameters: asn1.NullRawValue},
	}
	type digestInfo struct {
		Algorithm pkix.AlgorithmIdentifier
		Digest    []byte
	}
	type macData struct {
		Mac        digestInfo
		Salt       []byte
		Iterations int
	}
	return mustDER(t, struct {
		Version  int
		AuthSafe contentInfo
		MacData  macData
	}{3, contentInfo{oidData, explicit0(t, mustDER(t, authSafe))}, macData{
		digestInfo{pkix.AlgorithmIdentifier{Algorithm: oidPBMAC1, Parameters: asn1.RawValue{FullBytes: mustDER(t, macParams)}}, mac.Sum(nil)},
		salt, 1,
	}})
}

func certBag(t *testing.T, der []byte) safeBag {
	inner := struct {
		ID   asn1.ObjectIdentifier
		Data asn1.RawValue
	}{oidX509Cert, explicit0(t, mustDER(t, der))}
	return safeBag{oidCertBag, explicit0(t, mustDER(t, inner))}
}

// keyBag is a PKCS#8 shrouded key bag asking for iter PBES2 iterations;
// what it holds is never decrypted.
func keyBag(t *testing.T, iter int64) safeBag {
	alg, _, _ := pbes2(t, "", iter)
	info := struct {
		Algorithm pkix.AlgorithmIdentifier
		Data      []byte
	}{alg, make([]byte, 32)}
	return safeBag{oidShroudedKey, explicit0(t, mustDER(t, info))}
}

// TestHostilePKCS12: a PKCS#12 file asking for 2^62 MAC iterations (which
// kept a core busy for as long as the daemon ran), or whose key entry,
// inside an encrypted content under the empty passphrase, asks for 2^40,
// is an error naming the file and the count, and so is one whose counts
// are each within the bound but whose passphrases tried would run more
// than the per-file bound in all. A real file's counts pass.
func TestHostilePKCS12(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()

	// 2^62 MAC iterations in a keystore otherwise as go-pkcs12 (and
	// OpenSSL 3) writes it.
	real, err := pkcs12.Modern2023.Encode(p.leaf.Key, p.leaf.Cert, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var pdu struct {
		Version  int
		AuthSafe asn1.RawValue
		MacData  struct {
			Mac        asn1.RawValue
			Salt       []byte
			Iterations int64
		}
	}
	if rest, err := asn1.Unmarshal(real, &pdu); err != nil || len(rest) > 0 {
		t.Fatalf("go-pkcs12's keystore: %v", err)
	}
	pdu.MacData.Iterations = 1 << 62
	macBomb := mustDER(t, pdu)

	for name, tc := range map[string]struct {
		b    []byte
		says []string
		took time.Duration
	}{
		"MAC iterations": {macBomb, []string{"PKCS#12 keystore", "its MAC asks for 4611686018427387904 iterations", "1000000"}, time.Second},
		"key iterations in an encrypted content": {
			pfx(t, "", 2048, 2048, certBag(t, p.leaf.Cert.Raw), keyBag(t, 1<<40)),
			[]string{"PKCS#12 keystore", "a key asks for 1099511627776 iterations", "1000000"},
			time.Second,
		},
		"key iterations": {
			pfx(t, "", 2048, 0, certBag(t, p.leaf.Cert.Raw), keyBag(t, 1<<40)),
			[]string{"PKCS#12 keystore", "a key asks for 1099511627776 iterations", "1000000"},
			time.Second,
		},
		"passphrases tried": {
			// Within the bound each, but tried under the empty
			// passphrase then Java's default, past the bound in all.
			// It runs the per-file bound by design: some 1.7 s of
			// PBKDF2 here, 13 s under the race detector.
			pfx(t, "changeit", 1_000_000, 1_000_000, certBag(t, p.leaf.Cert.Raw)),
			[]string{"PKCS#12 keystore", "more than 4000000 iterations in all", "passphrase"},
			10 * time.Second,
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".p12")
			write(t, path, tc.b)
			took, allocated, err := hostile(t, files.Config{Groups: []files.Group{{Globs: []string{path}}}}, 2*slowdown*tc.took)
			wantRefused(t, err, path, tc.says...)
			if took > slowdown*tc.took || allocated > 4<<20 {
				t.Errorf("refusing it took %v and %d bytes, want under %v and 4 MiB", took, allocated, slowdown*tc.took)
			}
		})
	}

	// Keystores as tools write them, under the empty passphrase and
	// Java's default: legacy RC2 and 3DES contents, AES ones, PBMAC1, and
	// Java's counts (10,000 iterations each). Each is read, its chain
	// whole: their encrypted contents are decrypted to count their keys.
	for name, enc := range map[string]*pkcs12.Encoder{
		"LegacyRC2":  pkcs12.LegacyRC2,
		"LegacyDES":  pkcs12.LegacyDES,
		"Modern2023": pkcs12.Modern2023,
		"Modern2026": pkcs12.Modern2026,
		"Java":       pkcs12.Modern2023.WithIterations(10_000),
	} {
		for _, pass := range []string{"", "changeit"} {
			b, err := enc.Encode(p.leaf.Key, p.leaf.Cert, []*x509.Certificate{p.inter.Cert}, pass)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name+pass+".p12")
			write(t, path, b)
			certs, _, err := discover(t, files.Config{Groups: []files.Group{{Globs: []string{path}}}})
			if err != nil || len(certs) != 2 {
				t.Errorf("%s under %q: %d certificates, err %v; want the leaf and its intermediate", name, pass, len(certs), err)
			}
		}
	}
}

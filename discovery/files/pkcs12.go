package files

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"unicode/utf16"

	"github.com/deatil/go-cryptobin/cipher/rc2"
	"github.com/deatil/go-cryptobin/kdf/pbkdf"
)

// maxPKCS12Iterations is the most key-derivation iterations one count of
// a PKCS#12 keystore (its MAC's, an encrypted content's, a key's) may ask
// for. go-pkcs12 runs whatever a file states, with no way to stop: 2^62
// kept a core busy for as long as the daemon ran. Tools write 2048
// (OpenSSL), 10,000 (Java since 12), 50,000 and 100,000 (older Java),
// 600,000 (OWASP's advice for PBKDF2-SHA-256, with openssl -iter); a
// million takes 0.4 s (PBKDF2-SHA-256) to 1.7 s (PKCS#12's own KDF, for
// 3DES) of one core.
const maxPKCS12Iterations = 1_000_000

// maxPKCS12Work is the most key-derivation iterations opening one
// PKCS#12 keystore may run in all, over every passphrase tried (the
// empty one, twice over as go-pkcs12 does, then Java's default, when none
// is given) and every pass over the file: a keystore whose counts are
// each within maxPKCS12Iterations is still refused once trying it would
// run past this: 2 to 7 s of one core. A keystore Java writes takes
// some 40,000 under its passphrase, 100,000 tried under the empty one
// first; one of a million iterations a count opens under its passphrase
// alone.
const maxPKCS12Work = 4 * maxPKCS12Iterations

// Object identifiers of PKCS#12 and the password-based schemes it uses.
var (
	oidP12Data          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidP12EncryptedData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 6}
	oidP12ShroudedKey   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
	oidPBEWith3DES      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 3}
	oidPBEWithRC2128    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 5}
	oidPBEWithRC240     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 6}
	oidPBES2            = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2           = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidPBMAC1           = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 14}
	oidHMACSHA1         = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256       = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA512       = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC        = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

// The shapes go-pkcs12 reads, field for field, but for iteration counts,
// read whatever their size: what the walk cannot read, the library cannot
// either, so nothing the library would run goes unseen.
type (
	p12PDU struct {
		Version  int
		AuthSafe p12ContentInfo
		MacData  p12MacData `asn1:"optional"`
	}
	p12ContentInfo struct {
		ContentType asn1.ObjectIdentifier
		Content     asn1.RawValue `asn1:"tag:0,explicit,optional"`
	}
	p12MacData struct {
		Mac struct {
			Algorithm pkix.AlgorithmIdentifier
			Digest    []byte
		}
		MacSalt    []byte
		Iterations *big.Int `asn1:"optional"`
	}
	p12EncryptedData struct {
		Version int
		Info    struct {
			ContentType asn1.ObjectIdentifier
			Algorithm   pkix.AlgorithmIdentifier
			Content     []byte `asn1:"tag:0,optional"`
		}
	}
	p12SafeBag struct {
		ID         asn1.ObjectIdentifier
		Value      asn1.RawValue `asn1:"tag:0,explicit"`
		Attributes []struct {
			ID    asn1.ObjectIdentifier
			Value asn1.RawValue `asn1:"set"`
		} `asn1:"set,optional"`
	}
	p12ShroudedKey struct {
		Algorithm pkix.AlgorithmIdentifier
		Data      []byte
	}
	p12PBEParams struct {
		Salt       []byte
		Iterations *big.Int
	}
	p12PBES2Params struct {
		KDF pkix.AlgorithmIdentifier
		Enc pkix.AlgorithmIdentifier
	}
	p12PBKDF2Params struct {
		Salt       asn1.RawValue
		Iterations *big.Int
		KeyLength  int                      `asn1:"optional"`
		PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
	}
)

// unmarshalAll is asn1.Unmarshal refusing trailing bytes, as go-pkcs12
// reads.
func unmarshalAll(b []byte, v any) error {
	rest, err := asn1.Unmarshal(b, v)
	if err == nil && len(rest) > 0 {
		err = errors.New("trailing data")
	}
	return err
}

// p12Walk is what opening a PKCS#12 keystore would run, as far as can be
// seen before decrypting: the iterations of its MAC, of each encrypted
// content, and of each key in a plain content.
type p12Walk struct {
	mac       int64
	encrypted []p12Encrypted
	keys      int64
}

type p12Encrypted struct {
	alg   pkix.AlgorithmIdentifier
	data  []byte
	iters int64
}

// contents is the iterations of decrypting every encrypted content once.
func (w *p12Walk) contents() int64 {
	var n int64
	for _, c := range w.encrypted {
		n += c.iters
	}
	return n
}

// iterations checks the count n of what, within maxPKCS12Iterations.
func iterations(what string, n *big.Int) (int64, error) {
	if n == nil {
		return 1, nil // DEFAULT 1
	}
	if !n.IsInt64() || n.Int64() > maxPKCS12Iterations {
		return 0, fmt.Errorf("%s asks for %s iterations, more than the %d certwatch runs (OpenSSL writes 2048, Java 10,000): not opened", what, n, maxPKCS12Iterations)
	}
	return max(n.Int64(), 1), nil
}

// algIterations returns the checked iteration count of a password-based
// encryption algorithm, 0 for one go-pkcs12 does not run (it refuses it
// before deriving anything).
func algIterations(what string, alg pkix.AlgorithmIdentifier) (int64, error) {
	switch {
	case alg.Algorithm.Equal(oidPBEWith3DES), alg.Algorithm.Equal(oidPBEWithRC2128), alg.Algorithm.Equal(oidPBEWithRC240):
		var p p12PBEParams
		if unmarshalAll(alg.Parameters.FullBytes, &p) != nil {
			return 0, nil
		}
		return iterations(what, p.Iterations)
	case alg.Algorithm.Equal(oidPBES2):
		return pbkdf2Iterations(what, alg.Parameters.FullBytes)
	}
	return 0, nil
}

// pbkdf2Iterations returns the checked iteration count of the PBKDF2 in
// PBES2 or PBMAC1 parameters (a KDF, then a scheme), 0 for another KDF.
func pbkdf2Iterations(what string, params []byte) (int64, error) {
	var p p12PBES2Params
	if unmarshalAll(params, &p) != nil || !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return 0, nil
	}
	var k p12PBKDF2Params
	if unmarshalAll(p.KDF.Parameters.FullBytes, &k) != nil {
		return 0, nil
	}
	return iterations(what, k.Iterations)
}

// walkPKCS12 walks a PKCS#12 keystore as go-pkcs12 reads it, before it
// does, checking every iteration count it can see against
// maxPKCS12Iterations. It returns nil for DER that is no PKCS#12
// keystore.
func walkPKCS12(b []byte) (*p12Walk, error) {
	var pdu p12PDU
	if unmarshalAll(b, &pdu) != nil {
		return nil, nil
	}
	w := &p12Walk{}
	if mac := pdu.MacData.Mac.Algorithm; len(mac.Algorithm) > 0 {
		var err error
		if mac.Algorithm.Equal(oidPBMAC1) {
			w.mac, err = pbkdf2Iterations("its MAC", mac.Parameters.FullBytes)
		} else {
			w.mac, err = iterations("its MAC", pdu.MacData.Iterations)
		}
		if err != nil {
			return nil, err
		}
	}
	var data asn1.RawValue
	var safe []p12ContentInfo
	if !pdu.AuthSafe.ContentType.Equal(oidP12Data) || unmarshalAll(pdu.AuthSafe.Content.Bytes, &data) != nil || unmarshalAll(data.Bytes, &safe) != nil {
		return w, nil // the library stops there
	}
	for _, ci := range safe {
		switch {
		case ci.ContentType.Equal(oidP12Data):
			var bags []byte
			if unmarshalAll(ci.Content.Bytes, &bags) != nil {
				return w, nil
			}
			n, err := keyIterations(bags)
			if err != nil {
				return nil, err
			}
			w.keys += n
		case ci.ContentType.Equal(oidP12EncryptedData):
			var ed p12EncryptedData
			if unmarshalAll(ci.Content.Bytes, &ed) != nil {
				return w, nil
			}
			n, err := algIterations("an encrypted content", ed.Info.Algorithm)
			if err != nil {
				return nil, err
			}
			w.encrypted = append(w.encrypted, p12Encrypted{ed.Info.Algorithm, ed.Info.Content, n})
		}
	}
	return w, nil
}

// keyIterations returns the iterations of decrypting every key of the
// safe bags b, each checked.
func keyIterations(b []byte) (int64, error) {
	var bags []p12SafeBag
	if unmarshalAll(b, &bags) != nil {
		return 0, nil
	}
	var total int64
	for _, bag := range bags {
		if !bag.ID.Equal(oidP12ShroudedKey) {
			continue
		}
		var k p12ShroudedKey
		if unmarshalAll(bag.Value.Bytes, &k) != nil {
			continue
		}
		n, err := algIterations("a key", k.Algorithm)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// bmpPassword is a passphrase as PKCS#12 derives keys from it: UCS-2,
// big-endian, two zero bytes after.
func bmpPassword(p string) []byte {
	var b []byte
	for _, r := range utf16.Encode([]rune(p)) {
		b = append(b, byte(r>>8), byte(r))
	}
	return append(b, 0, 0)
}

// p12Budget counts the iterations opening a keystore runs.
type p12Budget struct{ spent int64 }

func (b *p12Budget) spend(n int64) error {
	if b.spent+n > maxPKCS12Work {
		return fmt.Errorf("opening it would run more than %d iterations in all, over the passphrases tried: not opened; give its passphrase (passphrase_env, passphrase_file), so that only it is tried, or re-export it with fewer iterations", maxPKCS12Work)
	}
	b.spent += n
	return nil
}

// hiddenKeys decrypts each encrypted content of w under passphrase p, as
// go-pkcs12 will, to count the iterations of the keys inside, which
// cannot be seen before: it returns their sum, each count checked, and
// false when a content could not be decrypted (the passphrase is wrong,
// or the scheme is one this does not decrypt). The iterations run are
// spent from budget first.
func (w *p12Walk) hiddenKeys(p string, budget *p12Budget) (int64, bool, error) {
	passwords := [][]byte{bmpPassword(p)}
	if p == "" {
		passwords = append(passwords, nil) // go-pkcs12's second try of the empty one
	}
	var total int64
	for _, c := range w.encrypted {
		opened := false
		for _, pw := range passwords {
			if c.alg.Algorithm.Equal(oidPBES2) && pw == nil {
				break // the same UTF-8 passphrase as the first try
			}
			if err := budget.spend(c.iters); err != nil {
				return 0, false, err
			}
			plain, ok := p12Decrypt(c.alg, c.data, pw)
			if !ok {
				continue
			}
			n, err := keyIterations(plain)
			if err != nil {
				return 0, false, err
			}
			total += n
			opened = true
			break
		}
		if !opened {
			return 0, false, nil
		}
	}
	return total, true, nil
}

// p12Decrypt decrypts data as go-pkcs12 does, under pw (a BMP passphrase
// or nil); false when it cannot.
func p12Decrypt(alg pkix.AlgorithmIdentifier, data, pw []byte) ([]byte, bool) {
	var block cipher.Block
	var iv []byte
	switch {
	case alg.Algorithm.Equal(oidPBES2):
		var p p12PBES2Params
		var k p12PBKDF2Params
		if unmarshalAll(alg.Parameters.FullBytes, &p) != nil || !p.KDF.Algorithm.Equal(oidPBKDF2) ||
			unmarshalAll(p.KDF.Parameters.FullBytes, &k) != nil || k.Salt.Tag != asn1.TagOctetString || k.Iterations == nil {
			return nil, false
		}
		var prf func() hash.Hash
		switch {
		case k.PRF.Algorithm.Equal(oidHMACSHA256):
			prf = sha256.New
		case k.PRF.Algorithm.Equal(oidHMACSHA512):
			prf = sha512.New
		case k.PRF.Algorithm.Equal(oidHMACSHA1), k.PRF.Algorithm == nil:
			prf = sha1.New
		default:
			return nil, false
		}
		var keyLen int
		switch {
		case p.Enc.Algorithm.Equal(oidAES256CBC):
			keyLen = 32
		case p.Enc.Algorithm.Equal(oidAES192CBC):
			keyLen = 24
		case p.Enc.Algorithm.Equal(oidAES128CBC):
			keyLen = 16
		default:
			return nil, false
		}
		utf8Pass := ""
		if len(pw) >= 2 {
			u := make([]uint16, 0, len(pw)/2)
			for i := 0; i+1 < len(pw)-2; i += 2 {
				u = append(u, uint16(pw[i])<<8|uint16(pw[i+1]))
			}
			utf8Pass = string(utf16.Decode(u))
		}
		key, err := pbkdf2.Key(prf, utf8Pass, k.Salt.Bytes, int(k.Iterations.Int64()), keyLen)
		if err != nil {
			return nil, false
		}
		if block, err = aes.NewCipher(key); err != nil {
			return nil, false
		}
		iv = p.Enc.Parameters.Bytes
	case alg.Algorithm.Equal(oidPBEWith3DES), alg.Algorithm.Equal(oidPBEWithRC2128), alg.Algorithm.Equal(oidPBEWithRC240):
		var p p12PBEParams
		if unmarshalAll(alg.Parameters.FullBytes, &p) != nil {
			return nil, false
		}
		n := int(p.Iterations.Int64())
		keyLen := 16 // RC2, 128 bits
		switch {
		case alg.Algorithm.Equal(oidPBEWith3DES):
			keyLen = 24
		case alg.Algorithm.Equal(oidPBEWithRC240):
			keyLen = 5
		}
		key := pbkdf.Key(sha1.New, 20, 64, p.Salt, pw, n, 1, keyLen)
		iv = pbkdf.Key(sha1.New, 20, 64, p.Salt, pw, n, 2, 8)
		var err error
		if keyLen == 24 {
			block, err = des.NewTripleDESCipher(key)
		} else {
			block, err = rc2.NewCipher(key, keyLen*8)
		}
		if err != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	bs := block.BlockSize()
	if len(iv) != bs || len(data) == 0 || len(data)%bs != 0 {
		return nil, false
	}
	plain := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, data)
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > bs || !bytes.Equal(plain[len(plain)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, false
	}
	return plain[:len(plain)-pad], true
}

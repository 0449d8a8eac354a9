package dnszone

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/miekg/dns"
)

// tsigKey is a checked TSIG key. It implements dns.TsigProvider itself so
// that hmac-md5, which miekg/dns no longer signs with, keeps working with
// older servers.
type tsigKey struct {
	name      string // canonical: lower case, fully qualified
	algorithm string // canonical algorithm name, fully qualified
	secret    []byte
	display   string // name as configured, for messages
}

const hmacMD5 = "hmac-md5.sig-alg.reg.int."

// tsigAlgorithms maps accepted spellings (without trailing dot) to the
// canonical algorithm names.
var tsigAlgorithms = map[string]string{
	"hmac-sha256":              dns.HmacSHA256,
	"hmac-sha224":              dns.HmacSHA224,
	"hmac-sha384":              dns.HmacSHA384,
	"hmac-sha512":              dns.HmacSHA512,
	"hmac-sha1":                dns.HmacSHA1,
	"hmac-md5":                 hmacMD5,
	"hmac-md5.sig-alg.reg.int": hmacMD5,
}

// Check reports what New would reject in t: a bad key name, an unsupported
// algorithm, a secret that is not base64. An empty Secret passes, for a
// configuration whose secret is read later (from a file or the
// environment). Messages never show the secret.
func (t TSIG) Check() error {
	if strings.TrimSpace(t.Secret) == "" {
		t.Secret = "AA==" // any valid base64: only name and algorithm are checked
	}
	_, err := newTSIGKey(t)
	return err
}

// ParseTSIG splits key text NAME:ALGORITHM:SECRET, as --tsig, --tsig-file
// and $CERTWATCH_TSIG give it (the secret, in base64, may hold colons of
// its own). ok is false when a part is missing; Check says whether the
// parts make a usable key.
func ParseTSIG(text string) (t TSIG, ok bool) {
	parts := strings.SplitN(text, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return TSIG{}, false
	}
	return TSIG{Name: parts[0], Algorithm: parts[1], Secret: parts[2]}, true
}

func newTSIGKey(t TSIG) (*tsigKey, error) {
	var errs []error
	name := strings.TrimSpace(t.Name)
	if name == "" {
		errs = append(errs, errors.New("tsig: key name is empty"))
	} else if _, ok := dns.IsDomainName(name); !ok {
		errs = append(errs, fmt.Errorf("tsig: key name %q is not a valid domain name", t.Name))
	} else if !roundTrips(dns.CanonicalName(name)) {
		errs = append(errs, fmt.Errorf("tsig: key name %q reads back from a DNS message as another name, so no signed answer would verify: use letters, digits, hyphens and dots", t.Name))
	}
	alg := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(t.Algorithm)), ".")
	if alg == "" {
		alg = "hmac-sha256"
	}
	canonical, ok := tsigAlgorithms[alg]
	if !ok {
		errs = append(errs, fmt.Errorf("tsig: unsupported algorithm %q: want hmac-sha256, hmac-sha224, hmac-sha384, hmac-sha512, hmac-sha1 or hmac-md5", t.Algorithm))
	}
	// The secret's value never appears in messages, only whether it is usable.
	secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(t.Secret))
	switch {
	case strings.TrimSpace(t.Secret) == "":
		errs = append(errs, fmt.Errorf("tsig key %s: secret is empty", name))
	case err != nil:
		errs = append(errs, fmt.Errorf("tsig key %s: secret is not valid base64", name))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &tsigKey{name: dns.CanonicalName(name), algorithm: canonical, secret: secret, display: name}, nil
}

// roundTrips reports whether the domain name name, packed into a message
// and read back, is name again. A name with characters the presentation
// format escapes (a quote, a space) is not: the server's signed answers
// would name the key otherwise, and Verify would refuse every one.
func roundTrips(name string) bool {
	buf := make([]byte, 256)
	off, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		return false
	}
	back, _, err := dns.UnpackDomainName(buf[:off], 0)
	return err == nil && back == name
}

// Generate returns the MAC of msg; it implements dns.TsigProvider.
func (k *tsigKey) Generate(msg []byte, t *dns.TSIG) ([]byte, error) {
	var h func() hash.Hash
	switch dns.CanonicalName(t.Algorithm) {
	case dns.HmacSHA256:
		h = sha256.New
	case dns.HmacSHA224:
		h = sha256.New224
	case dns.HmacSHA384:
		h = sha512.New384
	case dns.HmacSHA512:
		h = sha512.New
	case dns.HmacSHA1:
		h = sha1.New
	case hmacMD5:
		h = md5.New
	default:
		return nil, fmt.Errorf("unsupported TSIG algorithm %s", t.Algorithm)
	}
	mac := hmac.New(h, k.secret)
	mac.Write(msg)
	return mac.Sum(nil), nil
}

// Verify checks the MAC in t over msg; it implements dns.TsigProvider.
func (k *tsigKey) Verify(msg []byte, t *dns.TSIG) error {
	if dns.CanonicalName(t.Hdr.Name) != k.name {
		return fmt.Errorf("signed with key %s, not %s", t.Hdr.Name, k.display)
	}
	if dns.CanonicalName(t.Algorithm) != k.algorithm {
		return fmt.Errorf("signed with algorithm %s, not %s", t.Algorithm, k.algorithm)
	}
	want, err := k.Generate(msg, t)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(t.MAC)
	if err != nil || !hmac.Equal(got, want) {
		return dns.ErrSig
	}
	return nil
}

package files

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/deatil/go-cryptobin/jceks"
	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/certwatch/certwatch/discovery/atrest"
)

// Magic numbers of Java keystores.
var (
	jksMagic   = []byte{0xfe, 0xed, 0xfe, 0xed}
	jceksMagic = []byte{0xce, 0xce, 0xce, 0xce}
)

// javaDefault is the passphrase keytool proposes and most Java trust
// stores keep.
const javaDefault = "changeit"

// parse returns the certificates b, read from path, holds: none for a file
// that holds none, an error for a keystore it cannot open.
func parse(path string, b []byte, passphrase string) ([]held, error) {
	switch {
	case bytes.HasPrefix(b, jksMagic):
		return parseJKS(path, b, passphrase)
	case bytes.HasPrefix(b, jceksMagic):
		return parseJCEKS(path, b, passphrase)
	case bytes.Contains(b, []byte("-----BEGIN")):
		return parsePEM(atrest.Location{Kind: atrest.File, Where: path}, b), nil
	case isKubeconfig(b):
		return parseKubeconfig(path, b)
	}
	if c, err := x509.ParseCertificate(b); err == nil {
		return []held{{loc: atrest.Location{Kind: atrest.File, Where: path}, der: [][]byte{c.Raw}}}, nil
	}
	if len(b) > 0 && b[0] == 0x30 { // a DER SEQUENCE: perhaps PKCS#12
		return parsePKCS12(path, b, passphrase)
	}
	return nil, nil
}

// parsePEM returns every certificate of the PEM blocks in b, as one
// bundle at loc.
func parsePEM(loc atrest.Location, b []byte) []held {
	var der [][]byte
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		switch block.Type {
		case "CERTIFICATE", "TRUSTED CERTIFICATE", "X509 CERTIFICATE":
			if c, err := x509.ParseCertificate(block.Bytes); err == nil {
				der = append(der, c.Raw)
			}
		}
	}
	if len(der) == 0 {
		return nil
	}
	return []held{{loc: loc, der: der}}
}

// passphrases are those to try: the one given, or the empty one and
// Java's default.
func passphrases(p string) []string {
	if p != "" {
		return []string{p}
	}
	return []string{"", javaDefault}
}

func wrongPassphrase(given string) error {
	if given != "" {
		return errors.New("the passphrase is wrong (passphrase_env, passphrase_file)")
	}
	return errors.New("it needs a passphrase (neither an empty one nor \"changeit\" opens it): set passphrase_env or passphrase_file")
}

// parsePKCS12 returns the certificate chain and trusted certificates of a
// PKCS#12 keystore. A DER file that is not PKCS#12 holds no certificate.
// The keystore is walked first (walkPKCS12) and every key-derivation
// iteration go-pkcs12 would run counted before it runs them: each count
// within maxPKCS12Iterations, all of them, over the passphrases tried,
// within maxPKCS12Work. A key inside an encrypted content is counted by
// decrypting the content first; go-pkcs12 is asked to decrypt keys
// (DecodeChain) only when every one was counted, else only for
// certificates (DecodeTrustStore).
func parsePKCS12(path string, b []byte, passphrase string) ([]held, error) {
	w, err := walkPKCS12(b)
	if err != nil {
		return nil, fmt.Errorf("PKCS#12 keystore: %w", err)
	}
	if w == nil {
		return nil, nil // DER, but not PKCS#12
	}
	loc := atrest.Location{Kind: atrest.Keystore, Where: path}
	wrong := func(err error) bool {
		return errors.Is(err, pkcs12.ErrIncorrectPassword) || errors.Is(err, pkcs12.ErrDecryption)
	}
	var ni pkcs12.NotImplementedError
	var budget p12Budget
	for _, p := range passphrases(passphrase) {
		hidden, counted, err := w.hiddenKeys(p, &budget)
		if err != nil {
			return nil, fmt.Errorf("PKCS#12 keystore: %w", err)
		}
		mac := w.mac
		if p == "" {
			mac *= 2 // go-pkcs12 tries the empty passphrase two ways
		}
		var chainErr error
		if counted {
			if err := budget.spend(mac + w.contents() + w.keys + hidden); err != nil {
				return nil, fmt.Errorf("PKCS#12 keystore: %w", err)
			}
			_, leaf, cas, err := pkcs12.DecodeChain(b, p)
			if err == nil {
				der := [][]byte{leaf.Raw}
				for _, c := range cas {
					der = append(der, c.Raw)
				}
				return []held{{loc: loc, der: der}}, nil
			}
			if wrong(err) {
				continue
			}
			chainErr = err
		}
		if err := budget.spend(mac + w.contents()); err != nil {
			return nil, fmt.Errorf("PKCS#12 keystore: %w", err)
		}
		certs, err := pkcs12.DecodeTrustStore(b, p)
		if err == nil {
			var der [][]byte
			for _, c := range certs {
				der = append(der, c.Raw)
			}
			return []held{{loc: loc, der: der}}, nil
		}
		if wrong(err) {
			continue
		}
		if !counted {
			return nil, fmt.Errorf("PKCS#12 keystore: an encrypted content could not be decrypted here to count the iterations of the keys inside (go-pkcs12: %v): not opened; re-export it with openssl pkcs12", err)
		}
		if errors.As(chainErr, &ni) {
			return nil, fmt.Errorf("PKCS#12 keystore: %w", chainErr)
		}
		return nil, nil // DER, but not a keystore this reads: no certificate
	}
	return nil, fmt.Errorf("PKCS#12 keystore: %w", wrongPassphrase(passphrase))
}

// parseJKS returns the trusted certificates and the chains of the private
// key entries of a JKS keystore, by alias.
func parseJKS(path string, b []byte, passphrase string) ([]held, error) {
	if err := checkJKS(b); err != nil {
		return nil, fmt.Errorf("JKS keystore: %w", err)
	}
	var ks keystore.KeyStore
	var err error
	for _, p := range passphrases(passphrase) {
		ks = keystore.New(keystore.WithOrderedAliases())
		if err = ks.Load(bytes.NewReader(b), []byte(p)); err == nil {
			break
		}
	}
	if err != nil {
		// keystore-go exports no error for a digest that does not match,
		// which is what a wrong passphrase gives.
		if strings.Contains(err.Error(), "invalid digest") {
			return nil, fmt.Errorf("JKS keystore: %w", wrongPassphrase(passphrase))
		}
		return nil, fmt.Errorf("JKS keystore: %w", err)
	}
	var out []held
	for _, alias := range ks.Aliases() {
		loc := atrest.Location{Kind: atrest.Keystore, Where: path, Key: alias}
		var der [][]byte
		switch {
		case ks.IsTrustedCertificateEntry(alias):
			e, err := ks.GetTrustedCertificateEntry(alias)
			if err != nil {
				return nil, fmt.Errorf("JKS keystore entry %s: %w", alias, err)
			}
			der = append(der, e.Certificate.Content)
		case ks.IsPrivateKeyEntry(alias):
			chain, err := ks.GetPrivateKeyEntryCertificateChain(alias)
			if err != nil {
				return nil, fmt.Errorf("JKS keystore entry %s: %w", alias, err)
			}
			for _, c := range chain {
				der = append(der, c.Content)
			}
		}
		var ok [][]byte
		for _, d := range der {
			if _, err := x509.ParseCertificate(d); err == nil {
				ok = append(ok, d)
			}
		}
		if len(ok) > 0 {
			out = append(out, held{loc: loc, der: ok})
		}
	}
	return out, nil
}

// maxChainCerts is the most certificates a JKS key entry may state: a
// chain is a leaf and its issuers, a handful deep in practice. keystore-go
// makes room for as many as an entry states before reading one.
const maxChainCerts = 100

// maxKeystoreEntries is the most entries a JKS keystore may state: a
// trust store of every public root has some 150, a company's a few
// hundred. keystore-go keeps each in a map, some 500 bytes an entry: a
// 16 MiB file of 600,000 empty ones took 300 MB.
const maxKeystoreEntries = 10_000

// jksDigest is the length of the SHA-1 digest that ends a JKS keystore.
const jksDigest = 20

// checkJKS walks the entries of a JKS keystore before keystore-go reads
// it, which believes every length and count a file states and allocates
// it at once (a key entry of 2^32-1 certificates is 170 GB: the runtime
// dies; a certificate of 4 GiB is 4 GiB): each length must fit in what is
// left of the file and each chain within maxChainCerts, before anything is
// allocated. Its errors name the entry and the byte offset of the field.
// It reads no certificate; the library does.
func checkJKS(b []byte) error {
	s := cryptobyte.String(b)
	at := func() int { return len(b) - len(s) }
	var magic, version, count uint32
	if !s.ReadUint32(&magic) || !s.ReadUint32(&version) || !s.ReadUint32(&count) {
		return errors.New("malformed: cut short in its header")
	}
	if version != 1 && version != 2 {
		return fmt.Errorf("malformed: version %d at byte 4, where JKS has 1 or 2", version)
	}
	if count > maxKeystoreEntries {
		return fmt.Errorf("it states %d entries at byte 8, more than the %d certwatch reads: split it", count, maxKeystoreEntries)
	}
	// blob steps over a length and the bytes it states.
	blob := func(who, what string) error {
		off := at()
		var n uint32
		if !s.ReadUint32(&n) {
			return fmt.Errorf("malformed: %s is cut short at byte %d", who, off)
		}
		if n > uint32(len(s)) || !s.Skip(int(n)) {
			return fmt.Errorf("malformed: %s states %s of %d bytes at byte %d, %d are left", who, what, n, off, len(s))
		}
		return nil
	}
	// certificate steps over a certificate: its type (version 2) and
	// its bytes.
	certificate := func(who string) error {
		if version == 2 {
			off := at()
			var typ cryptobyte.String
			if !s.ReadUint16LengthPrefixed(&typ) {
				return fmt.Errorf("malformed: %s states a certificate type beyond the end of the file at byte %d", who, off)
			}
		}
		return blob(who, "a certificate")
	}
	minCert := 4 // a length
	if version == 2 {
		minCert += 2 // and a type's
	}
	for i := range count {
		off := at()
		var tag uint32
		var alias []byte
		if !s.ReadUint32(&tag) {
			return fmt.Errorf("malformed: entry %d of %d is cut short at byte %d", i+1, count, off)
		}
		off = at()
		var n uint16
		if !s.ReadUint16(&n) || !s.ReadBytes(&alias, int(n)) {
			return fmt.Errorf("malformed: entry %d states an alias of %d bytes at byte %d, %d are left", i+1, n, off, len(s))
		}
		if !s.Skip(8) { // its creation time
			return fmt.Errorf("malformed: entry %q is cut short at byte %d", string(alias), at())
		}
		switch tag {
		case 1: // a private key and its chain
			who := fmt.Sprintf("key entry %q", string(alias))
			if err := blob(who, "a key"); err != nil {
				return err
			}
			off := at()
			var certs uint32
			if !s.ReadUint32(&certs) {
				return fmt.Errorf("malformed: %s is cut short at byte %d", who, off)
			}
			if certs > maxChainCerts || int64(certs)*int64(minCert) > int64(len(s)) {
				return fmt.Errorf("malformed: %s states %d certificates at byte %d: a chain has at most %d, and %d bytes are left", who, certs, off, maxChainCerts, len(s))
			}
			for range certs {
				if err := certificate(who); err != nil {
					return err
				}
			}
		case 2: // a trusted certificate
			if err := certificate(fmt.Sprintf("entry %q", string(alias))); err != nil {
				return err
			}
		default:
			return fmt.Errorf("malformed: entry %q has the unknown tag %d at byte %d", string(alias), tag, off)
		}
	}
	if len(s) < jksDigest {
		return fmt.Errorf("malformed: cut short at byte %d, before its digest", at())
	}
	return nil
}

// parseJCEKS returns the trusted certificates and the chains of the
// private key entries of a JCEKS keystore, by alias. The keystore's
// digest is always checked: with the passphrase given, else with Java's
// default (keytool refuses a passphrase under six characters, so an empty
// one, which would skip the check, is never tried). The chain of a key
// entry is only handed out with its key, so the key is decrypted with the
// same passphrase, as keytool does when no -keypass was given, and the
// decrypted key is wiped at once.
func parseJCEKS(path string, b []byte, passphrase string) ([]held, error) {
	p := passphrase
	if p == "" {
		p = javaDefault
	}
	if err := checkJCEKS(b); err != nil {
		return nil, fmt.Errorf("JCEKS keystore: %w", err)
	}
	ks, err := jceks.LoadFromBytes(b, p)
	if err != nil {
		// go-cryptobin exports no error for a digest that does not
		// match, which is what a wrong passphrase gives.
		if strings.Contains(err.Error(), "password was incorrect") {
			if passphrase == "" {
				return nil, errors.New("JCEKS keystore: it needs a passphrase (\"changeit\" does not open it): set passphrase_env or passphrase_file")
			}
			return nil, fmt.Errorf("JCEKS keystore: %w", wrongPassphrase(passphrase))
		}
		return nil, fmt.Errorf("JCEKS keystore: %w", err)
	}
	var out []held
	add := func(alias string, der [][]byte) {
		var ok [][]byte
		for _, d := range der {
			if _, err := x509.ParseCertificate(d); err == nil {
				ok = append(ok, d)
			}
		}
		if len(ok) > 0 {
			out = append(out, held{loc: atrest.Location{Kind: atrest.Keystore, Where: path, Key: alias}, der: ok})
		}
	}
	trusted, keys := ks.ListCerts(), ks.ListPrivateKeys()
	slices.Sort(trusted)
	slices.Sort(keys)
	for _, alias := range trusted {
		der, err := ks.GetCertBytes(alias)
		if err != nil {
			return nil, fmt.Errorf("JCEKS keystore entry %s: %w", alias, err)
		}
		add(alias, [][]byte{der})
	}
	for _, alias := range keys {
		key, chain, err := ks.GetPrivateKeyAndCertsBytes(alias, p)
		clear(key)
		if err != nil {
			return nil, fmt.Errorf("JCEKS keystore entry %s: its chain is only readable with its key, which this passphrase does not open (%v): give the entry the store's passphrase (keytool -keypasswd) or convert the keystore to PKCS#12", alias, err)
		}
		add(alias, chain)
	}
	slices.SortFunc(out, func(a, b held) int { return strings.Compare(a.loc.Key, b.loc.Key) })
	return out, nil
}

// maxJCEKSIterations is the most PBE iterations a JCEKS key entry may
// ask for: Java's own ceiling (jdk.jceks.iterationCount). Decrypting a
// key entry runs them twice over MD5, with no way to stop.
const maxJCEKSIterations = 5_000_000

// checkJCEKS walks the entries of a JCEKS keystore before go-cryptobin
// reads it, which believes every length a file states (a negative one
// panics, a large one is allocated whole) and every iteration count its
// key entries ask for: each length must fit in what is left of the file,
// and each key entry's iterations within maxJCEKSIterations. It reads no
// certificate; the library does.
func checkJCEKS(b []byte) error {
	s := cryptobyte.String(b)
	var magic, version, count uint32
	if !s.ReadUint32(&magic) || !s.ReadUint32(&version) || !s.ReadUint32(&count) {
		return errors.New("malformed: cut short in its header")
	}
	blob := func(what string) ([]byte, error) {
		var n uint32
		var v []byte
		if !s.ReadUint32(&n) || n > uint32(len(s)) || !s.ReadBytes(&v, int(n)) {
			return nil, fmt.Errorf("malformed: %s states a length beyond the end of the file", what)
		}
		return v, nil
	}
	for i := range count {
		var tag uint32
		var alias cryptobyte.String
		if !s.ReadUint32(&tag) || !s.ReadUint16LengthPrefixed(&alias) || !s.Skip(8) {
			return fmt.Errorf("malformed: entry %d is cut short", i+1)
		}
		switch tag {
		case 1: // a private key and its chain
			key, err := blob("a key entry")
			if err != nil {
				return err
			}
			if n := pbeIterations(key); n > maxJCEKSIterations {
				return fmt.Errorf("key entry %q asks for %d PBE iterations, more than Java allows (%d): not decrypted", string(alias), n, maxJCEKSIterations)
			}
			var certs uint32
			if !s.ReadUint32(&certs) || certs > uint32(len(s)) {
				return fmt.Errorf("malformed: key entry %q states more certificates than the file holds", string(alias))
			}
			for range certs {
				var typ cryptobyte.String
				if !s.ReadUint16LengthPrefixed(&typ) {
					return fmt.Errorf("malformed: key entry %q is cut short", string(alias))
				}
				if _, err := blob("a certificate"); err != nil {
					return err
				}
			}
		case 2: // a trusted certificate
			var typ cryptobyte.String
			if !s.ReadUint16LengthPrefixed(&typ) {
				return fmt.Errorf("malformed: entry %q is cut short", string(alias))
			}
			if _, err := blob("a certificate"); err != nil {
				return err
			}
		case 3: // a secret key
			// Java writes it as a serialized object, with no length
			// before it, which the library cannot step over.
			if bytes.HasPrefix(s, []byte{0xac, 0xed}) {
				return fmt.Errorf("it holds the secret key %q, a serialized Java object the JCEKS reader cannot step over: keep certificates in a keystore without secret keys, or convert it to PKCS#12 (keytool -importkeystore -srcstoretype JCEKS -deststoretype PKCS12)", string(alias))
			}
			if _, err := blob("a secret-key entry"); err != nil {
				return err
			}
		default:
			return fmt.Errorf("malformed: entry %d has the unknown tag %d", i+1, tag)
		}
	}
	return nil
}

// pbeIterations returns the iteration count of an EncryptedPrivateKeyInfo
// encrypted by a PKCS#5 v1.5 or PKCS#12 PBE scheme (parameters: a salt
// and a count), the ones JCEKS uses, or 0 when it is not of that shape
// (the library then refuses the algorithm), MaxInt64 for a count beyond
// 64 bits.
func pbeIterations(der []byte) int64 {
	s := cryptobyte.String(der)
	var info, algo, params cryptobyte.String
	var salt cryptobyte.String
	var n int64
	if !s.ReadASN1(&info, cbasn1.SEQUENCE) || !info.ReadASN1(&algo, cbasn1.SEQUENCE) ||
		!algo.SkipASN1(cbasn1.OBJECT_IDENTIFIER) || !algo.ReadASN1(&params, cbasn1.SEQUENCE) ||
		!params.ReadASN1(&salt, cbasn1.OCTET_STRING) || !params.PeekASN1Tag(cbasn1.INTEGER) {
		return 0
	}
	if !params.ReadASN1Int64WithTag(&n, cbasn1.INTEGER) {
		return math.MaxInt64 // beyond 64 bits
	}
	return n
}

// isKubeconfig reports whether b looks like a kubeconfig with embedded
// certificates.
func isKubeconfig(b []byte) bool {
	return bytes.Contains(b, []byte("clusters:")) && (bytes.Contains(b, []byte("certificate-authority-data")) || bytes.Contains(b, []byte("client-certificate-data")))
}

// maxKubeconfigBytes is the largest kubeconfig read, far below the
// bound of other files (DefaultMaxFileBytes): a kubeconfig embedding a
// CA and a client certificate for each of a hundred clusters is some
// 600 KB, while decoding YAML costs some 35 times its size (15 MiB of
// one-character list items took 1.65 GB).
const maxKubeconfigBytes = 1 << 20

// maxKubeconfigNodes is the most YAML nodes a kubeconfig is decoded
// with, an alias counted as the nodes it stands for (so that ten aliases
// of ten aliases of ... are refused before being expanded): a kubeconfig
// of a hundred clusters, users and contexts has some 2,000.
const maxKubeconfigNodes = 100_000

// yamlNodes returns how many nodes n stands for, aliases expanded, or
// some number above limit once it is past it. memo holds what each
// anchored node counts; an anchor within its own value is past the limit.
func yamlNodes(n *yaml.Node, limit int, memo map[*yaml.Node]int) int {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		if c, ok := memo[n.Alias]; ok {
			return c
		}
		memo[n.Alias] = limit + 1 // until counted: an alias within its anchor's value
		c := yamlNodes(n.Alias, limit, memo)
		memo[n.Alias] = c
		return c
	}
	total := 1
	for _, c := range n.Content {
		total += yamlNodes(c, limit, memo)
		if total > limit {
			break
		}
	}
	return total
}

// kubeconfig is the part of a kubeconfig that embeds certificates.
type kubeconfig struct {
	Clusters []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			CAData string `yaml:"certificate-authority-data"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			CertData string `yaml:"client-certificate-data"`
		} `yaml:"user"`
	} `yaml:"users"`
}

// parseKubeconfig returns the CA data of each cluster and the client
// certificate of each user a kubeconfig embeds.
func parseKubeconfig(path string, b []byte) ([]held, error) {
	if len(b) > maxKubeconfigBytes {
		return nil, fmt.Errorf("kubeconfig: %d bytes, more than the %d a kubeconfig may be: split it, or narrow the glob", len(b), maxKubeconfigBytes)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if n := yamlNodes(&doc, maxKubeconfigNodes, map[*yaml.Node]int{}); n > maxKubeconfigNodes {
		return nil, fmt.Errorf("kubeconfig: more than %d nodes (an alias counted as the nodes it stands for), where a kubeconfig has a few thousand: not decoded", maxKubeconfigNodes)
	}
	var kc kubeconfig
	if err := doc.Decode(&kc); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	var out []held
	add := func(key, data string) error {
		if data == "" {
			return nil
		}
		pemData, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return fmt.Errorf("kubeconfig %s: not base64: %w", key, err)
		}
		out = append(out, parsePEM(atrest.Location{Kind: atrest.Kubeconfig, Where: path, Key: key}, pemData)...)
		return nil
	}
	for _, c := range kc.Clusters {
		if err := add("cluster "+c.Name, c.Cluster.CAData); err != nil {
			return nil, err
		}
	}
	for _, u := range kc.Users {
		if err := add("user "+u.Name, u.User.CertData); err != nil {
			return nil, err
		}
	}
	return out, nil
}

package files

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/deatil/go-cryptobin/jceks"
	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"go.yaml.in/yaml/v3"
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
func parsePKCS12(path string, b []byte, passphrase string) ([]held, error) {
	loc := atrest.Location{Kind: atrest.Keystore, Where: path}
	for _, p := range passphrases(passphrase) {
		_, leaf, cas, err := pkcs12.DecodeChain(b, p)
		if err == nil {
			der := [][]byte{leaf.Raw}
			for _, c := range cas {
				der = append(der, c.Raw)
			}
			return []held{{loc: loc, der: der}}, nil
		}
		if errors.Is(err, pkcs12.ErrIncorrectPassword) || errors.Is(err, pkcs12.ErrDecryption) {
			continue
		}
		certs, terr := pkcs12.DecodeTrustStore(b, p)
		if terr == nil {
			var der [][]byte
			for _, c := range certs {
				der = append(der, c.Raw)
			}
			return []held{{loc: loc, der: der}}, nil
		}
		if errors.Is(terr, pkcs12.ErrIncorrectPassword) || errors.Is(terr, pkcs12.ErrDecryption) {
			continue
		}
		var ni pkcs12.NotImplementedError
		if errors.As(err, &ni) {
			return nil, fmt.Errorf("PKCS#12 keystore: %w", err)
		}
		return nil, nil // DER, but not a keystore this reads: no certificate
	}
	return nil, fmt.Errorf("PKCS#12 keystore: %w", wrongPassphrase(passphrase))
}

// parseJKS returns the trusted certificates and the chains of the private
// key entries of a JKS keystore, by alias.
func parseJKS(path string, b []byte, passphrase string) ([]held, error) {
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

// parseJCEKS returns the trusted certificates and the chains of the
// private key entries of a JCEKS keystore, by alias. The keystore's
// digest is always checked: with the passphrase given, else with Java's
// default (keytool refuses a passphrase under six characters, so an empty
// one, which would skip the check, is never tried). The chain of a key
// entry is only handed out with its key, so the key is decrypted with the
// same passphrase, as keytool does when no -keypass was given, and the
// decrypted key is wiped at once.
func parseJCEKS(path string, b []byte, passphrase string) (out []held, err error) {
	p := passphrase
	if p == "" {
		p = javaDefault
	}
	// go-cryptobin trusts the lengths a keystore states: a negative one
	// panics in make. A file is not to take certwatch down.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("JCEKS keystore: malformed (%v)", r)
		}
	}()
	ks, err := jceks.LoadFromBytes(b, p)
	if err != nil {
		// go-cryptobin exports no error for a digest that does not
		// match, which is what a wrong passphrase gives.
		if strings.Contains(err.Error(), "password was incorrect") {
			return nil, fmt.Errorf("JCEKS keystore: %w", wrongPassphrase(passphrase))
		}
		return nil, fmt.Errorf("JCEKS keystore: %w", err)
	}
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

// isKubeconfig reports whether b looks like a kubeconfig with embedded
// certificates.
func isKubeconfig(b []byte) bool {
	return bytes.Contains(b, []byte("clusters:")) && (bytes.Contains(b, []byte("certificate-authority-data")) || bytes.Contains(b, []byte("client-certificate-data")))
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
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
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

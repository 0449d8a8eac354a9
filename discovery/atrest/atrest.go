// Package atrest holds what certwatch knows of certificates held at rest:
// in files and keystores on disk, kubeconfigs, Kubernetes Secrets,
// ConfigMaps, webhook and APIService caBundles, cert-manager Certificates.
// It is plain data, filled by the sources that read them (discovery/files,
// discovery/kubernetes) and judged by policy, which merges a certificate
// held at rest with the copies endpoints serve by fingerprint.
//
// A certificate is kept once, as a compact summary (Certificate), with
// every place it was found (Location): ten thousand Secrets holding one
// CA's bundle are one Certificate with ten thousand locations, and no
// copy of the DER is kept. A Set builds that list as a source reads.
package atrest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is the kind of place a certificate is held in.
type Kind string

// Kinds of location. Sources may add kinds; policy treats every kind
// alike, and reports and the coverage report group by it.
const (
	// File is a PEM or DER file (every certificate of a PEM bundle).
	File Kind = "file"
	// Keystore is a PKCS#12, JKS or JCEKS keystore file; Key is the
	// entry's alias.
	Keystore Kind = "keystore"
	// Kubeconfig is a kubeconfig file; Key names the entry
	// ("user admin", "cluster prod").
	Kubeconfig Kind = "kubeconfig"
	// Secret is a Kubernetes Secret; Key is its data key (tls.crt).
	Secret Kind = "secret"
	// ConfigMap is a Kubernetes ConfigMap; Key is its data key (ca.crt).
	ConfigMap Kind = "configmap"
	// Webhook is the caBundle of an admission webhook: Where is the
	// configuration's name, Key the webhook's name.
	Webhook Kind = "webhook"
	// APIService is the caBundle of an aggregated APIService.
	APIService Kind = "apiservice"
	// CRD is the caBundle of a CustomResourceDefinition's conversion
	// webhook.
	CRD Kind = "crd"
	// CertManager is a cert-manager Certificate resource, by the Secret
	// it writes.
	CertManager Kind = "certificate"
)

// Kinds returns the kinds of location this package names, sorted: those
// reports and metrics always list, with 0 for a kind where nothing was
// found.
func Kinds() []Kind {
	return []Kind{APIService, CertManager, ConfigMap, CRD, File, Keystore, Kubeconfig, Secret, Webhook}
}

// Location is one place a certificate is held.
type Location struct {
	Kind Kind `json:"kind"`
	// Where is the file's path, "namespace/name" of a namespaced object,
	// or the name of a cluster-scoped one.
	Where string `json:"where"`
	// Key is where inside it: a data key (tls.crt), a keystore alias, a
	// kubeconfig entry, a webhook's name; empty for a plain file.
	Key string `json:"key,omitempty"`
	// Index is the certificate's position in a bundle of several,
	// counting from 1 (a chain in tls.crt, a CA bundle); 0 when it is
	// alone.
	Index int `json:"index,omitempty"`
	// Cluster names the Kubernetes cluster (its context) of an object;
	// empty for files and when there is one cluster.
	Cluster string `json:"cluster,omitempty"`
}

// String names the location for people: "secret payments/api-tls
// tls.crt", "file /etc/ssl/api.pem", "file /etc/ssl/bundle.pem #2" (the
// first of a bundle, its leaf, goes without a number),
// "keystore /opt/app/keystore.jks alias server", "secret
// payments/api-tls tls.crt (cluster prod)".
func (l Location) String() string {
	var b strings.Builder
	b.WriteString(string(l.Kind))
	b.WriteByte(' ')
	b.WriteString(l.Where)
	if l.Key != "" {
		b.WriteByte(' ')
		if l.Kind == Keystore {
			b.WriteString("alias ")
		}
		b.WriteString(l.Key)
	}
	if l.Index > 1 {
		b.WriteString(" #")
		b.WriteString(strconv.Itoa(l.Index))
	}
	if l.Cluster != "" {
		b.WriteString(" (cluster ")
		b.WriteString(l.Cluster)
		b.WriteByte(')')
	}
	return b.String()
}

// Compare orders locations by kind, cluster, where, key and index.
func (l Location) Compare(o Location) int {
	if c := strings.Compare(string(l.Kind), string(o.Kind)); c != 0 {
		return c
	}
	if c := strings.Compare(l.Cluster, o.Cluster); c != 0 {
		return c
	}
	if c := strings.Compare(l.Where, o.Where); c != 0 {
		return c
	}
	if c := strings.Compare(l.Key, o.Key); c != 0 {
		return c
	}
	return l.Index - o.Index
}

// Certificate is one certificate held at rest: what policy judges of it,
// and every place it is held. It keeps no DER.
type Certificate struct {
	// SHA256 is the fingerprint: the SHA-256 of the DER in lower-case
	// hex, the same string as policy.Certificate.SHA256 of a served copy.
	SHA256 string `json:"sha256"`
	// Subject and Issuer are the common names (or, without one, the
	// first DNS name and the distinguished name), for people.
	Subject string `json:"subject"`
	Issuer  string `json:"issuer"`
	// Serial is lower-case hex, as x509's SerialNumber.Text(16).
	Serial string `json:"serial"`
	// DNSNames are the subject alternative DNS names.
	DNSNames  []string  `json:"dns_names,omitempty"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	// CA is set for a CA certificate (basic constraints cA): its expiry
	// takes down every certificate it issued. SelfSigned is set when it
	// signs itself (a root).
	CA         bool `json:"ca,omitempty"`
	SelfSigned bool `json:"self_signed,omitempty"`
	// KeyAlgorithm is RSA, ECDSA, Ed25519 or another algorithm's name;
	// KeyBits the RSA modulus or curve size (0 when not applicable).
	KeyAlgorithm string `json:"key_algorithm"`
	KeyBits      int    `json:"key_bits,omitempty"`
	// SignatureAlgorithm is what the certificate is signed with
	// ("SHA256-RSA", "ECDSA-SHA384"); WeakSignature is set for MD2, MD5
	// and SHA-1, which clients refuse below a root.
	SignatureAlgorithm string `json:"signature_algorithm"`
	WeakSignature      bool   `json:"weak_signature,omitempty"`
	// Verified is set when the certificate verifies to a trusted root at
	// the time it was read, through the intermediates found at rest with
	// it (the same object, file, or one read before it); a CA also when
	// its issuer is read after it.
	Verified bool `json:"verified,omitempty"`
	// Issuers are the fingerprints of the certificates above it found at
	// rest, issuer first, up to a root: whose expiry takes it down. Empty
	// for a root and when its issuer was not found.
	Issuers []string `json:"issuers,omitempty"`
	// Locations are every place it is held, sorted (Location.Compare).
	Locations []Location `json:"locations"`
	// Issuances are what cert-manager says of the Certificate resources
	// that write it into a Secret (each also a CertManager location):
	// whether each is Ready and when it renews. Empty for a certificate
	// cert-manager does not manage.
	Issuances []Issuance `json:"issuances,omitempty"`
}

// Issuance is cert-manager's state of one Certificate resource, as its
// status says: the leaf of the Secret it writes (tls.crt) carries it.
// Policy can tell from it a renewal that cert-manager failed (Ready false)
// or that is overdue (RenewalTime passed and the Secret still holds this
// certificate) from one that is on time.
type Issuance struct {
	// Location is the Certificate resource: Kind CertManager, Where
	// "namespace/name".
	Location Location `json:"location"`
	// Secret is the Secret it writes (spec.secretName): Kind Secret, Key
	// tls.crt.
	Secret Location `json:"secret"`
	// Issuer is its spec.issuerRef: who issues it.
	Issuer IssuerRef `json:"issuer,omitzero"`
	// Ready is the status of its Ready condition; Reason and Message are
	// the condition's ("Failed", "Issuing", cert-manager's words), Since
	// its last transition (zero when the status does not say). A
	// Certificate without a Ready condition is not Ready.
	Ready   bool      `json:"ready"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	// Failure is the message of its Issuing condition when that says
	// the last issuance failed (status False, reason Failed): why
	// cert-manager could not renew, while Ready still says the
	// certificate the Secret holds is good.
	Failure string `json:"failure,omitempty"`
	// RenewalTime is status.renewalTime, when cert-manager means to
	// renew; NotAfter is status.notAfter, the expiry of the certificate
	// it last issued. Zero when the status does not say.
	RenewalTime time.Time `json:"renewal_time,omitzero"`
	NotAfter    time.Time `json:"not_after,omitzero"`
}

// IssuerRef names the issuer of a cert-manager Certificate.
type IssuerRef struct {
	// Name is the issuer's name; Kind is Issuer (in the Certificate's
	// namespace, the default), ClusterIssuer or an external issuer's
	// kind, of API Group (cert-manager.io when empty).
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
}

// Where lists up to n locations, with how many more there are: "file
// /etc/ssl/api.pem, secret payments/api-tls tls.crt and 3 more".
func Where(locs []Location, n int) string {
	var parts []string
	for i, l := range locs {
		if i == n {
			return strings.Join(parts, ", ") + fmt.Sprintf(" and %d more", len(locs)-n)
		}
		parts = append(parts, l.String())
	}
	return strings.Join(parts, ", ")
}

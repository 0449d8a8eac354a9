package probes

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/netip"
	"time"

	"github.com/certwatch/certwatch/discovery"
)

// Failure classifies why no certificate chain was obtained from an address.
// The empty Failure means the handshake completed.
type Failure string

// Failures, from the least to the most specific about the server.
const (
	FailNone Failure = ""
	// FailNotProbed: the endpoint was not probed, or its probe did not
	// complete, before the caller's context ended (a sweep cut short by its
	// deadline, or a shutdown). It says nothing about the endpoint.
	FailNotProbed Failure = "not_probed"
	// FailResolve: the name has no A/AAAA records or the lookup failed.
	FailResolve Failure = "resolve"
	// FailNoRoute: this host has no route to the address (network or host
	// unreachable): a problem on certwatch's side of the network, such as a
	// host that lost its network, more often than of the endpoint.
	FailNoRoute Failure = "no_route"
	// FailAddressSkipped: the address was not dialled. Discovery found it
	// (a zone record, a Route 53 record, a resolver's answer for a
	// discovered name) and it is unspecified, link-local, multicast,
	// broadcast, or loopback without Config.AllowLoopback (see
	// barredAddress). It says nothing about the endpoint; Error names the
	// address, its source and why.
	FailAddressSkipped Failure = "address_skipped"
	// FailBadAddress: this host refused to dial the address itself
	// (invalid argument, address not available, address family not
	// supported), e.g. a link-local IPv6 address without a zone.
	FailBadAddress Failure = "bad_address"
	// FailRefused: TCP connection refused; nothing listens on the port.
	FailRefused Failure = "refused"
	// FailTimeout: the dial or the handshake ran out of time (including a
	// listener that accepts TCP and never speaks TLS).
	FailTimeout Failure = "timeout"
	// FailReset: the peer reset or closed the connection mid-handshake.
	FailReset Failure = "reset"
	// FailNotTLS: the peer answered with something that is not TLS.
	FailNotTLS Failure = "not_tls"
	// FailAlert: the server sent a TLS alert (e.g. handshake_failure,
	// unrecognized_name).
	FailAlert Failure = "tls_alert"
	// FailNoStartTLS: the server answered the STARTTLS dialogue of the
	// target's protocol but did not offer (or refused) the upgrade to TLS.
	FailNoStartTLS Failure = "no_starttls"
	// FailHandshake: any other handshake or network error, or a reply
	// that breaks the STARTTLS dialogue.
	FailHandshake Failure = "handshake"
)

// Trust is the outcome of verifying the served chain against the trusted
// roots, independent of the host name.
type Trust string

// Trust outcomes.
const (
	// TrustNotChecked: there was no chain to verify (see Failure).
	TrustNotChecked Trust = ""
	// Trusted: a path to a trusted root exists at the probe's time.
	Trusted Trust = "trusted"
	// TrustExpired: a path to a trusted root exists, but a certificate on
	// every such path is outside its validity period now (expired, or not yet
	// valid). Paths holds those paths, so expiry can be judged on them.
	TrustExpired Trust = "expired"
	// TrustSelfSigned: the leaf is self-signed and not a trusted root.
	TrustSelfSigned Trust = "self_signed"
	// TrustUnknownAuthority: no path to a trusted root with the certificates
	// the server sent (unknown private CA, or a missing intermediate).
	TrustUnknownAuthority Trust = "unknown_authority"
	// TrustInvalid: verification failed for another reason (bad signature,
	// constraint violation, unsupported algorithm, ...). TrustError says why.
	TrustInvalid Trust = "invalid"
)

// Observation is what one probe of one (name, port, address) saw. Probe
// outcomes are data, not errors: a failed handshake is an Observation with
// Failure set.
type Observation struct {
	// Name, Port and Address identify the endpoint. Address is invalid (the
	// zero netip.Addr) when resolution failed.
	Name    string     `json:"name"`
	Port    int        `json:"port"`
	Address netip.Addr `json:"address"`
	// Via is copied from the target: the AWS resource whose address this
	// is, asked for Name as SNI (discovery.Target.Via); empty when Name
	// was looked up itself.
	Via string `json:"via,omitempty"`
	// Protocol is copied from the target: how the port reaches TLS.
	Protocol discovery.Protocol `json:"protocol"`
	// Sources and Explicit are copied from the discovery target.
	Sources  []string `json:"sources,omitempty"`
	Explicit bool     `json:"explicit,omitempty"`

	// At is when the probe started (its first connection, or the lookup
	// that failed) and the time the chain was verified at; Duration how
	// long the successful (or last) attempt took; Attempts how many
	// connections were made (0 when none was: a failed lookup, or a
	// cancelled sweep).
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"duration"`
	Attempts int           `json:"attempts"`

	// Failure is set when no chain was obtained; Error is the message.
	Failure Failure `json:"failure,omitempty"`
	Error   string  `json:"error,omitempty"`
	// Connected reports whether the last attempt's TCP connection was
	// established. With Failure set, the server accepted the connection
	// and then failed the TLS handshake (an alert, a protocol error, no
	// answer): a broken service, not an absent one.
	Connected bool `json:"connected,omitempty"`
	// GivenUp reports that the last attempt was not made because the
	// sweep had given up on the address after consecutive timeouts of its
	// other endpoints (Failure is FailTimeout): the endpoint shares their
	// outage, it was not itself seen to time out.
	GivenUp bool `json:"given_up,omitempty"`

	// TLSVersion and CipherSuite are what the completed handshake
	// negotiated; zero when there was none.
	TLSVersion  TLSVersion  `json:"tls_version,omitempty"`
	CipherSuite CipherSuite `json:"cipher_suite,omitempty"`
	// KeyExchange is the key exchange group the handshake negotiated
	// (zero: none, or TLS 1.2's RSA key transport). HybridOffered reports
	// that the ClientHello offered the post-quantum hybrid
	// (Config.PostQuantum), so a classical KeyExchange means the server
	// does not take it.
	KeyExchange KeyExchange `json:"key_exchange,omitempty"`
	// Renewal is the renewal window the ACME CA that issued the verified
	// leaf suggests (Config.ARI); nil when no configured CA matched its
	// issuer or knew it.
	Renewal       *RenewalInfo `json:"renewal,omitempty"`
	HybridOffered bool         `json:"hybrid_offered,omitempty"`

	// Chain is the certificate chain as the server presented it, leaf first.
	// Certificates are shared between observations that saw the same DER
	// bytes during one scan; treat them as read-only.
	Chain []*x509.Certificate `json:"-"`
	// Trust is the chain verification outcome, TrustError its message.
	Trust      Trust  `json:"trust,omitempty"`
	TrustError string `json:"trust_error,omitempty"`
	// Paths are the verified paths from the leaf to a trusted root (leaf
	// first, root last), when Trust is Trusted or TrustExpired. They are
	// built only from the certificates the server sent plus the trusted
	// roots, so a missing intermediate shows as TrustUnknownAuthority.
	Paths [][]*x509.Certificate `json:"-"`
	// NameMatch reports whether the leaf is valid for Name.
	NameMatch bool `json:"name_match"`
	// PublicRoot reports whether a verified path ends at one of
	// Config.PublicRoots (a publicly trusted root, not a private CA).
	PublicRoot bool `json:"public_root,omitempty"`
	// Revocation holds the revocation facts of the certificates below the
	// root of the first verified path that name a CRL distribution point
	// or an OCSP responder (and of a leaf with a stapled response). Empty
	// when there is no verified path or revocation is not checked.
	Revocation []Revocation `json:"revocation,omitempty"`
}

// Leaf returns the leaf certificate, or nil when there was no handshake.
func (o *Observation) Leaf() *x509.Certificate {
	if len(o.Chain) == 0 {
		return nil
	}
	return o.Chain[0]
}

// Fingerprint returns the lower-case hex SHA-256 of c's DER encoding.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// TLSVersion is a TLS protocol version (tls.VersionTLS13, ...). It prints
// and marshals as crypto/tls names it: "TLS 1.3".
type TLSVersion uint16

// String returns the version's name, e.g. "TLS 1.2"; "" for zero.
func (v TLSVersion) String() string {
	if v == 0 {
		return ""
	}
	return tls.VersionName(uint16(v))
}

// MarshalText encodes the version as its name.
func (v TLSVersion) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// AppendText appends the version's name to b: MarshalText without a new
// slice, for a report that writes one per endpoint.
func (v TLSVersion) AppendText(b []byte) ([]byte, error) { return append(b, v.String()...), nil }

// UnmarshalText decodes a name MarshalText wrote.
func (v *TLSVersion) UnmarshalText(b []byte) error {
	for _, id := range []uint16{tls.VersionTLS10, tls.VersionTLS11, tls.VersionTLS12, tls.VersionTLS13} {
		if tls.VersionName(id) == string(b) {
			*v = TLSVersion(id)
			return nil
		}
	}
	return fmt.Errorf("unknown TLS version %q", b)
}

// CipherSuite is a TLS cipher suite ID. It prints and marshals as its IANA
// name, e.g. "TLS_AES_128_GCM_SHA256".
type CipherSuite uint16

// String returns the suite's name; "" for zero. The suites crypto/tls
// deems secure are named here: tls.CipherSuiteName builds the list of
// every suite anew on each call (900 bytes), once per endpoint of a
// report, 90 MB of garbage writing one of 100,000 endpoints.
func (c CipherSuite) String() string {
	switch uint16(c) {
	case 0:
		return ""
	case tls.TLS_AES_128_GCM_SHA256:
		return "TLS_AES_128_GCM_SHA256"
	case tls.TLS_AES_256_GCM_SHA384:
		return "TLS_AES_256_GCM_SHA384"
	case tls.TLS_CHACHA20_POLY1305_SHA256:
		return "TLS_CHACHA20_POLY1305_SHA256"
	case tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA:
		return "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"
	case tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA:
		return "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"
	case tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA:
		return "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"
	case tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA:
		return "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA"
	case tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256:
		return "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
	case tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:
		return "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
	case tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:
		return "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
	case tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:
		return "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
	case tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:
		return "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
	case tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256:
		return "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
	}
	return tls.CipherSuiteName(uint16(c))
}

// MarshalText encodes the suite as its name.
func (c CipherSuite) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// AppendText appends the suite's name to b: MarshalText without a new
// slice, for a report that writes one per endpoint.
func (c CipherSuite) AppendText(b []byte) ([]byte, error) { return append(b, c.String()...), nil }

// UnmarshalText decodes a name MarshalText wrote.
func (c *CipherSuite) UnmarshalText(b []byte) error {
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if s.Name == string(b) {
			*c = CipherSuite(s.ID)
			return nil
		}
	}
	return fmt.Errorf("unknown cipher suite %q", b)
}

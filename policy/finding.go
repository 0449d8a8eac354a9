// Package policy turns probe observations and cloud inventories (ACM,
// Route 53) into findings: one per certificate and kind of problem, each
// with a tier chosen by the time left before its deadline.
//
// Everything here is a pure function of its inputs and the time passed in;
// nothing reads the clock, the network or the disk.
package policy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found/ctcert"
	"github.com/certwatch/certwatch/probes"
)

// Tier is the urgency of a finding. Tiers are ordered: a higher value is more
// urgent. The zero value, None, means "no alert".
type Tier int

// Tiers, least urgent first.
const (
	None Tier = iota
	// Info is listed in reports and never notified.
	Info
	Notice
	Warning
	Page
	Critical
)

var tierNames = [...]string{"none", "info", "notice", "warning", "page", "critical"}

// String returns the tier's name as used in config, flags and JSON.
func (t Tier) String() string {
	if t < 0 || int(t) >= len(tierNames) {
		return fmt.Sprintf("tier(%d)", int(t))
	}
	return tierNames[t]
}

// ParseTier parses a tier name (case-insensitive).
func ParseTier(s string) (Tier, error) {
	for i, n := range tierNames {
		if strings.EqualFold(s, n) {
			return Tier(i), nil
		}
	}
	return None, fmt.Errorf("unknown tier %q (want one of %s)", s, strings.Join(tierNames[:], ", "))
}

// MarshalText encodes the tier as its name.
func (t Tier) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// AppendText appends the tier's name to b: MarshalText without a new
// slice, for a report that writes one per finding.
func (t Tier) AppendText(b []byte) ([]byte, error) { return append(b, t.String()...), nil }

// UnmarshalText decodes a tier name.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Kind names the problem a finding reports.
type Kind string

// Kinds of finding.
const (
	// Expired: a certificate on the verified path (or the leaf, when there is
	// no verified path) is past its NotAfter.
	Expired Kind = "expired"
	// Expiring: a certificate on the verified path expires within a tier's
	// window.
	Expiring Kind = "expiring"
	// ChainUntrusted: no path to a trusted root (unknown CA, missing
	// intermediate, bad signature).
	ChainUntrusted Kind = "chain_untrusted"
	// SelfSigned: the leaf is self-signed and not trusted.
	SelfSigned Kind = "self_signed"
	// HostnameMismatch: the leaf is not valid for the name it was served on.
	HostnameMismatch Kind = "hostname_mismatch"
	// InconsistentDeployment: addresses of one name serve different
	// certificates.
	InconsistentDeployment Kind = "inconsistent_deployment"
	// Unreachable: an explicitly configured target could not be probed.
	Unreachable Kind = "unreachable"
	// TLSBroken: a discovered name accepts the TCP connection and then
	// fails TLS (an alert, a protocol error, not TLS at all, no answer),
	// on one or more of its addresses. Grouped per name and port.
	TLSBroken Kind = "tls_broken"
	// AddressSkipped: discovery named an address for a name that
	// certwatch does not dial (unspecified, link-local, multicast,
	// broadcast, or loopback without probe.allow_loopback; see
	// probes.FailAddressSkipped). Always Info: listed in every report,
	// never notified. Grouped per name and port.
	AddressSkipped Kind = "address_skipped"
	// BundleExpired: the server sends an expired or expiring extra
	// certificate (an old cross-sign or root) that no verified path needs.
	// Harmless for current clients, so at most a notice.
	BundleExpired Kind = "bundle_expired"
)

// Endpoint is one place a certificate was seen.
type Endpoint struct {
	Name    string `json:"name"`
	Port    int    `json:"port"`
	Address string `json:"address"`
	// Via is the AWS resource (a load balancer's DNS name) whose address
	// Address is, asked for Name as SNI (discovery.Target.Via): the
	// certificate it serves for Name, wherever Name's own DNS leads.
	Via string `json:"via,omitempty"`
}

// String returns "name:port (address)", or "name:port (address via
// resource)".
func (e Endpoint) String() string {
	hp := net.JoinHostPort(e.Name, strconv.Itoa(e.Port)) // [2001:db8::7]:443 for IPv6 literals
	switch {
	case e.Via != "":
		return fmt.Sprintf("%s (%s via %s)", hp, cmp.Or(e.Address, "no address"), e.Via)
	case e.Address == "" || e.Address == e.Name:
		return hp
	}
	return fmt.Sprintf("%s (%s)", hp, e.Address)
}

// Probed is one probed endpoint as a report lists it: where, and the leaf
// it served or why it served none.
type Probed struct {
	Name    string `json:"name"`
	Port    int    `json:"port"`
	Address string `json:"address"`
	// Via is the AWS resource asked for Name at Address (Endpoint.Via).
	Via string `json:"via,omitempty"`
	// Protocol is how the port was reached: tls, or the STARTTLS
	// protocol whose dialogue came first.
	Protocol discovery.Protocol `json:"protocol"`
	// Certificate is the SHA-256 of the leaf served (Certificate.SHA256);
	// empty when there was no handshake.
	Certificate string `json:"certificate,omitempty"`
	// TLSVersion and CipherSuite are what the handshake negotiated
	// ("TLS 1.3", "TLS_AES_128_GCM_SHA256"); absent without one.
	TLSVersion  probes.TLSVersion  `json:"tls_version,omitempty"`
	CipherSuite probes.CipherSuite `json:"cipher_suite,omitempty"`
	// KeyExchange is the key exchange group negotiated ("secp256r1",
	// "X25519MLKEM768"); absent without a handshake or with RSA key
	// transport. PostQuantum is set when the probe offered the
	// post-quantum hybrid (probe.post_quantum): whether the server took it.
	KeyExchange probes.KeyExchange `json:"key_exchange,omitempty"`
	PostQuantum *bool              `json:"post_quantum,omitempty"`
	// Renewal is the renewal window the ACME CA that issued the leaf
	// suggests, or why it could not be had (probes.RenewalInfo); absent
	// when no configured ACME CA matched the leaf's issuer or knew it.
	Renewal *probes.RenewalInfo `json:"renewal,omitempty"`
	// Sources are the discovery sources that led to the endpoint
	// (probes.Observation.Sources, shared with it, never modified), and
	// Duration how long its probe took. Neither is in the JSON report:
	// they are what the status page and the metrics of a daemon show of
	// the endpoint, kept here rather than in a table beside the report.
	Sources  []string      `json:"-"`
	Duration time.Duration `json:"-"`
	// Failed says why there was no handshake; nil when there was one, as for
	// most endpoints. Its fields are the endpoint's in JSON. It sits
	// behind a pointer to save 24 bytes an endpoint (2.4 MB of a scan of
	// 100,000). Read it through Fault.
	*Failed
}

// Failed says why an endpoint served no certificate.
type Failed struct {
	// Error says why there was no handshake, and Failure classifies it
	// (probes.Failure).
	Error   string `json:"error,omitempty"`
	Failure string `json:"failure,omitempty"`
}

// Fault returns why the endpoint served no certificate, zero when it
// served one.
func (p *Probed) Fault() Failed {
	if p.Failed == nil {
		return Failed{}
	}
	return *p.Failed
}

func (p *Probed) endpoint() Endpoint {
	return Endpoint{Name: p.Name, Port: p.Port, Address: p.Address, Via: p.Via}
}

// Certificate describes one certificate seen during a scan.
type Certificate struct {
	SHA256    string   `json:"sha256"`
	Subject   string   `json:"subject"`
	Issuer    string   `json:"issuer"`
	Serial    string   `json:"serial"`
	DNSNames  []string `json:"dns_names"`
	NotBefore Instant  `json:"not_before"`
	NotAfter  Instant  `json:"not_after"`
	// SignatureAlgorithm is what the certificate is signed with
	// ("SHA256-RSA", "ECDSA-SHA384"; "ML-DSA-65", "SLH-DSA-SHA2-128s" for
	// post-quantum ones; an OID for any other): probes.SignatureAlgorithm.
	SignatureAlgorithm string `json:"signature_algorithm,omitempty"`
	// RenewedBy is policy's verdict that the certificate was renewed and
	// is still served: the newer certificate that replaces it, by the rule
	// behind stale_deployment (issued after it and outliving it, covering
	// every name of it, valid now, outside every expiry tier, not
	// untrusted, and held in ACM or served on another name or port). Nil
	// when policy saw no renewal; the status page shows this verdict.
	RenewedBy *Replacement `json:"renewed_by,omitempty"`
	// ExpectedRenewal is when the certificate is normally renewed: when
	// the renewal fraction of its lifetime is left, but not before the
	// least urgent expiry tier starts (ExpectedRenewal). Past it and its
	// grace (RenewalGrace), with no newer certificate for its names seen
	// anywhere, it is renewal_missed. Zero when that check is off.
	ExpectedRenewal Instant `json:"expected_renewal,omitzero"`
	// Lineage is what the history the state keeps (NameHistory) says of
	// the certificate; nil when it says nothing (a one-off scan). Its
	// fields are the certificate's in JSON. It sits behind a pointer
	// because a scan has none: 56 bytes a certificate, 5.6 MB of a scan
	// of 100,000 endpoints; and certificates first seen by the same run,
	// never seen to change, share one. Read it through History, and never
	// write through it.
	*Lineage
}

// Lineage is when certwatch first saw a certificate for its names, and
// when it was seen replacing an earlier one (Previous, that one's
// fingerprint); zero, and empty, for LastChanged and Previous when
// certwatch has not seen its names' certificate change.
type Lineage struct {
	FirstSeen   time.Time `json:"first_seen,omitzero"`
	LastChanged time.Time `json:"last_changed,omitzero"`
	Previous    string    `json:"previous_sha256,omitempty"`
}

// History returns the certificate's Lineage, zero when it has none.
func (c *Certificate) History() Lineage {
	if c.Lineage == nil {
		return Lineage{}
	}
	return *c.Lineage
}

// Replacement names the newer certificate that renewed a served one.
type Replacement struct {
	// SHA256 is its fingerprint: a served leaf's, or that of the PEM ACM
	// gives; empty for an ACM certificate ACM gave no PEM of.
	SHA256 string `json:"sha256,omitempty"`
	// ARN is set when ACM holds it.
	ARN      string    `json:"arn,omitempty"`
	NotAfter time.Time `json:"not_after"`
	// Locations are where it is held at rest, when it is.
	Locations []atrest.Location `json:"locations,omitempty"`
}

// Finding is one problem with one certificate (or, for inconsistent
// deployments and unreachable targets, with one name), with every endpoint
// that shows it.
type Finding struct {
	Kind Kind `json:"kind"`
	Tier Tier `json:"tier"`
	// Certificate is the leaf SHA-256 the finding is about; empty for
	// unreachable targets.
	Certificate string `json:"certificate"`
	// Subject is the leaf's subject common name (or first DNS name), for
	// humans.
	Subject string `json:"subject,omitempty"`
	// Deadline is when the problem becomes (or became) an outage: the
	// NotAfter that matters. For broken-now kinds it is the time of the scan.
	Deadline Instant `json:"deadline"`
	// Endpoints is the blast radius, sorted.
	Endpoints []Endpoint `json:"endpoints"`
	// Message says what is wrong and what to do.
	Message string `json:"message"`
	// Name is set for findings about a name rather than a certificate
	// (inconsistent_deployment, unreachable): "name:port". For findings
	// about an ACM certificate no probed endpoint serves, it is the ARN.
	Name string `json:"name,omitempty"`
	// Records are where else the certificate is on record (ACM, IAM, at
	// rest, CT logs); nil when nowhere, as for most findings. Its fields
	// are the finding's in JSON. It sits behind a pointer because those
	// lists are rare: 88 bytes a finding, 4 MB of a scan of 100,000
	// endpoints. Read it through Refs.
	*Records
	// UnverifiedSince is set on a finding a report carries over from an
	// earlier run because every endpoint of its blast radius failed to
	// answer since (an outage, a cut-short run): it is when the finding
	// was last observed. Zero on a finding observed in the report's own
	// run. Evaluation never sets it; the daemon does.
	UnverifiedSince Instant `json:"unverified_since,omitzero"`
	// Silenced is set on a finding a silence keeps from being announced
	// (certwatch silence): who silenced it, why and until when. It is
	// still reported and shown. Evaluation never sets it; notify's caller
	// does, for the report it publishes.
	Silenced *Silenced `json:"silenced,omitempty"`
}

// Records are where else a finding's certificate is on record.
type Records struct {
	// ACM lists the ACM certificates the finding is about, or that its
	// endpoints serve (matched by serial number).
	ACM []ACMRef `json:"acm,omitempty"`
	// IAM lists the IAM server certificates the finding is about, or that
	// its endpoints serve (matched by serial number).
	IAM []IAMRef `json:"iam,omitempty"`
	// Locations are the places the certificate is held at rest (files,
	// keystores, Kubernetes objects), matched by fingerprint: beside its
	// endpoints for a served certificate, alone for one no endpoint
	// serves. Sorted; shared with the report's at_rest list, not to be
	// modified.
	Locations []atrest.Location `json:"locations,omitempty"`
	// CTLogged are the Certificate Transparency log entries the finding
	// rests on (log, index, when logged): the renewal a stale deployment
	// has not rolled out, the certificate of an unexpected issuer, the
	// certificate naming what no source lists.
	CTLogged []ctcert.Entry `json:"ct_logged,omitempty"`
}

// Refs returns the finding's Records, zero when it has none.
func (f *Finding) Refs() Records {
	if f.Records == nil {
		return Records{}
	}
	return *f.Records
}

// withRecords sets the finding's Records to what set makes of a copy of
// them, nil when that holds nothing: a copy of the finding elsewhere keeps
// its own.
func (f *Finding) withRecords(set func(*Records)) {
	r := f.Refs()
	set(&r)
	f.Records = recordsOf(r)
}

// recordsOf returns r to be kept in a Finding: nil when it holds nothing.
func recordsOf(r Records) *Records {
	if len(r.ACM) == 0 && len(r.IAM) == 0 && len(r.Locations) == 0 && len(r.CTLogged) == 0 {
		return nil
	}
	return &r
}

// Silenced says which silence keeps a finding from being announced.
type Silenced struct {
	// ID is the silence's ("config:..." for one declared in the
	// configuration file).
	ID     string `json:"id"`
	Author string `json:"author"`
	Reason string `json:"reason"`
	// Until is when the silence ends; UpTo the highest tier it covers.
	Until time.Time `json:"until"`
	UpTo  Tier      `json:"up_to"`
}

// ID identifies the finding across runs: its kind and the certificate (or
// name) it is about, "expiring:<sha256>". It is the one ID every view shows
// (the JSON report's "id", the status page, `certwatch alerts`), the one
// `certwatch silence add --id` takes, and the identity of the finding's
// alert, from which notification state and dedup keys are derived. An
// expired certificate keeps the ID of its expiry ("expiring:<sha256>"):
// it is the same problem past its deadline, so its alert goes on (expiry
// does not page anew) and a silence of the expiry holds on.
func (f Finding) ID() string {
	var buf [128]byte
	return string(f.AppendID(buf[:0]))
}

// findingJSON is a Finding without its MarshalJSON.
type findingJSON Finding

// MarshalJSON encodes the finding with its ID first, as "id": what every
// JSON view (the report, /api/v1/report, alerts, notifications' payloads)
// carries so that a finding can be silenced by what is shown.
func (f Finding) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID string `json:"id"`
		findingJSON
	}{f.ID(), findingJSON(f)})
}

// JSONPrefix is the field MarshalJSON writes before the finding's own,
// its ID, appended to dst, for a streaming encoder (internal/jsonstream)
// that writes a report's findings itself.
func (f Finding) JSONPrefix(dst []byte) (key string, value []byte) {
	return "id", f.AppendID(dst)
}

// AppendID appends the finding's ID to dst.
func (f *Finding) AppendID(dst []byte) []byte {
	kind := f.Kind
	if kind == Expired && f.Certificate != "" {
		kind = Expiring
	}
	return append(append(append(dst, kind...), ':'), f.subjectOfID()...)
}

// subjectOfID is what ID says the finding is about: its certificate, or
// its name.
func (f *Finding) subjectOfID() string {
	if f.Certificate != "" && f.Kind != InconsistentDeployment {
		return f.Certificate
	}
	return f.Name
}

// DaysLeft is the number of days from now to the deadline, negative once
// it has passed (see DaysUntil).
func (f Finding) DaysLeft(now time.Time) int {
	return DaysUntil(f.Deadline.Time(), now)
}

// DaysUntil is the number of calendar days (UTC) from now's date to t's,
// negative once t's date has passed: the count that agrees with the date
// printed beside it (a deadline on the 6th is 5 days from the 1st, whatever
// the hours). Every day count certwatch prints is this one. It is exact for
// every pair of times a certificate can carry (years 0001 to 9999), where
// t.Sub(now) saturates at about 292 years.
func DaysUntil(t, now time.Time) int {
	midnight := func(t time.Time) int64 {
		y, m, d := t.UTC().Date()
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
	}
	return int((midnight(t) - midnight(now)) / 86400)
}

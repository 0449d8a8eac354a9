package found

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found/acmcert"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/discovery/found/ctcert"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
	"github.com/certwatch/certwatch/discovery/found/iamcert"
)

// Yield is what one discovery of a source found. A source that partly
// failed yields what it found, or kept from its previous discovery, with
// its error; one that failed yields nothing.
type Yield struct {
	// Targets are the endpoints to probe.
	Targets []discovery.Target
	// Inventory is what policy judges besides what is probed.
	Inventory Inventory
	// Empty counts what the source read that held no certificate (files,
	// ConfigMaps): counted, not an error.
	Empty int
	// Delegating are zones the source read whose delegations it leaves to
	// follow once every source of the pass has discovered, so that a
	// child zone another source reads whole is counted as watched instead
	// of transferred (a Route 53 hosted zone of another account). The
	// pass hands them back to the source (scan.Follower).
	Delegating []Delegating
}

// Delegating is a zone whose delegations are left to follow (see
// Yield.Delegating).
type Delegating struct {
	// Zone is the zone's apex, normalised; Source names it as its
	// targets' Sources do ("route53:111111111111/example.com").
	Zone   string
	Source string
	// Private is set on a Route 53 private hosted zone: what answers for
	// its children inside a VPC is a private zone, not a public one.
	Private bool
	// Delegations are the child zones it delegates.
	Delegations []Delegation
}

// Read is what every source of a pass read, as the pass hands it to the
// sources that left delegations to follow (Yield.Delegating): the zones
// read whole, which may cover a child zone, and the sources that failed,
// which may have hosted one unseen.
type Read struct {
	// Zones are the Route 53 hosted zones read (Inventory.Zones of every
	// source); a hosted zone whose read failed is not among them.
	Zones []hostedzone.Zone
	// Watched are the zones transferred or followed (Inventory.Watched
	// of every source).
	Watched []WatchedZone
	// Failed are the sources whose discovery failed, wholly or in part.
	Failed []SourceFailure
}

// SourceFailure is a source whose discovery failed, and why.
type SourceFailure struct {
	Source string
	Error  string
}

// Route53Source is the name of the Route 53 source of the default
// account; the source of any other account is "route53:<account>".
const Route53Source = "route53"

// IsRoute53Source reports whether name is a Route 53 source's.
func IsRoute53Source(name string) bool {
	return name == Route53Source || strings.HasPrefix(name, Route53Source+":")
}

// Delegation is a child zone a zone delegates: NS records below its apex,
// with the addresses the parent holds for its name servers (glue).
type Delegation struct {
	// Zone is the child zone's apex, normalised.
	Zone string
	// Nameservers are its name servers, by name.
	Nameservers []Nameserver
}

// Nameserver is one name server of a delegation.
type Nameserver struct {
	// Name is the server's name, normalised.
	Name string
	// Glue are its addresses as the parent zone holds them; empty when
	// the name is outside the parent (or the parent holds none).
	Glue []netip.Addr
}

// Names returns the names of d's name servers.
func (d Delegation) Names() []string {
	out := make([]string, len(d.Nameservers))
	for i, ns := range d.Nameservers {
		out[i] = ns.Name
	}
	return out
}

// Inventory is what a source knows besides its targets, as policy judges
// it: certificates held in ACM and IAM, the AWS resources serving
// certificates, the hosted zones read, and certificates held at rest
// (files, keystores, Kubernetes objects). It encodes as JSON, so that a
// part of a run evaluated elsewhere carries the inventory of the site that
// discovered it.
type Inventory struct {
	ACM       []acmcert.Certificate   `json:"acm,omitempty"`
	IAM       []iamcert.Certificate   `json:"iam,omitempty"`
	Consumers []certconsumer.Consumer `json:"consumers,omitempty"`
	Zones     []hostedzone.Zone       `json:"zones,omitempty"`
	// AtRest are the certificates held at rest, one per fingerprint with
	// every location the source found it in (atrest.Set). Two sources
	// may both hold one certificate; policy merges them.
	AtRest []atrest.Certificate `json:"at_rest,omitempty"`
	// Unattached are cert-manager's Certificate resources whose Secret
	// held no certificate the source read: not issued yet, deleted, or
	// left out by the source's selectors. Those whose Secret was read
	// are on the certificate it holds (atrest.Certificate.Issuances).
	Unattached []atrest.Issuance `json:"unattached_issuances,omitempty"`
	// Watched are the DNS zones a source read whole: a configured zone
	// transferred, and the child zones it delegates that were followed.
	Watched []WatchedZone `json:"watched,omitempty"`
	// Gaps are what a source knows it could not watch (coverage gaps):
	// policy turns each into a coverage_gap finding.
	Gaps []Gap `json:"gaps,omitempty"`
	// Networks are the address ranges swept (discovery/networks), with
	// what each sweep saw.
	Networks []Network `json:"networks,omitempty"`
	// CT are the certificates Certificate Transparency logs show for the
	// watched domains (discovery/ct), one per issuance.
	CT []ctcert.Certificate `json:"ct,omitempty"`
	// CTLogs are the CT logs read (discovery/ct) and how far: the
	// self-monitoring finding ct_behind and the metric
	// certwatch_ct_entries_behind come from them.
	CTLogs []ctcert.Progress `json:"ct_logs,omitempty"`
}

// NetworkSourcePrefix starts the source name of every address range
// ("networks:dc1"), as its targets' Sources carry it.
const NetworkSourcePrefix = "networks:"

// FromNetworksOnly reports whether sources (a target's) are address
// ranges alone: the target is an address a sweep found, that no name or
// configured target gave.
func FromNetworksOnly(sources []string) bool {
	for _, s := range sources {
		if len(s) < len(NetworkSourcePrefix) || s[:len(NetworkSourcePrefix)] != NetworkSourcePrefix {
			return false
		}
	}
	return len(sources) > 0
}

// Network is what one sweep of an address range saw.
type Network struct {
	// Name names the network; Source is its source ("networks:NAME").
	Name   string `json:"name"`
	Source string `json:"source"`
	// CIDRs are the ranges swept, Exclude the ranges left out, Ports the
	// ports swept ("443", "6432/postgres").
	CIDRs   []string `json:"cidrs"`
	Exclude []string `json:"exclude,omitempty"`
	Ports   []string `json:"ports"`
	// Rate is the connections a second allowed, Burst how many at once.
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
	// Addresses are the addresses tried, Connections the connects made;
	// Refused, TimedOut and Failed count the connects that did not
	// answer by how; GivenUp the addresses whose last ports were not
	// tried after consecutive timeouts; Excluded the addresses left out
	// by Exclude, Skipped the network, broadcast and multicast addresses
	// never dialled.
	Addresses   int `json:"addresses_tried"`
	Connections int `json:"connections"`
	Refused     int `json:"refused"`
	TimedOut    int `json:"timed_out"`
	Failed      int `json:"failed,omitempty"`
	GivenUp     int `json:"given_up,omitempty"`
	Excluded    int `json:"excluded,omitempty"`
	Skipped     int `json:"skipped,omitempty"`
	// Answered are the ports that accepted a connection, by address and
	// port, with the names the reverse zone gives the address.
	Answered []NetworkEndpoint `json:"answered"`
	// ReverseNote says what went wrong looking up names, if anything.
	ReverseNote string `json:"reverse_note,omitempty"`
	// At is when the sweep started and Duration how long it took;
	// CutShort is set when it ended before every address was tried.
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"duration_ns"`
	CutShort bool          `json:"cut_short,omitempty"`
}

// NetworkEndpoint is one port of an address that accepted a connection.
type NetworkEndpoint struct {
	Address netip.Addr `json:"address"`
	Port    int        `json:"port"`
	// Names are the address's names in the reverse zone (PTR).
	Names []string `json:"names,omitempty"`
}

// WatchedZone is a DNS zone a source transferred.
type WatchedZone struct {
	// Zone is the zone's apex, normalised.
	Zone string `json:"zone"`
	// Source is the name of the source that read it.
	Source string `json:"source"`
	// Parent is set on a child zone reached from a delegation: the zone
	// that delegates it.
	Parent string `json:"parent,omitempty"`
	// Via is set on a delegated child zone that was not followed because
	// another source of the pass reads it whole, and says how:
	// "route53" (a hosted zone), "transfer" (a configured zone) or
	// "delegation" (a child another zone's source followed). Source is
	// then that source.
	Via string `json:"via,omitempty"`
	// Nameservers are the servers ("HOST:PORT") a followed child was
	// asked, in order.
	Nameservers []string `json:"nameservers,omitempty"`
	// Targets is how many targets the zone itself gave.
	Targets int `json:"targets"`
}

// GapReason says why part of the estate is not watched.
type GapReason string

// Reasons of coverage gaps.
const (
	// GapDelegationRefused: the name servers of a delegated child zone
	// refused its transfer (REFUSED, NOTAUTH).
	GapDelegationRefused GapReason = "delegation_refused"
	// GapDelegationTimeout: the transfer of a delegated child zone timed
	// out.
	GapDelegationTimeout GapReason = "delegation_timeout"
	// GapDelegationBroken: the transfer of a delegated child zone was cut
	// short, did not read as one version of the zone, or failed its TSIG
	// check.
	GapDelegationBroken GapReason = "delegation_broken"
	// GapDelegationFailed: a delegated child zone could not be transferred
	// for another reason: no address for its name servers, nothing
	// listening.
	GapDelegationFailed GapReason = "delegation_failed"
	// GapDelegationLimit: a delegated child zone was not followed, being
	// deeper or one more than the configured bounds allow.
	GapDelegationLimit GapReason = "delegation_limit"
	// GapUnmonitoredZone: certificates name DNS names under a zone no
	// source watches.
	GapUnmonitoredZone GapReason = "unmonitored_zone"
	// GapUnverifiedInUse: an ACM or IAM certificate in use by AWS
	// resources was never seen on a probed endpoint.
	GapUnverifiedInUse GapReason = "unverified_in_use"
	// GapSecretNotRead: a cert-manager Certificate reports Ready, but the
	// Secret it writes held no certificate the Kubernetes source read
	// (left out by its label_selector or secret_types, or deleted).
	GapSecretNotRead GapReason = "secret_not_read"
	// GapCTOnly: a certificate in Certificate Transparency names DNS
	// names under a watched domain that no source but CT lists.
	GapCTOnly GapReason = "ct_only_names"
)

// Delegation reports whether the gap is a delegated zone not watched.
func (r GapReason) Delegation() bool {
	switch r {
	case GapDelegationRefused, GapDelegationTimeout, GapDelegationBroken, GapDelegationFailed, GapDelegationLimit:
		return true
	}
	return false
}

// Gap is one thing a source knows it did not watch.
type Gap struct {
	Reason GapReason `json:"reason"`
	// Zone is the zone not watched.
	Zone string `json:"zone"`
	// Parent is the zone that delegates it, for a delegation.
	Parent string `json:"parent,omitempty"`
	// Source is the name of the source that found the gap.
	Source string `json:"source"`
	// Nameservers are the zone's name servers as its parent names them;
	// Servers the addresses ("HOST:PORT") asked, if any.
	Nameservers []string `json:"nameservers,omitempty"`
	Servers     []string `json:"servers,omitempty"`
	// Detail says what failed; Fix what to do.
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// Records is how many inventory records inv holds: certificates and the
// resources serving them (zones are not counted).
func (inv *Inventory) Records() int {
	return len(inv.ACM) + len(inv.IAM) + len(inv.Consumers) + len(inv.AtRest) + len(inv.CT)
}

// Append appends the records of other to inv. Certificates at rest (a
// cluster's may be tens of thousands) are taken as other holds them when
// inv holds none yet, not copied: its list is then other's, clipped, so a
// later Append copies rather than writes into it.
func (inv *Inventory) Append(other Inventory) {
	inv.ACM = append(inv.ACM, other.ACM...)
	inv.IAM = append(inv.IAM, other.IAM...)
	inv.Consumers = append(inv.Consumers, other.Consumers...)
	inv.Zones = append(inv.Zones, other.Zones...)
	if len(inv.AtRest) == 0 {
		inv.AtRest = slices.Clip(other.AtRest)
	} else {
		inv.AtRest = append(inv.AtRest, other.AtRest...)
	}
	inv.Unattached = append(inv.Unattached, other.Unattached...)
	inv.Watched = append(inv.Watched, other.Watched...)
	inv.Gaps = append(inv.Gaps, other.Gaps...)
	inv.Networks = append(inv.Networks, other.Networks...)
	inv.CT = append(inv.CT, other.CT...)
	inv.CTLogs = append(inv.CTLogs, other.CTLogs...)
}

// Package found is the contract between the discovery sources and the
// pass that reads them: what one discovery of a source found (Yield). It
// is plain data and imports no cloud SDK, so every stage downstream can
// read it.
//
// Every source in discovery/* has one method, Discover(ctx) (Yield,
// error), and yields what it has: a DNS zone targets to probe, ACM and IAM
// certificates held at rest, the files and Kubernetes sources the
// certificates they hold (atrest), an AWS account the resources that serve
// certificates and the hosted zones it read. A new kind of source is one
// package and one case in internal/cli; a new kind of thing found is one
// field here, which policy learns to judge.
package found

import (
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/acm/acmcert"
	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/consumers/certconsumer"
	"github.com/certwatch/certwatch/discovery/iam/iamcert"
	"github.com/certwatch/certwatch/discovery/route53/hostedzone"
)

// Yield is what one discovery of a source found. A source that partly
// failed yields what it found, or kept from its previous discovery, with
// its error; one that failed yields nothing.
type Yield struct {
	// Targets are the endpoints to probe.
	Targets []discovery.Target
	// Inventory is what policy judges besides what is probed.
	Inventory Inventory
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
}

// Records is how many inventory records inv holds: certificates and the
// resources serving them (zones are not counted).
func (inv *Inventory) Records() int {
	return len(inv.ACM) + len(inv.IAM) + len(inv.Consumers) + len(inv.AtRest)
}

// Append appends the records of other to inv.
func (inv *Inventory) Append(other Inventory) {
	inv.ACM = append(inv.ACM, other.ACM...)
	inv.IAM = append(inv.IAM, other.IAM...)
	inv.Consumers = append(inv.Consumers, other.Consumers...)
	inv.Zones = append(inv.Zones, other.Zones...)
	inv.AtRest = append(inv.AtRest, other.AtRest...)
}

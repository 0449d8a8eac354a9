// Package hostedzone holds what certwatch keeps of a Route 53 hosted
// zone (its name, VPCs, ACM validation records and the records pointing at
// AWS resources): plain data that policy and state read, filled by
// discovery/route53. It imports no AWS SDK package.
package hostedzone

import "github.com/certwatch/certwatch/discovery"

// Zone is one hosted zone as discovery saw it.
type Zone struct {
	// ID is the hosted zone ID without the "/hostedzone/" prefix.
	ID string `json:"id"`
	// Name is the zone apex, normalised (lower case, no trailing dot).
	Name    string `json:"name"`
	Private bool   `json:"private"`
	// VPCs are the VPCs a private zone is associated with.
	VPCs    []VPC  `json:"vpcs,omitempty"`
	Account string `json:"account,omitempty"`
	// RecordSets is the number of record sets read.
	RecordSets int `json:"record_sets"`
	// ValidationRecords are the zone's CNAME records whose owner's first
	// label starts with "_": the shape of ACM DNS validation records
	// ("_<hash>.name" → "_<hash>.<id>.acm-validations.aws"). Other records
	// are not kept, so memory stays bounded by the zones' size.
	ValidationRecords []Record `json:"validation_records,omitempty"`
	// AWSTargets are the zone's records that point at AWS resources: alias
	// records (Type "ALIAS", Value the alias's DNS name) and CNAMEs to
	// names under amazonaws.com or cloudfront.net, so a load balancer or
	// distribution can be told which names reach it.
	AWSTargets []Record `json:"aws_targets,omitempty"`
}

// VPC is a VPC associated with a private hosted zone.
type VPC struct {
	ID     string `json:"id"`
	Region string `json:"region"`
}

// Record is a DNS record; Name and Value are normalised like target names.
type Record struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Source names the zone as its targets' Sources do:
// "route53:<account>/<zone>", or "route53:<zone>" without an account,
// "(private)" appended for a private zone.
func (z Zone) Source() string {
	src := "route53:"
	if z.Account != "" {
		src += z.Account + "/"
	}
	src += z.Name
	if z.Private {
		src += "(private)"
	}
	return src
}

// Contains reports whether name is the zone's apex or below it.
func (z Zone) Contains(name string) bool {
	return discovery.InZone(discovery.NormalizeName(name), z.Name)
}

// CNAME returns the value of the validation-shaped CNAME record name, if
// the zone has one (see ValidationRecords).
func (z Zone) CNAME(name string) (string, bool) {
	name = discovery.NormalizeName(name)
	for _, r := range z.ValidationRecords {
		if r.Name == name {
			return r.Value, true
		}
	}
	return "", false
}

// PublicZoneFor returns the most specific public zone in zones that
// contains name: where a DNS validation record for name must live, since
// ACM validates through public DNS. ok is false when certwatch sees no such
// zone (the record may then live with another DNS provider).
func PublicZoneFor(zones []Zone, name string) (zone Zone, ok bool) {
	name = discovery.NormalizeName(name)
	for _, z := range zones {
		if !z.Private && discovery.InZone(name, z.Name) && (!ok || len(z.Name) > len(zone.Name)) {
			zone, ok = z, true
		}
	}
	return zone, ok
}

package scan

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/found/certconsumer"
	"github.com/certwatch/certwatch/discovery/found/hostedzone"
	"github.com/certwatch/certwatch/policy"
)

// Inventory is what a pass knows besides its targets' observations, as
// policy judges it (see found.Inventory): what the sources' last Discover
// found.
type Inventory = found.Inventory

// Inventory returns the inventory of the last Discover, by source in the
// order of Sources. The slices are the sources' own: treat them as
// read-only. Call it after Discover, not while one runs.
func (p *Pass) Inventory() Inventory {
	var inv Inventory
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.Sources {
		inv.Append(p.inventory[s.Name()])
	}
	return inv
}

// addInventory hands the inventories to ev, as one: their zones together
// (SetZones replaces), then every certificate and consumer.
func addInventory(ev *policy.Evaluator, invs ...*Inventory) {
	var zones []hostedzone.Zone
	for _, inv := range invs {
		zones = append(zones, inv.Zones...)
	}
	ev.SetZones(zones)
	for _, inv := range invs {
		if len(inv.ACM) > 0 {
			ev.AddACM(inv.ACM...)
		}
		if len(inv.IAM) > 0 {
			ev.AddIAM(inv.IAM...)
		}
		if len(inv.Consumers) > 0 {
			ev.AddConsumers(inv.Consumers...)
		}
		if len(inv.Watched)+len(inv.Gaps) > 0 {
			ev.AddCoverage(inv.Watched, inv.Gaps)
		}
		if len(inv.AtRest) > 0 {
			ev.AddAtRest(inv.AtRest...)
		}
		if len(inv.Unattached) > 0 {
			ev.AddUnattached(inv.Unattached...)
		}
		if len(inv.CT) > 0 {
			ev.AddCT(inv.CT...)
		}
	}
}

// ListenerProbeLabel is the label put before a wildcard's base to ask a
// resource for a certificate that has no other name
// ("*.img.example" is asked for as "certwatch-probe.img.example").
const ListenerProbeLabel = "certwatch-probe"

// addListenerTargets adds to each yield that lists AWS resources serving
// certificates (Inventory.Consumers) a target per (resource, listener port,
// certificate) that asks the resource itself, at its own addresses
// (discovery.Target.Via), for one of the certificate's names: a load
// balancer serves an additional (SNI) certificate only to clients asking
// for its names, so probing it under its own DNS name sees the default
// certificate alone. A load balancer's certificates' names come from the
// ACM and IAM inventories of every yield (a certificate none of them
// holds is not asked for); a distribution's or API Gateway domain's are
// its aliases. The default certificate of a load balancer's listener is
// not asked for: its own DNS name gets it. Nor is a name already probed at
// that resource (a Route 53 alias record leading to it).
func addListenerTargets(yields []found.Yield) {
	names := map[string][]string{}  // certificate ARN -> its names
	atResource := map[string]bool{} // "name:port resource" already probed there
	has := false
	for i := range yields {
		inv := &yields[i].Inventory
		for j := range inv.ACM {
			names[inv.ACM[j].ARN] = inv.ACM[j].Names()
		}
		for j := range inv.IAM {
			names[inv.IAM[j].ARN] = inv.IAM[j].DNSNames
		}
		for j := range yields[i].Targets {
			t := &yields[i].Targets[j]
			if t.Via == "" && t.Resolve != "" {
				atResource[t.Key()+" "+strings.TrimPrefix(t.Resolve, "dualstack.")] = true
			}
		}
		has = has || len(inv.Consumers) > 0
	}
	if !has {
		return
	}
	for i := range yields {
		y := &yields[i]
		var more []discovery.Target
		for _, k := range y.Inventory.Consumers {
			lb := k.Kind == certconsumer.KindELBv2 || k.Kind == certconsumer.KindELB
			for _, l := range k.Listeners {
				certs := l.Certificates
				if lb && len(certs) > 0 {
					certs = certs[1:]
				}
				for _, arn := range certs {
					ns := k.Aliases
					if lb {
						ns = names[arn]
					}
					sni := sniName(ns)
					if sni == "" || k.DNSName == "" || atResource[net.JoinHostPort(sni, strconv.Itoa(l.Port))+" "+k.DNSName] {
						continue
					}
					more = append(more, discovery.Target{Name: sni, Port: l.Port, Via: k.DNSName, Sources: []string{k.Source()}})
				}
			}
		}
		if len(more) > 0 {
			y.Targets = discovery.Merge(y.Targets, more)
		}
	}
}

// sniName picks the name to ask for a certificate named names: its first
// name that is a host name, else its first wildcard's base under
// ListenerProbeLabel; "" when it has neither.
func sniName(names []string) string {
	var wildcard string
	for _, n := range names {
		n = discovery.NormalizeName(n)
		base, isWildcard := strings.CutPrefix(n, "*.")
		switch {
		case !strings.Contains(base, ".") || strings.Contains(base, "*"):
		case isWildcard:
			if wildcard == "" {
				wildcard = ListenerProbeLabel + "." + base
			}
		default:
			if _, err := netip.ParseAddr(n); err != nil {
				return n
			}
		}
	}
	return wildcard
}

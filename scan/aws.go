package scan

import (
	"github.com/certwatch/certwatch/discovery/found"
	"github.com/certwatch/certwatch/discovery/route53/hostedzone"
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

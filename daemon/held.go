package daemon

import (
	"fmt"
	"slices"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/scan"
)

// heldTargets is a list of targets as the daemon holds it from a
// discovery to the probe runs that read it, and between them: packed
// (scan.EncodeTargetList, compressed JSON): 0.6 MB for the 100,000 targets
// of TestInventoryHeldPacked, whose list is about 18 MB. A probe run
// unpacks it for its probing and lets the list go before it judges; a
// list that does not pack (a target whose protocol has no name) is held
// as it is.
type heldTargets struct {
	packed []byte
	list   []discovery.Target
	// n is the number of targets; merged says the list is as
	// discovery.Merge returns it (discovery.Merged).
	n      int
	merged bool
}

// holdTargets holds list, which must not be written afterwards.
func holdTargets(list []discovery.Target) heldTargets {
	h := heldTargets{n: len(list), merged: len(list) > 0 && discovery.Merged(list)}
	if len(list) == 0 {
		return h
	}
	b, err := scan.EncodeTargetList(list)
	if err != nil {
		h.list = list
		return h
	}
	h.packed = b
	return h
}

// targets returns the list held, in a slice of the caller's own (which
// it may reorder or cut), each target's sources shared through dec. The
// error is a packed list that does not decode: the daemon packed it
// itself, so only damaged memory gives one.
func (h heldTargets) targets(dec *scan.Decoder) ([]discovery.Target, error) {
	if h.packed == nil {
		return slices.Clone(h.list), nil
	}
	return dec.Targets(h.packed, h.n)
}

// probed is the inventory h unpacked for a probe run. Its error says the
// run probes nothing: the daemon packed h itself, so only damaged memory
// gives one.
func (h heldTargets) probed() ([]discovery.Target, error) {
	ts, err := h.targets(new(scan.Decoder))
	if err != nil {
		return nil, fmt.Errorf("probe run: the inventory of %d targets held since discovery cannot be read back: %w; nothing was probed, published or notified, and the next discovery replaces it", h.n, err)
	}
	return ts, nil
}

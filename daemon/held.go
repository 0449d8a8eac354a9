package daemon

import (
	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/scan"
)

// heldTargets is a list of targets as the daemon holds it from a
// discovery to the probe runs that read it, and between them: packed
// (scan.EncodeTargets, compressed JSON), about 2 MB for a zone of 100,000
// targets whose list is about 18 MB. A probe run unpacks it for its
// probing and lets the list go before it judges; a list that does not
// pack (a target whose protocol has no name) is held as it is.
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
	b, err := scan.EncodeTargets(list)
	if err != nil {
		h.list = list
		return h
	}
	h.packed = b
	return h
}

// targets returns the list held, each target's sources shared through
// dec. The error is a packed list that does not decode: the daemon
// packed it itself, so only damaged memory gives one.
func (h heldTargets) targets(dec *scan.Decoder) ([]discovery.Target, error) {
	if h.packed == nil {
		return h.list, nil
	}
	return dec.Targets(h.packed)
}

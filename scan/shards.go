package scan

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/certwatch/certwatch/discovery"
)

// CutShards cuts the targets of a run into shards of about size targets,
// for processes that share the run's probing to claim one at a time
// (Collect each, Evaluate them together). Skipped targets (Skip set) are
// left out: they are not probed. Every other target is in exactly one
// shard, and shards keep the targets' order.
//
// Targets that share an address are never in different shards: the
// targets linked by shared addresses (Target.Addresses), or by one name
// they resolve (Target.ResolveName), form a group that one shard holds
// whole, however large (a load balancer behind ten thousand names is one
// shard of ten thousand). So one process probes every endpoint of an
// address, its per-address connection limit (probe.per_address) and its
// breaker hold for the whole fleet, and no two processes connect to one
// address at once. The limit: addresses a target gets only when it is
// probed (no Addresses: its ResolveName is looked up then) are not known
// here, so two targets of different names that resolve to one address may
// be in two shards, and two processes may then each open per_address
// connections to it.
//
// Groups are packed first-fit by decreasing size, so the shards are few
// and full; the output depends only on the input (same targets, same
// shards). A size below 1 counts as 1. The targets' slices (Addresses,
// Sources) are shared with the input.
func CutShards(targets []discovery.Target, size int) [][]discovery.Target {
	size = max(size, 1)
	var live []int // indexes of the targets to probe
	for i := range targets {
		if targets[i].Skip == "" {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return nil
	}
	// Union-find over live's positions, joined through their addresses
	// and resolved names.
	parent := make([]int32, len(live))
	for i := range parent {
		parent[i] = int32(i)
	}
	find := func(i int32) int32 {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int32) {
		a, b = find(a), find(b)
		if a != b {
			parent[max(a, b)] = min(a, b) // the earlier target is the root
		}
	}
	byAddr := make(map[netip.Addr]int32)
	byName := make(map[string]int32)
	for i, ti := range live {
		t := &targets[ti]
		for _, a := range t.Addresses {
			if j, ok := byAddr[a]; ok {
				union(int32(i), j)
			} else {
				byAddr[a] = int32(i)
			}
		}
		n := t.ResolveName()
		if j, ok := byName[n]; ok {
			union(int32(i), j)
		} else {
			byName[n] = int32(i)
		}
	}
	// The groups, each in target order, by root (its first target).
	groups := make(map[int32][]int32)
	var roots []int32
	for i := range live {
		r := find(int32(i))
		if _, ok := groups[r]; !ok {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], int32(i))
	}
	// Largest first; among equals, the one whose first target comes first.
	slices.SortStableFunc(roots, func(a, b int32) int { return cmp.Compare(len(groups[b]), len(groups[a])) })

	// Groups of size or more first (they come first), each a shard of its
	// own; then the bins, in the order first-fit opens them.
	var shards, bins [][]int32
	room := newFirstFit(len(roots), size)
	for _, r := range roots {
		g := groups[r]
		if len(g) >= size {
			shards = append(shards, g)
			continue
		}
		b := room.take(len(g))
		if b == len(bins) {
			bins = append(bins, nil)
		}
		bins[b] = append(bins[b], g...)
	}
	shards = append(shards, bins...)
	out := make([][]discovery.Target, len(shards))
	for i, s := range shards {
		slices.Sort(s)
		out[i] = make([]discovery.Target, len(s))
		for j, k := range s {
			out[i][j] = targets[live[k]]
		}
	}
	return out
}

// firstFit finds the first of n bins of one capacity with room for an
// item, in O(log n): a segment tree of the room each bin has left. Bins
// fill in order: bin k is first used when bins 0..k-1 have no room.
type firstFit struct {
	leaves int
	room   []int // room[1] is the root; bin k is room[leaves+k]
}

func newFirstFit(n, capacity int) *firstFit {
	leaves := 1
	for leaves < n {
		leaves *= 2
	}
	f := &firstFit{leaves: leaves, room: make([]int, 2*leaves)}
	for k := range leaves {
		f.room[leaves+k] = capacity
	}
	for i := leaves - 1; i >= 1; i-- {
		f.room[i] = max(f.room[2*i], f.room[2*i+1])
	}
	return f
}

// take places an item of size n (at most the capacity, and no more items
// than bins) in the first bin with room for it and returns the bin.
func (f *firstFit) take(n int) int {
	i := 1
	for i < f.leaves {
		if f.room[2*i] >= n {
			i = 2 * i
		} else {
			i = 2*i + 1
		}
	}
	f.room[i] -= n
	for j := i / 2; j >= 1; j /= 2 {
		f.room[j] = max(f.room[2*j], f.room[2*j+1])
	}
	return i - f.leaves
}

package dnszone

import (
	"cmp"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/discovery"
)

// zoneIndex keeps what targets need from a zone, and nothing else: each
// relevant name once (interned, referred to by a uint32 id), addresses as
// (id, address) pairs, CNAME edges, SRV targets and delegation points. No
// dns.RR outlives the message it arrived in.
//
// Growing lists are chunked so that a zone of millions of records never
// holds two copies of a list while it grows.
type zoneIndex struct {
	apex  string          // normalised zone name
	ids   nameTable       // name -> id; dropped once the transfer is done
	names chunked[string] // id -> name
	flags chunked[uint8]  // id -> name flags
	addrs chunked[nameAddr]
	cname map[uint32]uint32 // owner id -> target id
	srvs  []srvTarget
	cuts  bool // any delegation below the apex
}

// nameTable maps names to ids: open addressing with linear probing over
// slots that hold the top 32 bits of the name's hash and its id + 1 (0 is
// free). Growing it rehashes no string, and a slot is 8 bytes, a third of
// what a map[string]uint32 entry takes.
type nameTable struct {
	seed  maphash.Seed
	slots []uint64
	shift uint // 64 - log2(len(slots))
	n     int
}

const nameTableBits = 10 // initial log2 size

func newNameTable() nameTable {
	return nameTable{seed: maphash.MakeSeed(), slots: make([]uint64, 1<<nameTableBits), shift: 64 - nameTableBits}
}

func (t *nameTable) hash(name string) uint64 { return maphash.String(t.seed, name) }

// find returns the id of name, whose hash is h, looking names up in names.
func (t *nameTable) find(h uint64, name string, names *chunked[string]) (uint32, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := h >> t.shift; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if s>>32 == h>>32 {
			if id := uint32(s) - 1; *names.at(id) == name {
				return id, true
			}
		}
	}
}

// insert adds id for a name with hash h that find did not find. The table
// doubles when half full.
func (t *nameTable) insert(h uint64, id uint32) {
	if 2*(t.n+1) > len(t.slots) {
		old := t.slots
		t.slots = make([]uint64, 2*len(old))
		t.shift--
		for _, s := range old {
			if s != 0 {
				t.put(s)
			}
		}
	}
	t.put(h>>32<<32 | uint64(id+1))
	t.n++
}

func (t *nameTable) put(s uint64) {
	mask := uint64(len(t.slots) - 1)
	// The index is the hash's top bits, which the slot keeps.
	i := (s >> 32 << 32) >> t.shift
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// chunked is an append-only list stored in fixed-size chunks.
type chunked[T any] struct {
	chunks [][]T
	n      int
}

const chunkBits = 12 // 4096 elements a chunk

func (c *chunked[T]) append(v T) {
	if c.n&(1<<chunkBits-1) == 0 {
		c.chunks = append(c.chunks, make([]T, 0, 1<<chunkBits))
	}
	last := &c.chunks[len(c.chunks)-1]
	*last = append(*last, v)
	c.n++
}

func (c *chunked[T]) at(i uint32) *T { return &c.chunks[i>>chunkBits][i&(1<<chunkBits-1)] }

func (c *chunked[T]) len() int { return c.n }

// Name flags.
const (
	hasAddr     uint8 = 1 << iota // owns A or AAAA records
	hasCNAME                      // owns a CNAME record
	isCut                         // owns NS records below the apex: a delegation
	isOutside                     // outside the zone's authority: not a subdomain, or at/below a cut
	isSRVTarget                   // the target of a TLS service's SRV record
)

// nameAddr is one address of name id, 24 bytes rather than the 32 a
// netip.Addr and an id would take.
type nameAddr struct {
	ip [16]byte
	id uint32
	v4 bool
}

type srvTarget struct {
	id   uint32
	port uint16
}

// maxChain bounds CNAME chains followed inside the zone; longer chains are
// treated like loops. Resolvers give up well before this.
const maxChain = 16

func newZoneIndex(apex string) *zoneIndex {
	return &zoneIndex{apex: apex, ids: newNameTable(), cname: make(map[uint32]uint32)}
}

// normalise returns name lower case without its trailing dot. It allocates
// only when name has upper-case letters.
func normalise(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// inZone reports whether name is the apex or below it.
func (z *zoneIndex) inZone(name string) bool {
	if len(name) == len(z.apex) {
		return name == z.apex
	}
	return len(name) > len(z.apex) && name[len(name)-len(z.apex)-1] == '.' && strings.HasSuffix(name, z.apex)
}

func (z *zoneIndex) intern(name string) uint32 {
	h := z.ids.hash(name)
	if id, ok := z.ids.find(h, name, &z.names); ok {
		return id
	}
	id := uint32(z.names.len())
	z.ids.insert(h, id)
	z.names.append(name)
	var f uint8
	if !z.inZone(name) {
		f = isOutside
	}
	z.flags.append(f)
	return id
}

// add folds one transferred record into the index.
func (z *zoneIndex) add(rr dns.RR) {
	owner := normalise(rr.Header().Name)
	if !z.inZone(owner) {
		return // not the zone's data; a well-behaved server never sends it
	}
	switch v := rr.(type) {
	case *dns.A:
		ip4 := v.A.To4()
		if ip4 == nil {
			return
		}
		a := nameAddr{id: z.intern(owner), v4: true}
		copy(a.ip[:], ip4)
		*z.flags.at(a.id) |= hasAddr
		z.addrs.append(a)
	case *dns.AAAA:
		if len(v.AAAA) != 16 {
			return
		}
		a := nameAddr{id: z.intern(owner)}
		copy(a.ip[:], v.AAAA)
		*z.flags.at(a.id) |= hasAddr
		z.addrs.append(a)
	case *dns.CNAME:
		id := z.intern(owner)
		*z.flags.at(id) |= hasCNAME
		z.cname[id] = z.intern(normalise(v.Target))
	case *dns.SRV:
		target := normalise(v.Target)
		if target == "" || v.Port == 0 {
			return // "." means the service is not offered here (RFC 2782)
		}
		if !discovery.TLSService(owner) {
			return
		}
		z.srvs = append(z.srvs, srvTarget{id: z.intern(target), port: v.Port})
	case *dns.NS:
		if owner != z.apex {
			*z.flags.at(z.intern(owner)) |= isCut
			z.cuts = true
		}
	}
}

// markDelegated flags names at or below a delegation point as outside the
// zone's authority: their addresses are glue, not the zone's own data.
func (z *zoneIndex) markDelegated() {
	if !z.cuts {
		return
	}
	for id := range uint32(z.names.len()) {
		f := z.flags.at(id)
		if *f&isOutside != 0 {
			continue
		}
		for n := *z.names.at(id); n != z.apex; {
			if cid, ok := z.ids.find(z.ids.hash(n), n, &z.names); ok && *z.flags.at(cid)&isCut != 0 {
				*f |= isOutside
				break
			}
			i := strings.IndexByte(n, '.')
			if i < 0 {
				break
			}
			n = n[i+1:]
		}
	}
}

// addressTable returns every name's addresses, sorted and without
// duplicates, in one array: name id owns all[start[id]:start[id+1]]. It is a
// counting sort by id, so no second copy of the (id, address) list is made,
// and it releases that list.
func (z *zoneIndex) addressTable() (all []netip.Addr, start []uint32) {
	n := z.names.len()
	start = make([]uint32, n+1)
	for _, c := range z.addrs.chunks {
		for _, a := range c {
			start[a.id+1]++
		}
	}
	for i := 1; i <= n; i++ {
		start[i] += start[i-1]
	}
	// start[id+1] is now the end of id's range; fill each range from its end,
	// which leaves start[id+1] at the range's beginning.
	all = make([]netip.Addr, z.addrs.len())
	for _, c := range z.addrs.chunks {
		for _, a := range c {
			start[a.id+1]--
			if a.v4 {
				all[start[a.id+1]] = netip.AddrFrom4([4]byte(a.ip[:4]))
			} else {
				all[start[a.id+1]] = netip.AddrFrom16(a.ip)
			}
		}
	}
	z.addrs = chunked[nameAddr]{}
	copy(start, start[1:])
	start[n] = uint32(len(all))
	// Sort and de-duplicate each range, compacting the array as we go.
	w := uint32(0)
	for id := range n {
		lo, hi := start[id], start[id+1]
		r := all[lo:hi]
		slices.SortFunc(r, netip.Addr.Compare)
		r = slices.Compact(r)
		start[id] = w
		w += uint32(copy(all[w:], r))
	}
	start[n] = w
	return all[:w:w], start
}

// resolution is where a name's addresses come from.
type resolution struct {
	addrs   []netip.Addr // known from the zone
	resolve string       // else the name to look up ("" = the target name)
	loop    bool         // a CNAME chain that loops or is too long
}

// follow resolves id through CNAMEs inside the zone.
func (z *zoneIndex) follow(id uint32, all []netip.Addr, start []uint32) resolution {
	cur := id
	for range maxChain {
		switch f := *z.flags.at(cur); {
		case f&isOutside != 0:
			if cur == id {
				return resolution{}
			}
			return resolution{resolve: *z.names.at(cur)}
		case f&hasAddr != 0:
			lo, hi := start[cur], start[cur+1]
			return resolution{addrs: all[lo:hi:hi]}
		case f&hasCNAME != 0:
			cur = z.cname[cur]
		case cur == id:
			return resolution{} // no data in the zone: look the name up
		default:
			return resolution{resolve: *z.names.at(cur)} // dangling: let the lookup say so
		}
	}
	return resolution{loop: true}
}

// targets turns the index into targets, sorted by name and port. It
// consumes the index.
//
// It sorts name ids, not targets: a uint32 moves for a 112-byte Target, and
// the targets are then built in order, each name's ports together.
func (z *zoneIndex) targets(ports []int, filter discovery.Filter, sources []string) []discovery.Target {
	z.markDelegated()
	z.ids = nameTable{} // no more lookups by name; let the table go before targets are allocated
	all, start := z.addressTable()

	// SRV targets by id, then port, without duplicates; each such name is
	// flagged so that its ports can be found by binary search below.
	srvs := z.srvs
	z.srvs = nil
	slices.SortFunc(srvs, func(a, b srvTarget) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.port, b.port)) })
	srvs = slices.Compact(srvs)
	for _, s := range srvs {
		*z.flags.at(s.id) |= isSRVTarget
	}

	// The names that become targets, in name order.
	owner := func(f uint8) bool { return f&(hasAddr|hasCNAME) != 0 && f&isOutside == 0 }
	var ids []uint32
	nOwners := 0
	for id := range uint32(z.names.len()) {
		f := *z.flags.at(id)
		if !owner(f) && f&isSRVTarget == 0 {
			continue
		}
		if !filter.Keep(*z.names.at(id)) {
			continue
		}
		if owner(f) {
			nOwners++
		}
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uint32) int { return strings.Compare(*z.names.at(a), *z.names.at(b)) })

	sorted := slices.Sorted(slices.Values(ports))
	out := make([]discovery.Target, 0, nOwners*len(ports)+len(srvs))
	emit := func(name string, port int, r resolution) {
		t := discovery.Target{Name: name, Port: port, Addresses: r.addrs, Resolve: r.resolve, Sources: sources}
		switch {
		case strings.HasPrefix(name, "*."):
			t.Addresses, t.Resolve = nil, ""
			t.Skip = "wildcard owner: no single name to probe"
		case r.loop:
			t.Skip = "CNAME chain loops or is longer than 16 names: no address to probe"
		}
		out = append(out, t)
	}
	var merged []int
	for _, id := range ids {
		name, f := *z.names.at(id), *z.flags.at(id)
		merged = merged[:0]
		if owner(f) {
			merged = append(merged, sorted...)
		}
		if f&isSRVTarget != 0 {
			i, _ := slices.BinarySearchFunc(srvs, id, func(s srvTarget, id uint32) int { return cmp.Compare(s.id, id) })
			for ; i < len(srvs) && srvs[i].id == id; i++ {
				if p := int(srvs[i].port); !owner(f) || !slices.Contains(sorted, p) {
					merged = append(merged, p)
				}
			}
			slices.Sort(merged)
		}
		r := z.follow(id, all, start)
		for _, p := range merged {
			emit(name, p, r)
		}
	}
	return out
}

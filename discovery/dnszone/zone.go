package dnszone

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/discovery/zonerules"
)

// zoneIndex keeps what targets need from a zone, and nothing else: each
// relevant name once (interned, referred to by a uint32 id), addresses as
// (id, address) pairs, CNAME edges, SRV targets and delegation points. No
// dns.RR outlives the message it arrived in.
//
// Names are normalised presentation-format bytes (lower case, no trailing
// dot) kept in an arena, and every growing list is chunked, so that a zone
// of millions of records holds no pointer per name for the collector to
// follow and never holds two copies of a list while it grows.
type zoneIndex struct {
	apex  string          // normalised zone name
	ids   nameTable       // name -> id; dropped once the transfer is done
	names nameArena       // id -> name
	flags chunked[uint8]  // id -> name flags
	v4    chunked[uint64] // id<<32 | IPv4 address
	v6    chunked[addr6]
	cname map[uint32]uint32 // owner id -> target id
	srvs  []srvTarget       // SRV and MX targets
	cuts  bool              // any delegation below the apex
	ns    []nsEdge          // NS records below the apex: delegation point and name server

	protocols discovery.PortProtocols // overrides of the port table, for SRV services named by their port

	owner, target []byte // scratch for add
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

func (t *nameTable) hash(name []byte) uint64 { return maphash.Bytes(t.seed, name) }

// find returns the id of name, whose hash is h, looking names up in names.
func (t *nameTable) find(h uint64, name []byte, names *nameArena) (uint32, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := h >> t.shift; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if s>>32 == h>>32 {
			if id := uint32(s) - 1; bytes.Equal(names.at(id), name) {
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

// nameArena stores names back to back in 64 KiB blocks (a name never spans
// two) and, per id, where its bytes are: 8 bytes a name besides the name
// itself, against 16 for a string header plus the rounding of a separate
// allocation.
type nameArena struct {
	blocks [][]byte
	refs   chunked[uint64] // id -> block<<32 | offset<<16 | length
}

const arenaBlock = 64 << 10

// add appends name, which must be shorter than arenaBlock, as the next id.
func (a *nameArena) add(name []byte) {
	if len(a.blocks) == 0 || len(a.blocks[len(a.blocks)-1])+len(name) >= arenaBlock {
		a.blocks = append(a.blocks, make([]byte, 0, arenaBlock))
	}
	b := &a.blocks[len(a.blocks)-1]
	a.refs.append(uint64(len(a.blocks)-1)<<32 | uint64(len(*b))<<16 | uint64(len(name)))
	*b = append(*b, name...)
}

// at returns the bytes of name id; they are never changed.
func (a *nameArena) at(id uint32) []byte {
	r := *a.refs.at(id)
	off := int(r >> 16 & 0xffff)
	return a.blocks[r>>32][off : off+int(r&0xffff) : off+int(r&0xffff)]
}

func (a *nameArena) len() int { return a.refs.len() }

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
	hasV6                         // owns AAAA records
	isService                     // its first label is a service label: never a host (zonerules.Host)
)

// addr6 is one IPv6 address of name id.
type addr6 struct {
	ip [16]byte
	id uint32
}

// srvTarget is a name an SRV or MX record makes a target of, with the
// port and protocol the record gives it. via is the name whose addresses
// it is probed at: the record's target, which is id itself except for
// XMPP, whose target is named by its domain (see addSRV).
type srvTarget struct {
	id    uint32
	via   uint32
	port  uint16
	proto discovery.Protocol
}

func newZoneIndex(apex string) *zoneIndex {
	return &zoneIndex{apex: apex, ids: newNameTable(), cname: make(map[uint32]uint32)}
}

// normalise returns name lower case without its trailing dot.
func normalise(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// appendNormalised appends normalise(name) to dst. Presentation-format names
// are ASCII (miekg/dns escapes other bytes), so ASCII case folding is
// strings.ToLower's.
func appendNormalised(dst []byte, name string) []byte {
	if len(name) > 0 && name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	for i := range len(name) {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// inZone reports whether name is the apex or below it.
func (z *zoneIndex) inZone(name []byte) bool {
	if len(name) == len(z.apex) {
		return string(name) == z.apex
	}
	return len(name) > len(z.apex) && name[len(name)-len(z.apex)-1] == '.' && string(name[len(name)-len(z.apex):]) == z.apex
}

// intern returns the id of name, adding it if it is new. name is copied.
func (z *zoneIndex) intern(name []byte) uint32 {
	h := z.ids.hash(name)
	if id, ok := z.ids.find(h, name, &z.names); ok {
		return id
	}
	id := uint32(z.names.len())
	z.ids.insert(h, id)
	z.names.add(name)
	var f uint8
	if !z.inZone(name) {
		f = isOutside
	}
	if !zonerules.Host(name) {
		f |= isService
	}
	z.flags.append(f)
	return id
}

// add folds one transferred record into the index.
func (z *zoneIndex) add(rr dns.RR) {
	switch rr.(type) {
	case *dns.A, *dns.AAAA, *dns.CNAME, *dns.SRV, *dns.MX, *dns.NS:
	default:
		return
	}
	z.owner = appendNormalised(z.owner[:0], rr.Header().Name)
	if !z.inZone(z.owner) {
		return // not the zone's data; a well-behaved server never sends it
	}
	switch v := rr.(type) {
	case *dns.A:
		if ip4 := v.A.To4(); ip4 != nil {
			z.addA([4]byte(ip4))
		}
	case *dns.AAAA:
		if len(v.AAAA) == 16 {
			z.addAAAA([16]byte(v.AAAA))
		}
	case *dns.CNAME:
		z.target = appendNormalised(z.target[:0], v.Target)
		z.addCNAME()
	case *dns.SRV:
		z.target = appendNormalised(z.target[:0], v.Target)
		z.addSRV(v.Port)
	case *dns.MX:
		z.target = appendNormalised(z.target[:0], v.Mx)
		if s, ok := zonerules.MX(string(z.target)); ok {
			id := z.intern(z.target)
			z.srvs = append(z.srvs, srvTarget{id: id, via: id, port: uint16(s.Port), proto: s.Protocol})
		}
	case *dns.NS:
		z.target = appendNormalised(z.target[:0], v.Ns)
		z.addNS()
	}
}

// addA records an A record of z.owner, a name in the zone.
func (z *zoneIndex) addA(ip [4]byte) {
	id := z.intern(z.owner)
	*z.flags.at(id) |= hasAddr
	z.v4.append(uint64(id)<<32 | uint64(binary.BigEndian.Uint32(ip[:])))
}

// addAAAA records an AAAA record of z.owner, a name in the zone.
func (z *zoneIndex) addAAAA(ip [16]byte) {
	id := z.intern(z.owner)
	*z.flags.at(id) |= hasAddr | hasV6
	z.v6.append(addr6{ip: ip, id: id})
}

// addCNAME records that z.owner, a name in the zone, is an alias of
// z.target.
func (z *zoneIndex) addCNAME() {
	id := z.intern(z.owner)
	*z.flags.at(id) |= hasCNAME
	z.cname[id] = z.intern(z.target)
}

// addSRV records an SRV record of z.owner, a name in the zone, for z.target
// and port (see zonerules.SRV).
func (z *zoneIndex) addSRV(port uint16) {
	s, ok := zonerules.SRV(string(z.owner), string(z.target), int(port), z.protocols)
	if !ok {
		return
	}
	via := z.intern(z.target)
	id := via
	if s.Name != s.Via {
		id = z.intern([]byte(s.Name))
	}
	z.srvs = append(z.srvs, srvTarget{id: id, via: via, port: port, proto: s.Protocol})
}

// nsEdge is one NS record below the apex: the delegation point cut names
// server ns.
type nsEdge struct{ cut, ns uint32 }

// addNS records an NS record of z.owner, a name in the zone, for server
// z.target.
func (z *zoneIndex) addNS() {
	if zonerules.Cut(z.owner, z.apex) {
		id := z.intern(z.owner)
		*z.flags.at(id) |= isCut
		z.cuts = true
		if len(z.target) > 0 {
			z.ns = append(z.ns, nsEdge{cut: id, ns: z.intern(z.target)})
		}
	}
}

// markDelegated flags names at or below a delegation point as outside the
// zone's authority: their addresses are glue, not the zone's own data.
func (z *zoneIndex) markDelegated() {
	if !z.cuts {
		return
	}
	isCut := func(n []byte) bool {
		cid, ok := z.ids.find(z.ids.hash(n), n, &z.names)
		return ok && *z.flags.at(cid)&isCut != 0
	}
	for id := range uint32(z.names.len()) {
		if f := z.flags.at(id); *f&isOutside == 0 && zonerules.Delegated(z.names.at(id), z.apex, isCut) {
			*f |= isOutside
		}
	}
}

// Zone is a transferred zone, indexed: its targets can be listed in order,
// any number of times, without ever being held as one []discovery.Target.
// A Zone is never changed once Source.transfer has returned it, and is safe
// for concurrent use.
type Zone struct {
	z       *zoneIndex
	ports   []portProto // sorted by port
	sources []string

	ids  []uint32    // the target names' ids, in name order
	srvs []srvTarget // by id, then port, one per (id, port)

	// Addresses, sorted and without duplicates: name id's IPv4 addresses
	// are v4[v4start[id]:v4start[id+1]], its IPv6 ones (hasV6) the run of
	// v6 with its id.
	v4      []uint32
	v4start []uint32
	v6      []addr6
	nAddrs  int // len(v4) + len(v6)
	targets int // how many targets All yields

	delegations []Delegation // by zone name
}

// portProto is a port a name is a target on, with its protocol and the
// name whose addresses it is probed at (see srvTarget).
type portProto struct {
	port  int
	proto discovery.Protocol
	via   uint32
}

// zone turns the index into a Zone. It consumes the index. The protocol
// on each of ports comes from z.protocols and the well-known ports.
func (z *zoneIndex) zone(ports []int, filter discovery.Filter, sources []string) *Zone {
	z.markDelegated()
	z.ids = nameTable{} // no more lookups by name; let the table go
	zn := &Zone{z: z, sources: sources}
	for _, p := range slices.Sorted(slices.Values(ports)) {
		zn.ports = append(zn.ports, portProto{port: p, proto: z.protocols.ProtocolFor(p)}) // via: set per name
	}
	zn.v4, zn.v4start = z.v4Table()
	zn.v6 = z.v6Table()
	zn.nAddrs = len(zn.v4) + len(zn.v6)
	zn.delegations = zn.delegationsOf()

	// SRV targets by id, then port, one per (id, port, via): an XMPP
	// domain served by two hosts is a target at each. Each such name is
	// flagged so that its ports can be found by binary search. Where two
	// records give one port different protocols, the one that wins
	// (zonerules.Wins) sorts first and is kept.
	zn.srvs = z.srvs
	z.srvs = nil
	slices.SortFunc(zn.srvs, func(a, b srvTarget) int {
		return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.port, b.port), cmp.Compare(a.via, b.via), wins(a.proto, b.proto))
	})
	zn.srvs = slices.CompactFunc(zn.srvs, func(a, b srvTarget) bool { return a.id == b.id && a.port == b.port && a.via == b.via })
	for _, s := range zn.srvs {
		*z.flags.at(s.id) |= isSRVTarget
	}

	// The names that become targets, sorted by name. Most names differ in
	// their first eight bytes, so they are sorted by those, kept beside the
	// id, and only ties look at the names themselves.
	type key struct {
		prefix uint64
		id     uint32
	}
	candidate := func(id uint32) bool { f := *z.flags.at(id); return owner(f) || f&isSRVTarget != 0 }
	// Names probed at another name's addresses (XMPP domains) are few;
	// only for them does each look past the name's own resolution.
	n := 0
	for id := range uint32(z.names.len()) {
		if candidate(id) {
			n++
		}
	}
	keys := make([]key, 0, n)
	keepAll := filter.KeepsAll() // no string per name to ask the filter about
	for id := range uint32(z.names.len()) {
		if !candidate(id) {
			continue
		}
		name := z.names.at(id)
		if !keepAll && !filter.Keep(string(name)) {
			continue
		}
		var p [8]byte
		copy(p[:], name) // names have no zero bytes: a shorter name sorts first
		keys = append(keys, key{prefix: binary.BigEndian.Uint64(p[:]), id: id})
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		return bytes.Compare(z.names.at(a.id), z.names.at(b.id))
	})
	zn.ids = make([]uint32, len(keys))
	for i, k := range keys {
		zn.ids[i] = k.id
	}
	keys = nil
	var merged []portProto
	for _, id := range zn.ids {
		merged = zn.portsOf(merged[:0], id)
		zn.targets += len(merged)
	}
	return zn
}

// owner reports whether a name with flags f is a target on every port: it
// has addresses or a CNAME, is in the zone's authority and is a host name
// (zonerules.Host).
func owner(f uint8) bool { return f&(hasAddr|hasCNAME) != 0 && f&(isOutside|isService) == 0 }

// wins orders protocols named for one port by records: the one that wins
// (zonerules.Wins) first.
func wins(p, q discovery.Protocol) int {
	switch {
	case zonerules.Wins(p, q):
		return -1
	case zonerules.Wins(q, p):
		return 1
	}
	return 0
}

// v4Table returns every name's IPv4 addresses, sorted and without
// duplicates, in one array: name id owns all[start[id]:start[id+1]]. It is
// a counting sort by id, so no second copy of the (id, address) list is
// made, and it releases that list.
func (z *zoneIndex) v4Table() (all, start []uint32) {
	n := z.names.len()
	start = make([]uint32, n+1)
	for _, c := range z.v4.chunks {
		for _, a := range c {
			start[a>>32+1]++
		}
	}
	for i := 1; i <= n; i++ {
		start[i] += start[i-1]
	}
	// start[id+1] is now the end of id's range; fill each range from its end,
	// which leaves start[id+1] at the range's beginning.
	all = make([]uint32, z.v4.len())
	for _, c := range z.v4.chunks {
		for _, a := range c {
			id := a >> 32
			start[id+1]--
			all[start[id+1]] = uint32(a)
		}
	}
	z.v4 = chunked[uint64]{}
	copy(start, start[1:])
	start[n] = uint32(len(all))
	// Sort and de-duplicate each range, compacting the array as we go.
	w := uint32(0)
	for id := range n {
		lo, hi := start[id], start[id+1]
		r := all[lo:hi]
		if len(r) > 1 {
			slices.Sort(r)
			r = slices.Compact(r)
		}
		start[id] = w
		w += uint32(copy(all[w:], r))
	}
	start[n] = w
	return all[:w:w], start
}

// v6Table returns every IPv6 address sorted by id, then address, without
// duplicates, and releases the list they were gathered in.
func (z *zoneIndex) v6Table() []addr6 {
	all := make([]addr6, 0, z.v6.len())
	for _, c := range z.v6.chunks {
		all = append(all, c...)
	}
	z.v6 = chunked[addr6]{}
	slices.SortFunc(all, func(a, b addr6) int { return cmp.Or(cmp.Compare(a.id, b.id), bytes.Compare(a.ip[:], b.ip[:])) })
	return slices.Clip(slices.Compact(all))
}

// appendAddrs appends the addresses of name id to dst in netip.Addr order:
// IPv4 first, each family in byte order.
func (zn *Zone) appendAddrs(dst []netip.Addr, id uint32) []netip.Addr {
	for _, a := range zn.v4[zn.v4start[id]:zn.v4start[id+1]] {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], a)
		dst = append(dst, netip.AddrFrom4(b))
	}
	if *zn.z.flags.at(id)&hasV6 != 0 {
		i, _ := slices.BinarySearchFunc(zn.v6, id, func(a addr6, id uint32) int { return cmp.Compare(a.id, id) })
		for ; i < len(zn.v6) && zn.v6[i].id == id; i++ {
			dst = append(dst, netip.AddrFrom16(zn.v6[i].ip))
		}
	}
	return dst
}

// portsOf appends the ports name id is a target on to dst, sorted, with
// their protocols: every configured port if it owns addresses or a CNAME,
// and the ports of the SRV and MX records that point at it. A record
// naming a configured port gives it its protocol: the record says what
// the port speaks, the port table only guesses.
func (zn *Zone) portsOf(dst []portProto, id uint32) []portProto {
	f := *zn.z.flags.at(id)
	n := len(dst)
	if owner(f) {
		dst = append(dst, zn.ports...)
		for i := n; i < len(dst); i++ {
			dst[i].via = id
		}
	}
	if f&isSRVTarget != 0 {
		configured := len(dst)
		i, _ := slices.BinarySearchFunc(zn.srvs, id, func(s srvTarget, id uint32) int { return cmp.Compare(s.id, id) })
		for ; i < len(zn.srvs) && zn.srvs[i].id == id; i++ {
			pp := portProto{port: int(zn.srvs[i].port), proto: zn.srvs[i].proto, via: zn.srvs[i].via}
			if j := slices.IndexFunc(dst[n:configured], func(c portProto) bool { return c.port == pp.port && c.via == id }); j >= 0 {
				dst[n+j].proto, dst[n+j].via = pp.proto, pp.via
				continue
			}
			dst = append(dst, pp)
		}
		if len(dst) > configured {
			// Stable: one port's entries (an XMPP domain's hosts) stay
			// in the order of their vias.
			slices.SortStableFunc(dst[n:], func(a, b portProto) int { return cmp.Compare(a.port, b.port) })
		}
	}
	return dst
}

// resolution is where a name's addresses come from.
type resolution struct {
	addrs   bool   // known from the zone: those of name id
	id      uint32 // the name whose addresses they are
	resolve string // else the name to look up ("" = the target name)
	loop    bool   // a CNAME chain that loops or is too long
}

// follow resolves id through CNAMEs inside the zone.
func (zn *Zone) follow(id uint32) resolution {
	z := zn.z
	cur := id
	for range zonerules.MaxChain {
		switch f := *z.flags.at(cur); {
		case f&isOutside != 0:
			if cur == id {
				return resolution{}
			}
			return resolution{resolve: string(z.names.at(cur))}
		case f&hasAddr != 0:
			return resolution{addrs: true, id: cur}
		case f&hasCNAME != 0:
			cur = z.cname[cur]
		case cur == id:
			return resolution{} // no data in the zone: look the name up
		default:
			return resolution{resolve: string(z.names.at(cur))} // dangling: let the lookup say so
		}
	}
	return resolution{loop: true}
}

// via returns t probed at the addresses of name id instead of its own:
// an XMPP domain at its SRV target's. The addresses are a fresh slice, so
// the ones t shares with the name's other ports stay as they are.
func (zn *Zone) via(t discovery.Target, id uint32) discovery.Target {
	t.Addresses, t.Resolve = nil, ""
	switch r := zn.follow(id); {
	case r.loop:
		t.Skip = zonerules.LoopSkip
	case r.addrs:
		t.Addresses = zn.appendAddrs(nil, r.id)
	case r.resolve != "":
		t.Resolve = r.resolve
	default:
		t.Resolve = string(zn.z.names.at(id))
	}
	return t
}

// Len returns how many targets All yields.
func (zn *Zone) Len() int { return zn.targets }

// All yields the zone's targets in the order and with the content that
// Source.Discover yields them (for a zone whose delegations are not
// followed). The Addresses of a yielded target are only valid until the
// next one is yielded (their memory is reused); clone them to keep them. Sources is shared by every target: do not change it.
func (zn *Zone) All() iter.Seq[discovery.Target] {
	return func(yield func(discovery.Target) bool) {
		var buf []netip.Addr
		zn.each(func(id uint32) []netip.Addr {
			buf = zn.appendAddrs(buf[:0], id)
			return buf
		}, yield)
	}
}

// collect returns every target in one slice. The Addresses of all targets
// are views of a few large arrays, not one allocation each.
func (zn *Zone) collect() []discovery.Target {
	out := make([]discovery.Target, 0, zn.targets)
	var pool []netip.Addr
	addrs := func(id uint32) []netip.Addr {
		if cap(pool)-len(pool) < 64 {
			pool = make([]netip.Addr, 0, 4096)
		}
		n := len(pool)
		pool = zn.appendAddrs(pool, id) // more than fit: a new array, still correct
		return pool[n:len(pool):len(pool)]
	}
	zn.each(addrs, func(t discovery.Target) bool {
		out = append(out, t)
		return true
	})
	return out
}

// each yields the targets in order, taking each name's addresses from
// addrs.
func (zn *Zone) each(addrs func(id uint32) []netip.Addr, yield func(discovery.Target) bool) {
	var ports []portProto
	for _, id := range zn.ids {
		ports = zn.portsOf(ports[:0], id)
		if len(ports) == 0 {
			continue
		}
		name := string(zn.z.names.at(id))
		t := discovery.Target{Name: name, Sources: zn.sources}
		switch r := zn.follow(id); {
		case zonerules.Wildcard(name):
			t.Skip = zonerules.WildcardSkip
		case r.loop:
			t.Skip = zonerules.LoopSkip
		case r.addrs:
			t.Addresses = addrs(r.id)
		default:
			t.Resolve = r.resolve
		}
		for _, p := range ports {
			t.Port, t.Protocol = p.port, p.proto
			if p.via != id && t.Skip == "" {
				if !yield(zn.via(t, p.via)) {
					return
				}
				continue
			}
			if !yield(t) {
				return
			}
		}
	}
}

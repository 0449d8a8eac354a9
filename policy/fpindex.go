package policy

import (
	"hash/maphash"
	"math/bits"
)

// fpIndex finds a leaf's description in the Evaluator's certs by its
// fingerprint (Certificate.SHA256): open addressing with linear probing
// over slots holding an index into certs plus one (0 is free), kept at
// most half full. 4 to 8 bytes a leaf, where a map[string]int32 took about
// 50 (5 MB at 100,000 endpoints, reserved from the start of a scan). The
// fingerprints themselves are the descriptions' own strings.
type fpIndex struct {
	seed  maphash.Seed
	slots []int32
	n     int
}

// find returns the index in certs of the description of fp.
func (x *fpIndex) find(certs []Certificate, fp string) (int32, bool) {
	if len(x.slots) == 0 {
		return -1, false
	}
	return probe(x, certs, fp, maphash.String(x.seed, fp))
}

// findBytes is find for a fingerprint held in bytes.
func (x *fpIndex) findBytes(certs []Certificate, fp []byte) (int32, bool) {
	if len(x.slots) == 0 {
		return -1, false
	}
	return probe(x, certs, fp, maphash.Bytes(x.seed, fp))
}

// probe walks the slots from fp's hash h until it meets fp's description
// or a free slot.
func probe[F string | []byte](x *fpIndex, certs []Certificate, fp F, h uint64) (int32, bool) {
	mask := uint64(len(x.slots) - 1)
	for h &= mask; ; h = (h + 1) & mask {
		s := x.slots[h]
		if s == 0 {
			return -1, false
		}
		if certs[s-1].SHA256 == string(fp) {
			return s - 1, true
		}
	}
}

// insert indexes certs[i], which find does not find yet.
func (x *fpIndex) insert(certs []Certificate, i int32) {
	if 2*(x.n+1) > len(x.slots) {
		x.grow(certs[:i], x.n+1)
	}
	x.place(certs[i].SHA256, i)
	x.n++
}

// grow makes room for n descriptions, indexing indexed again.
func (x *fpIndex) grow(indexed []Certificate, n int) {
	size := max(1<<bits.Len(uint(2*n-1)), 64)
	if size <= len(x.slots) {
		return
	}
	if x.slots == nil {
		x.seed = maphash.MakeSeed()
	}
	x.slots = make([]int32, size)
	for i := range indexed {
		x.place(indexed[i].SHA256, int32(i))
	}
}

func (x *fpIndex) place(fp string, i int32) {
	mask := uint64(len(x.slots) - 1)
	h := maphash.String(x.seed, fp) & mask
	for x.slots[h] != 0 {
		h = (h + 1) & mask
	}
	x.slots[h] = i + 1
}

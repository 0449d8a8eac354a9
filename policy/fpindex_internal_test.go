package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
)

// TestFPIndex: every fingerprint inserted is found, by string and by
// bytes, through the growths from empty and from a size given ahead;
// one never inserted is not.
func TestFPIndex(t *testing.T) {
	fp := func(i int) string {
		sum := sha256.Sum256(fmt.Appendf(nil, "leaf %d", i))
		return hex.EncodeToString(sum[:])
	}
	for _, ahead := range []int{0, 10, 5000} {
		var x fpIndex
		var certs []Certificate
		x.grow(certs, ahead)
		for i := range 3000 {
			certs = append(certs, Certificate{SHA256: fp(i)})
			x.insert(certs, int32(i))
		}
		for i := range certs {
			if j, ok := x.find(certs, fp(i)); !ok || j != int32(i) {
				t.Fatalf("grown from %d: find(%d) = %d, %v", ahead, i, j, ok)
			}
			if j, ok := x.findBytes(certs, []byte(fp(i))); !ok || j != int32(i) {
				t.Fatalf("grown from %d: findBytes(%d) = %d, %v", ahead, i, j, ok)
			}
		}
		if j, ok := x.find(certs, fp(-1)); ok {
			t.Errorf("grown from %d: found %d for a fingerprint never inserted", ahead, j)
		}
		if 2*x.n > len(x.slots) {
			t.Errorf("grown from %d: %d fingerprints in %d slots, want at most half full", ahead, x.n, len(x.slots))
		}
	}
	var empty fpIndex
	if _, ok := empty.find(nil, fp(0)); ok {
		t.Error("the empty index found a fingerprint")
	}
}

package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestKeyOf: a fingerprint is its own 32 bytes, and anything else that a
// store might hold has a key of its own, never a fingerprint's.
func TestKeyOf(t *testing.T) {
	sum := sha256.Sum256([]byte("leaf"))
	fp := hex.EncodeToString(sum[:])
	if got := keyOf(fp); got != certKey(sum) {
		t.Errorf("keyOf(%s) = %x, want the fingerprint's bytes", fp, got)
	}
	odd := []string{"", "ct:abc", fp[:63] + "z", fp + "00"}
	seen := map[certKey]string{keyOf(fp): fp}
	for _, s := range odd {
		k := keyOf(s)
		if other, dup := seen[k]; dup {
			t.Errorf("keyOf(%q) = keyOf(%q)", s, other)
		}
		seen[k] = s
	}
}

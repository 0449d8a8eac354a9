package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"unsafe"
)

// TestKeyOf: a fingerprint's key is its first 16 bytes, and anything
// else that a store might hold has a key of its own, never a
// fingerprint's. What is kept of each certificate written is 32 bytes.
func TestKeyOf(t *testing.T) {
	sum := sha256.Sum256([]byte("leaf"))
	fp := hex.EncodeToString(sum[:])
	if got := keyOf(fp); got != certKey(sum[:16]) {
		t.Errorf("keyOf(%s) = %x, want the fingerprint's first 16 bytes", fp, got)
	}
	if size := unsafe.Sizeof(certKey{}) + unsafe.Sizeof(writtenCert{}); size > 32 {
		t.Errorf("an entry of what was written is %d bytes, want at most 32", size)
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

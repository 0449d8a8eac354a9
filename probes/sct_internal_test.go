package probes

import (
	"testing"
	"time"
)

// FuzzEarliestSCT: the SCT list a server's certificate embeds is read
// without panicking whatever its bytes, and a timestamp is returned only
// from a list that parsed.
func FuzzEarliestSCT(f *testing.F) {
	f.Add([]byte{0, 0})
	// One v1 SCT: length 0x2f, version 0, a 32-byte log ID, a timestamp,
	// no extensions, a 4-byte signature.
	sct := append([]byte{0, 0x31, 0, 0x2f, 0}, make([]byte, 32)...)
	sct = append(sct, 0, 0, 1, 0x80, 0, 0, 0, 0, 0, 0, 4, 3, 0, 0)
	f.Add(sct)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ts, ok := earliestSCT(raw)
		if !ok && !ts.IsZero() {
			t.Errorf("no SCT but a timestamp %v", ts)
		}
		if ok && ts.Location() != time.UTC {
			t.Errorf("timestamp %v not in UTC", ts)
		}
	})
}

package dnszone

import (
	"fmt"
	"testing"
)

// TestInternAcrossGrowth checks that names keep their ids while the name
// table grows from its first size to thousands of slots, and that names
// never interned are not found.
func TestInternAcrossGrowth(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 511, 512, 513, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			z := newZoneIndex("example")
			for i := range n {
				if got := z.intern(fmt.Appendf(nil, "h%d.example", i)); got != uint32(i) {
					t.Fatalf("intern(h%d) = %d, want %d (a new name)", i, got, i)
				}
			}
			for i := range n {
				name := fmt.Sprintf("h%d.example", i)
				if got := z.intern([]byte(name)); got != uint32(i) {
					t.Errorf("intern(%s) again = %d, want %d", name, got, i)
				}
			}
			if z.names.len() != n {
				t.Errorf("%d names interned, want %d", z.names.len(), n)
			}
			for i := range n {
				name := fmt.Sprintf("x%d.example", i)
				if id, ok := z.ids.find(z.ids.hash([]byte(name)), []byte(name), &z.names); ok {
					t.Fatalf("find(%s) = %d, want not found", name, id)
				}
			}
		})
	}
}

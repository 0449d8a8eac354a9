package found_test

import (
	"testing"

	"github.com/certwatch/certwatch/discovery/atrest"
	"github.com/certwatch/certwatch/discovery/found"
)

// TestAppendKeepsAtRest: the certificates at rest of one source, a
// cluster's tens of thousands, are taken as they are into an inventory
// that holds none yet, not copied; appending another source's then copies
// both, never writing into the first source's list.
func TestAppendKeepsAtRest(t *testing.T) {
	t.Parallel()
	a := make([]atrest.Certificate, 2, 4)
	a[0].SHA256, a[1].SHA256 = "a0", "a1"
	var inv found.Inventory
	inv.Append(found.Inventory{AtRest: a})
	if len(inv.AtRest) != 2 || &inv.AtRest[0] != &a[0] {
		t.Fatalf("the one source's certificates were copied (%d)", len(inv.AtRest))
	}
	inv.Append(found.Inventory{AtRest: []atrest.Certificate{{SHA256: "b0"}}})
	if got := len(inv.AtRest); got != 3 || inv.AtRest[2].SHA256 != "b0" || &inv.AtRest[0] == &a[0] {
		t.Errorf("after a second source: %d certificates, sharing the first's list: %t; want 3 in a list of their own", got, &inv.AtRest[0] == &a[0])
	}
	if a[:3][2].SHA256 != "" {
		t.Errorf("the first source's list was written past its end: %q", a[:3][2].SHA256)
	}
}

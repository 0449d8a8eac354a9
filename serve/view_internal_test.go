package serve

import (
	"slices"
	"testing"
)

// TestUnionSorted: the union of a certificate's sources so far and an
// endpoint's is sorted and without duplicates; a list that already
// holds the endpoint's is kept as it is (no copy for each of a fleet's
// endpoints), and neither list given is ever changed.
func TestUnionSorted(t *testing.T) {
	for _, tc := range []struct {
		a, b, want []string
		same       string // "a" or "b": the result is that list itself
	}{
		{nil, nil, nil, "b"},
		{nil, []string{"static"}, []string{"static"}, "b"},
		{nil, []string{"zone:b", "zone:a", "zone:a"}, []string{"zone:a", "zone:b"}, ""},
		{[]string{"static"}, []string{"static"}, []string{"static"}, "a"},
		{[]string{"a", "c"}, []string{"c"}, []string{"a", "c"}, "a"},
		{[]string{"a", "c"}, []string{"d", "b", "a"}, []string{"a", "b", "c", "d"}, ""},
		{[]string{"a"}, nil, []string{"a"}, "a"},
	} {
		a, b := slices.Clone(tc.a), slices.Clone(tc.b)
		got := unionSorted(a, b)
		if !slices.Equal(got, tc.want) {
			t.Errorf("unionSorted(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
		if !slices.Equal(a, tc.a) || !slices.Equal(b, tc.b) {
			t.Errorf("unionSorted(%q, %q) changed its arguments to %q, %q", tc.a, tc.b, a, b)
		}
		switch same := len(got) > 0 && (len(a) > 0 && &got[0] == &a[0] || len(b) > 0 && &got[0] == &b[0]); {
		case tc.same != "" && len(tc.want) > 0 && !same:
			t.Errorf("unionSorted(%q, %q) made a new list, want %s itself", tc.a, tc.b, tc.same)
		case tc.same == "" && same:
			t.Errorf("unionSorted(%q, %q) returned an argument, want a new list", tc.a, tc.b)
		}
	}
}

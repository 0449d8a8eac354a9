package policy

import "testing"

// TestFindingIndexCollision: two findings whose hashes are equal are both
// found, each by its own kind and key, and a key never added is not found
// through another's hash.
func TestFindingIndexCollision(t *testing.T) {
	var fs blocks[finding]
	x := newFindingIndex()
	const h = 42 // the same hash for every key below, as a collision would give
	add := func(f finding, key string) int32 {
		i := int32(fs.len())
		fs.append(f)
		x.insert(h, f.kind, key, i)
		return i
	}
	first := add(finding{kind: Expiring, cert: "aa"}, "aa")
	second := add(finding{kind: Expired, cert: "aa"}, "aa")
	third := add(finding{kind: Unreachable, name: "www.example:443"}, "www.example:443")
	for _, tt := range []struct {
		kind Kind
		key  string
		want int32
	}{{Expiring, "aa", first}, {Expired, "aa", second}, {Unreachable, "www.example:443", third}} {
		if i, ok := x.find(&fs, h, tt.kind, tt.key); !ok || i != tt.want {
			t.Errorf("find(%s, %s) = %d, %v; want %d", tt.kind, tt.key, i, ok, tt.want)
		}
	}
	for _, k := range []findingKey{{Expiring, "bb"}, {Unreachable, "aa"}, {Expired, "www.example:443"}} {
		if i, ok := x.find(&fs, h, k.kind, k.key); ok {
			t.Errorf("find(%s, %s) = %d, a finding about something else", k.kind, k.key, i)
		}
	}
	if x.hash(Expiring, "aa") == x.hash(Expired, "aa") || x.hash(Expiring, "ab") == x.hash(Expiring, "aa") {
		t.Errorf("hashes of different keys are equal")
	}
}

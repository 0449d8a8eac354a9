package scan_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/scan"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// shardNames lists each shard's targets as "name:port".
func shardNames(shards [][]discovery.Target) [][]string {
	var out [][]string
	for _, s := range shards {
		var names []string
		for _, t := range s {
			names = append(names, t.Key())
		}
		out = append(out, names)
	}
	return out
}

func TestCutShards(t *testing.T) {
	var lb []discovery.Target // ten names behind one load balancer
	for i := range 10 {
		lb = append(lb, discovery.Target{Name: fmt.Sprintf("lb%d.example", i), Port: 443, Addresses: addrs("10.0.0.1")})
	}
	tests := []struct {
		name    string
		targets []discovery.Target
		size    int
		want    [][]string
	}{
		{"none", nil, 3, nil},
		{"only skipped", []discovery.Target{{Name: "*.example", Port: 443, Skip: "wildcard"}}, 3, nil},
		{
			"singletons fill shards in order",
			[]discovery.Target{
				{Name: "a.example", Port: 443, Addresses: addrs("10.0.1.1")},
				{Name: "b.example", Port: 443, Addresses: addrs("10.0.1.2")},
				{Name: "c.example", Port: 443, Addresses: addrs("10.0.1.3")},
				{Name: "*.example", Port: 443, Skip: "wildcard"},
				{Name: "d.example", Port: 443, Addresses: addrs("10.0.1.4")},
				{Name: "e.example", Port: 443, Addresses: addrs("10.0.1.5")},
			},
			2,
			[][]string{{"a.example:443", "b.example:443"}, {"c.example:443", "d.example:443"}, {"e.example:443"}},
		},
		{
			"a group larger than size stays whole",
			append(slices2(lb), discovery.Target{Name: "other.example", Port: 443, Addresses: addrs("10.0.0.2")}),
			3,
			[][]string{
				{"lb0.example:443", "lb1.example:443", "lb2.example:443", "lb3.example:443", "lb4.example:443", "lb5.example:443", "lb6.example:443", "lb7.example:443", "lb8.example:443", "lb9.example:443"},
				{"other.example:443"},
			},
		},
		{
			"shared addresses join transitively, and so do resolved names",
			[]discovery.Target{
				{Name: "a.example", Port: 443, Addresses: addrs("10.0.2.1", "2001:db8::1")},
				{Name: "x.example", Port: 443, Resolve: "edge.cdn.example"},
				{Name: "b.example", Port: 443, Addresses: addrs("2001:db8::1", "10.0.2.2")},
				{Name: "solo.example", Port: 443, Addresses: addrs("10.0.2.9")},
				{Name: "c.example", Port: 8443, Addresses: addrs("10.0.2.2")},
				{Name: "y.example", Port: 443, Resolve: "edge.cdn.example"},
				{Name: "edge.cdn.example", Port: 443, Addresses: addrs("10.0.2.3")},
				{Name: "a.example", Port: 25, Protocol: discovery.SMTP, Addresses: addrs("10.0.2.1", "2001:db8::1")},
			},
			3,
			[][]string{
				{"a.example:443", "b.example:443", "c.example:8443", "a.example:25"},
				{"x.example:443", "y.example:443", "edge.cdn.example:443"},
				{"solo.example:443"},
			},
		},
		{"size below 1 counts as 1", []discovery.Target{{Name: "a.example", Port: 443}, {Name: "b.example", Port: 443}}, 0, [][]string{{"a.example:443"}, {"b.example:443"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shardNames(scan.CutShards(tt.targets, tt.size))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CutShards(size %d) (-want +got):\n%s", tt.size, diff)
			}
		})
	}
}

func slices2(ts []discovery.Target) []discovery.Target { return append([]discovery.Target(nil), ts...) }

// TestCutShardsProperties cuts random target lists (addresses from a small
// pool, so that groups form and chain; names resolved at probe time; some
// skipped) and checks what CutShards promises: every target not skipped in
// exactly one shard, in input order; no address and no resolved name in
// two shards; a shard over size is one group; the same input gives the
// same shards; and the shards are few (no two bins that could be one).
func TestCutShardsProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 2026)) // the same inputs every run
	for iter := range 300 {
		n, size := r.IntN(200), 1+r.IntN(20)
		pool := 1 + r.IntN(2*n+1)
		var targets []discovery.Target
		for i := range n {
			tg := discovery.Target{Name: fmt.Sprintf("t%03d.example", i), Port: 443}
			switch k := r.IntN(10); {
			case k == 0:
				tg.Skip = "wildcard"
			case k < 3:
				tg.Resolve = fmt.Sprintf("r%d.example", r.IntN(pool))
			default:
				for range 1 + r.IntN(3) {
					tg.Addresses = append(tg.Addresses, netip.AddrFrom4([4]byte{10, 9, byte(r.IntN(pool) >> 8), byte(r.IntN(pool))}))
				}
			}
			targets = append(targets, tg)
		}
		shards := scan.CutShards(targets, size)
		where := map[string]int{} // target key -> shard
		owner := map[string]int{} // address or resolved name -> shard
		for s, shard := range shards {
			if len(shard) == 0 {
				t.Fatalf("input %d: shard %d is empty", iter, s)
			}
			for j, tg := range shard {
				if _, dup := where[tg.Key()]; dup {
					t.Fatalf("input %d: %s in two shards", iter, tg.Key())
				}
				where[tg.Key()] = s
				if j > 0 && shard[j-1].Name >= tg.Name {
					t.Errorf("input %d: shard %d is out of input order at %s", iter, s, tg.Key())
				}
				keys := []string{"name " + tg.ResolveName()}
				for _, a := range tg.Addresses {
					keys = append(keys, "address "+a.String())
				}
				for _, k := range keys {
					if o, ok := owner[k]; ok && o != s {
						t.Fatalf("input %d: %s is in shards %d and %d", iter, k, o, s)
					}
					owner[k] = s
				}
			}
			if len(shard) > size && !connected(shard) {
				t.Errorf("input %d: shard %d has %d targets, over size %d, and is not one group", iter, s, len(shard), size)
			}
		}
		live := 0
		for _, tg := range targets {
			_, in := where[tg.Key()]
			if tg.Skip != "" && in {
				t.Errorf("input %d: skipped %s is in a shard", iter, tg.Key())
			}
			if tg.Skip == "" {
				live++
				if !in {
					t.Errorf("input %d: %s is in no shard", iter, tg.Key())
				}
			}
		}
		if len(where) != live {
			t.Errorf("input %d: %d targets in shards, want %d", iter, len(where), live)
		}
		// First-fit leaves no two bins that fit in one.
		for a := range shards {
			for b := a + 1; b < len(shards); b++ {
				if len(shards[a])+len(shards[b]) <= size {
					t.Errorf("input %d: shards %d and %d (%d and %d targets) fit in one of size %d", iter, a, b, len(shards[a]), len(shards[b]), size)
				}
			}
		}
		if again := scan.CutShards(targets, size); !slices.EqualFunc(shardNames(shards), shardNames(again), slices.Equal[[]string]) {
			t.Errorf("input %d: the same targets cut twice differ", iter)
		}
	}
}

// connected reports whether the targets form one group: linked by shared
// addresses or resolved names.
func connected(ts []discovery.Target) bool {
	keys := func(t discovery.Target) []string {
		k := []string{"name " + t.ResolveName()}
		for _, a := range t.Addresses {
			k = append(k, "address "+a.String())
		}
		return k
	}
	byKey := map[string][]int{}
	for i, t := range ts {
		for _, k := range keys(t) {
			byKey[k] = append(byKey[k], i)
		}
	}
	seen := make([]bool, len(ts))
	seen[0] = true
	for queue := []int{0}; len(queue) > 0; queue = queue[1:] {
		for _, k := range keys(ts[queue[0]]) {
			for _, j := range byKey[k] {
				if !seen[j] {
					seen[j] = true
					queue = append(queue, j)
				}
			}
			delete(byKey, k)
		}
	}
	for _, s := range seen {
		if !s {
			return false
		}
	}
	return true
}

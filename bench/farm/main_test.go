package main

import (
	"net/netip"
	"testing"
)

func TestAddress(t *testing.T) {
	seen := make(map[netip.Addr]int, maxEndpoints)
	for i := range maxEndpoints {
		a := Address(i)
		if !a.IsLoopback() || a.As4()[3] == 0 || a.As4()[3] == 255 {
			t.Fatalf("Address(%d) = %s, want a loopback address not ending in .0 or .255", i, a)
		}
		if j, ok := seen[a]; ok {
			t.Fatalf("Address(%d) = Address(%d) = %s", i, j, a)
		}
		seen[a] = i
	}
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/certwatch/certwatch/discovery"
	"github.com/certwatch/certwatch/policy"
	"github.com/certwatch/certwatch/scan"
	"github.com/certwatch/certwatch/state"
)

// zoneScanner discovers n targets as a zone transfer does (one source,
// sorted, one address each, one list of sources between them), built
// anew at each Discover, and keeps the targets each probe run gets.
type zoneScanner struct {
	n      int
	probed []discovery.Target
}

func (z *zoneScanner) fleet() []discovery.Target {
	sources := []string{"dnszone:farm.test"}
	ts := make([]discovery.Target, z.n)
	for i := range ts {
		ts[i] = discovery.Target{Name: fmt.Sprintf("h%06d.farm.test", i), Port: 443, Sources: sources,
			Addresses: []netip.Addr{netip.AddrFrom4([4]byte{127, byte(i >> 16), byte(i >> 8), byte(i)})}}
	}
	return ts
}

func (z *zoneScanner) Discover(context.Context) ([]discovery.Target, []scan.SourceResult, error) {
	ts := z.fleet()
	return ts, []scan.SourceResult{{Name: "dnszone:farm.test", Targets: len(ts), Found: ts}}, nil
}

func (z *zoneScanner) Inventory() scan.Inventory { return scan.Inventory{} }

func (z *zoneScanner) Probe(_ context.Context, targets []discovery.Target, now time.Time) *scan.Report {
	z.probed = targets
	return &scan.Report{GeneratedAt: now, Targets: len(targets), Endpoints: []scan.Endpoint{}}
}

func (z *zoneScanner) Evaluate(time.Time, int, []discovery.Target, iter.Seq[*scan.Part]) *scan.Report {
	panic("not shared")
}

func (z *zoneScanner) SetHistory([]policy.NameHistory) {}

func (z *zoneScanner) Progress() scan.Progress { return scan.Progress{} }

// TestInventoryHeldPacked: between a discovery and the probe runs that
// read it, the daemon holds a zone's 100,000 targets in a few megabytes
// (held as a list, about 18 MB), and a probe run gets every target as
// the zone gave it, its sources one list for all.
func TestInventoryHeldPacked(t *testing.T) { // not parallel: it measures the heap
	z := &zoneScanner{n: 100_000}
	want := z.fleet()
	d, err := New(Config{Discovery: "@every 1h", Probe: "@every 10m", GracePeriod: time.Second}, z, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := d.discover(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Two collections: encoding/json keeps its last buffer in a
	// sync.Pool, which lets it go at the second.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("an inventory of 100,000 targets: %d bytes held", held)
	if held > 4_000_000 {
		t.Errorf("an inventory of 100,000 targets holds %d bytes, want at most 4,000,000", held)
	}

	if err := d.probe(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, z.probed, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Fatalf("targets probed differ from those discovered (-discovered +probed):\n%s", diff)
	}
	if &z.probed[0].Sources[0] != &z.probed[len(z.probed)-1].Sources[0] {
		t.Error("each target probed has its own list of sources")
	}
	runtime.KeepAlive(d)
}

// pollingShards is a shared sweep's store that measures the heap when the
// sweep's progress is first asked for (the leader then waits for the
// workers, for most of a run) and then stops the run.
type pollingShards struct {
	shards int
	live   uint64
	stop   context.CancelFunc
}

func (p *pollingShards) OpenSweep(_ context.Context, _ time.Time, work [][]byte) (int64, error) {
	p.shards = len(work)
	return 1, nil
}

func (p *pollingShards) SweepProgress(context.Context, int64) (int, int, error) {
	if p.live == 0 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		p.live = m.HeapAlloc
		p.stop()
	}
	return 0, p.shards, nil
}

func (p *pollingShards) CloseSweep(context.Context, int64) ([]state.ShardOutcome, error) {
	return make([]state.ShardOutcome, p.shards), nil
}

func (p *pollingShards) ShardResults(context.Context, int64, []int) ([][]byte, error) {
	return nil, errors.New("no results")
}

// TestSweepHoldsNoList: while the leader of a shared run waits for its
// shards to be probed, it holds no list of the inventory's targets, only
// the inventory packed and the shards it wrote.
func TestSweepHoldsNoList(t *testing.T) { // not parallel: it measures the heap
	z := &zoneScanner{n: 100_000}
	d, err := New(Config{Discovery: "@every 1h", Probe: "@every 10m", GracePeriod: time.Second}, z, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.discover(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	shards := &pollingShards{stop: cancel}
	d.Sharing = &Sharing{Shards: shards, Poll: time.Millisecond}
	var before runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := d.probe(ctx); err == nil || !strings.Contains(err.Error(), "abandoned at shutdown") {
		t.Fatalf("probe run stopped as it polled: %v; want it abandoned", err)
	}
	if shards.shards != 1000 {
		t.Fatalf("the sweep wrote %d shards, want 1,000", shards.shards)
	}
	held := int64(shards.live) - int64(before.HeapAlloc)
	t.Logf("polling a sweep of 100,000 targets: %d bytes more than before the run", held)
	if held > 6_000_000 {
		t.Errorf("polling a sweep of 100,000 targets holds %d bytes more than before the run, want at most 6,000,000 (the list of them is about 18 MB)", held)
	}
}

// TestHeldTargetsAreTheCallers: a list held packed, or as it is when it
// does not pack (a protocol with no name), reads back equal to what was
// held, in a slice the caller may reorder or cut without changing what
// the next reading gets.
func TestHeldTargetsAreTheCallers(t *testing.T) {
	list := []discovery.Target{
		{Name: "*.b.example", Port: 443, Sources: []string{"static"}, Skip: "wildcard owner"},
		{Name: "a.example", Port: 443, Sources: []string{"static"}, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		{Name: "c.example", Port: 25, Protocol: discovery.SMTP, Sources: []string{"static"}},
	}
	odd := slices.Clone(list)
	odd[2].Protocol = discovery.Protocol(200)
	for name, want := range map[string][]discovery.Target{"packed": list, "not packable": odd} {
		h := holdTargets(slices.Clone(want))
		if packed := h.packed != nil; packed != (name == "packed") {
			t.Errorf("%s: held packed %v", name, packed)
		}
		if h.n != 3 || !h.merged {
			t.Errorf("%s: held %d targets, merged %v; want 3, merged", name, h.n, h.merged)
		}
		first, err := h.targets(new(scan.Decoder))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		slices.Reverse(first)
		first[0].Name = "written.example"
		again, err := h.targets(new(scan.Decoder))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, again, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
			t.Errorf("%s: read back after the caller wrote the list it got (-held +read):\n%s", name, diff)
		}
	}
}

// BenchmarkUnpackInventory100k: what a probe run allocates to unpack a
// zone's 100,000 targets held packed (the list itself is about 14 MB).
func BenchmarkUnpackInventory100k(b *testing.B) {
	h := holdTargets((&zoneScanner{n: 100_000}).fleet())
	b.ReportAllocs()
	for b.Loop() {
		ts, err := h.targets(new(scan.Decoder))
		if err != nil || len(ts) != 100_000 {
			b.Fatalf("%d targets, %v", len(ts), err)
		}
	}
}

// BenchmarkHoldInventory100k: what a discovery allocates to pack a zone's
// 100,000 targets.
func BenchmarkHoldInventory100k(b *testing.B) {
	ts := (&zoneScanner{n: 100_000}).fleet()
	b.ReportAllocs()
	for b.Loop() {
		if h := holdTargets(ts); h.packed == nil {
			b.Fatal("not packed")
		}
	}
}

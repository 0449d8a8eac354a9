package cli

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// batchGCPercent is the garbage collector's target (GOGC) that scan and
// inventory run with when neither $GOGC nor $GOMEMLIMIT is set: the heap may
// grow to 1.25 times what is live before it is collected, instead of Go's
// default twice. A scan is a batch job whose working set only grows (every
// endpoint's result is kept until the report), so the default's headroom
// was as much memory again as the results themselves. At 10,000 endpoints
// the collector runs 240 times instead of 54 and its share of the scan's
// CPU grows from 1-2% to 6-8% (GODEBUG=gctrace=1), for 13-15 MiB less peak
// memory (docs/performance.md).
const batchGCPercent = 25

// largeScanGCPercent is the target a scan of largeScanTargets or more
// collects at instead (unless $GOGC or $GOMEMLIMIT is set). At that size
// the results are most of the heap, and a quarter of them again as
// headroom is what pushes the scan over a container's memory limit: on the
// 100,000-endpoint farm the scan peaked at 111 MiB instead of 122–124, for
// about 15% more CPU (2–24% over seven pairs of runs) and about the same
// wall time, which the network bounds (docs/performance.md). Below it the
// CPU matters more than the few MiB.
const (
	largeScanGCPercent = 10
	largeScanTargets   = 50_000
)

// daemonGCPercent is the target `certwatch run` collects at unless $GOGC
// or $GOMEMLIMIT is set: the heap may grow to 1.5 times what is live. A
// probe run of 100,000 endpoints peaked about 330 MiB lower than at Go's
// default for a few percent more CPU in the run (docs/performance.md),
// and between runs the daemon is idle.
const daemonGCPercent = 50

// largeRunGCPercent is the target `certwatch run` collects at instead of
// daemonGCPercent while its inventory holds largeScanTargets or more
// (unless $GOGC or $GOMEMLIMIT is set): there half the live heap again as
// headroom is 150–200 MiB (docs/performance.md).
const largeRunGCPercent = 25

// judgingGCPercent is the target from the end of a probe run's probing to
// the end of the run (daemon.Daemon.Judging), at every inventory size:
// judging, publishing and notifying what came back holds twice the heap
// of the probing, and is a tenth of the run's CPU. At 100,000 endpoints
// it takes 24–41 MiB off a run's peak (210–244 MiB) for about 2.5 s more
// of those 7–10 s; at 10,000, where it first applied only to inventories
// of largeScanTargets, about 16 MiB (70–74 MiB down to 53–57) for 0.4 s
// more of the run's 6 s of CPU, within its spread (docs/performance.md).
const judgingGCPercent = 10

// renderingGCPercent is the target while the status page renders
// (serve.Options.Rendering): a rendering reads the rows back and writes
// the page, garbage for the most part, over a live heap that is small
// between runs, which the default target let grow by half again each
// time. At 10,000 endpoints a rendering between runs peaked at 68.1 MiB,
// 56.1 at this target, with the page still written into a buffer before
// it was sent (docs/performance.md).
const renderingGCPercent = 10

// inventoryGC lowers the daemon's GC percent to judgingGCPercent while a
// run judges (judge, until judged), to renderingGCPercent while the status
// page renders (render, until rendered), else to largeRunGCPercent while
// its inventory is large, and puts back what was in force when none of
// these holds: size is called with each inventory's size. Its
// methods may be called from any goroutine.
type inventoryGC struct {
	apply func(percent int) (restore func()) // env.applyGC

	mu             sync.Mutex
	large, judging bool
	rendering      int    // renderings under way
	applied        int    // the percent set last; 0 when undo has put back what was before
	undo           func() // puts back what was in force before; nil when that is
}

func (g *inventoryGC) size(targets int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.large = targets >= largeScanTargets
	g.set()
}

// judge and judged bracket a run's judging (daemon.Daemon.Judging, and
// AfterProbe).
func (g *inventoryGC) judge()  { g.judgingIs(true) }
func (g *inventoryGC) judged() { g.judgingIs(false) }

// render and rendered bracket a rendering of the status page; several
// may be under way at once.
func (g *inventoryGC) render()   { g.renderings(1) }
func (g *inventoryGC) rendered() { g.renderings(-1) }

func (g *inventoryGC) renderings(delta int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rendering += delta
	g.set()
}

func (g *inventoryGC) judgingIs(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.judging != on {
		g.judging = on
		g.set()
	}
}

// set applies the percent that judging, rendering and large call for.
// Called with mu held.
func (g *inventoryGC) set() {
	var percent int
	switch {
	case g.judging:
		percent = judgingGCPercent
	case g.rendering > 0:
		percent = renderingGCPercent
	case g.large:
		percent = largeRunGCPercent
	default:
		if g.undo != nil {
			g.undo()
			g.undo, g.applied = nil, 0
		}
		return
	}
	if percent == g.applied {
		return
	}
	undo := g.apply(percent)
	g.applied = percent
	if g.undo == nil { // the first change's undo puts back what was before
		g.undo = undo
	}
}

// restore puts back what was in force before the first change.
func (g *inventoryGC) restore() { g.size(0) }

// applyGC sets a command's GC percent through e.setGCPercent, unless
// $GOGC or $GOMEMLIMIT is set, which the runtime has applied as the user
// asked, and returns what restores it.
func (e *env) applyGC(percent int) (restore func()) {
	if e.getenv("GOGC") != "" || e.getenv("GOMEMLIMIT") != "" || e.setGCPercent == nil {
		return func() {}
	}
	return e.setGCPercent(percent)
}

// setGCPercent sets the garbage collector's target percent and returns what
// restores the previous one.
func setGCPercent(percent int) (restore func()) {
	prev := debug.SetGCPercent(percent)
	return func() { debug.SetGCPercent(prev) }
}

// giveBackMemory collects the garbage of a one-off scan's phase and gives
// the heap's free pages back to the system, at the phase boundaries: when
// the probing is done, before the report is built, and when the report is
// built, before it is written. Otherwise the pages a phase freed stay
// resident beside those the next one takes (the runtime returns them only
// slowly), and the scan's peak RSS is their sum. On the 100,000-endpoint
// farm the writing of the report, the peak, grew RSS by 10 MB on top of
// what building it had left (docs/performance.md). One forced collection
// each. It also unmaps the executable's pages the phase before mapped
// (releaseExecutablePages), 17–24 MiB at the end of that farm's probing, of
// which the report needs about 10. `certwatch run` calls it as a probe
// run's probing ends (daemon.Daemon.Judging: 7–14 MiB off the run's peak
// at 100,000 endpoints), as it starts notifying (Notifying: another 7 MiB
// off a later run's peak, where the notifier weighs the open alerts), as
// the notifier is done and the status server compresses the report
// (Notified), as a run starts, before it probes (Probing: about 8 MiB off a
// first run's probing at 10,000 endpoints), and once the run is over, so that between
// runs it holds what it keeps, not the run's peak.
func giveBackMemory() {
	debug.FreeOSMemory()
	_ = releaseExecutablePages() // failing that, they merely stay mapped
}

// giveBackMemory is e.giveBack, when set (Main; see env).
func (e *env) giveBackMemory() {
	if e.giveBack != nil {
		e.giveBack()
	}
}

// noHeapProfile stops the sampling of allocations for the heap profile,
// which only the status server's /debug/pprof/heap reads (daemon.pprof):
// scan, inventory and a run without it serve none. The runtime samples an
// allocation every 512 KiB and keeps a record of each place that made one;
// at the end of probing 100,000 endpoints those records were 1.7 MB of the
// scan's peak (runtime/metrics' /memory/classes/profiling/buckets).
func (e *env) noHeapProfile() {
	if e.stopHeapProfile != nil {
		e.stopHeapProfile()
	}
}

// stopHeapProfile sets runtime.MemProfileRate to 0: no allocation is
// sampled from then on.
func stopHeapProfile() { runtime.MemProfileRate = 0 }

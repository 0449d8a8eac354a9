package cli

import "runtime/debug"

// batchGCPercent is the garbage collector's target (GOGC) that scan and
// inventory run with when neither $GOGC nor $GOMEMLIMIT is set: the heap may
// grow to 1.25 times what is live before it is collected, instead of Go's
// default twice. A scan is a batch job whose working set only grows (every
// endpoint's result is kept until the report), so the default's headroom
// was as much memory again as the results themselves. At 10,000 endpoints
// the collector runs 240 times instead of 54 and its share of the scan's
// CPU grows from 1-2% to 6-8% (GODEBUG=gctrace=1), for 13-15 MiB less peak
// memory (docs/performance.md). The daemon keeps Go's default.
const batchGCPercent = 25

// gcPercentFor says what GC percent a batch command sets, and whether it
// sets one: not when $GOGC or $GOMEMLIMIT is set, which the runtime has
// applied as the user asked.
func gcPercentFor(getenv func(string) string) (percent int, set bool) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	return batchGCPercent, true
}

// applyBatchGC sets the batch commands' GC percent through e.setGCPercent,
// unless the environment sets one, and returns what restores it.
func (e *env) applyBatchGC() (restore func()) {
	percent, set := gcPercentFor(e.getenv)
	if !set || e.setGCPercent == nil {
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
// each; the daemon, which probes again, does neither.
func giveBackMemory() { debug.FreeOSMemory() }

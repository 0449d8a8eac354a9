package scan

import (
	"sync"
	"time"
)

// Progress is how far the stages of a pass have gone, as Pass.Progress
// reads it: enough for a terminal's progress line or a log line of the
// daemon, which compute rates and what is left.
type Progress struct {
	// Discovery counts sources: Total the sources of the running (or
	// last) Discover, Done those that have finished. Its Work counts
	// what the sources that say so (Counter) have to do, such as a
	// network sweep's connections.
	Discovery StageProgress
	// Probe counts targets: Total the targets of the sweeps in flight
	// (or of the last), Done those probed. Its Work counts observations
	// (endpoints: one per address of a target) with no total.
	Probe StageProgress
}

// StageProgress is how far one stage has gone.
type StageProgress struct {
	// Running is set while the stage runs; Since is when it began.
	Running bool
	Since   time.Time
	// Done of Total units (sources, targets).
	Done, Total int
	// WorkDone of WorkTotal finer units (connections, endpoints);
	// WorkTotal is 0 when unknown.
	WorkDone, WorkTotal int
}

// progress is what a Pass counts as it goes. Its mutex is taken once per
// source and per target, far less often than a probe's work.
type progress struct {
	mu sync.Mutex
	// discovery and probe count the stages; sweeps is how many sweeps
	// are in flight: one that starts while another runs (the daemon's
	// shard of a shared run beside its own) adds to its counts.
	discovery, probe StageProgress
	sweeps           int
}

// Progress says how far p's running stages have gone. Safe to call from
// any goroutine while p runs.
func (p *Pass) Progress() Progress {
	p.progress.mu.Lock()
	pr := Progress{Discovery: p.progress.discovery, Probe: p.progress.probe}
	p.progress.mu.Unlock()
	if pr.Discovery.Running {
		for _, s := range p.Sources {
			if c, ok := s.(Counter); ok {
				done, total := c.Progress()
				pr.Discovery.WorkDone += done
				pr.Discovery.WorkTotal += total
			}
		}
	}
	return pr
}

// discoveryStarted starts counting a discovery of n sources.
func (p *Pass) discoveryStarted(n int) {
	p.progress.mu.Lock()
	defer p.progress.mu.Unlock()
	p.progress.discovery = StageProgress{Running: true, Since: p.now(), Total: n}
}

// sourceDone counts a source that has finished.
func (p *Pass) sourceDone() {
	p.progress.mu.Lock()
	defer p.progress.mu.Unlock()
	p.progress.discovery.Done++
}

// discoveryEnded ends counting a discovery.
func (p *Pass) discoveryEnded() {
	p.progress.mu.Lock()
	defer p.progress.mu.Unlock()
	p.progress.discovery.Running = false
}

// sweepStarted starts counting a sweep of n targets: from zero when no
// other sweep is in flight, else added to it.
func (p *Pass) sweepStarted(n int) {
	p.progress.mu.Lock()
	defer p.progress.mu.Unlock()
	if p.progress.sweeps == 0 {
		p.progress.probe = StageProgress{Running: true, Since: p.now()}
	}
	p.progress.sweeps++
	p.progress.probe.Total += n
}

// targetDone counts a target probed, with its observations.
func (p *Pass) targetDone(observations int) {
	p.progress.mu.Lock()
	defer p.progress.mu.Unlock()
	p.progress.probe.Done++
	p.progress.probe.WorkDone += observations
}

// sweepEnded ends counting a sweep.
func (p *Pass) sweepEnded() {
	p.progress.mu.Lock()
	defer p.progress.mu.Unlock()
	p.progress.sweeps--
	p.progress.probe.Running = p.progress.sweeps > 0
}

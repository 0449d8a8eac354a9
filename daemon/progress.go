package daemon

import (
	"math"
	"sync"
	"time"

	"github.com/certwatch/certwatch/scan"
)

// DefaultProgressEvery is how often a running discovery or probe run
// logs how far it has got, unless Config.ProgressEvery says otherwise.
const DefaultProgressEvery = 30 * time.Second

// logProgress logs how far s's running discovery (probe false) or probe
// run has got every ProgressEvery, until the returned stop is called: a
// /16 swept at 50 connections a second takes over 20 minutes, which would
// otherwise pass without a line. stop waits for the goroutine it started.
func (d *Daemon) logProgress(s Scanner, probe bool) (stop func()) {
	d.mu.Lock()
	every := d.cfg.ProgressEvery
	d.mu.Unlock()
	if every < 0 {
		return func() {}
	}
	if every == 0 {
		every = DefaultProgressEvery
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				d.logStage(s.Progress(), probe)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// logStage logs one line of how far a stage of p has got, with the rate
// so far and the time left at that rate.
func (d *Daemon) logStage(p scan.Progress, probe bool) {
	now := d.now()
	if probe {
		st := p.Probe
		if !st.Running {
			return
		}
		rate, left := pace(st.Done, st.Total, now.Sub(st.Since))
		d.logger.Info("probe run in progress", "targets_done", st.Done, "targets", st.Total, "endpoints", st.WorkDone,
			"targets_per_second", rate, "eta", left, "elapsed", now.Sub(st.Since).Round(time.Second))
		return
	}
	st := p.Discovery
	if !st.Running {
		return
	}
	args := []any{"sources_done", st.Done, "sources", st.Total}
	done, total := st.Done, st.Total
	if st.WorkTotal > 0 { // a network sweep: its connections say more than its one source
		args = append(args, "connections_done", st.WorkDone, "connections", st.WorkTotal)
		done, total = st.WorkDone, st.WorkTotal
	}
	rate, left := pace(done, total, now.Sub(st.Since))
	args = append(args, "per_second", rate, "eta", left, "elapsed", now.Sub(st.Since).Round(time.Second))
	d.logger.Info("discovery in progress", args...)
}

// pace is the rate of done in elapsed (a second) and the time left for
// total at that rate; 0 and 0 before anything is done.
func pace(done, total int, elapsed time.Duration) (float64, time.Duration) {
	if done <= 0 || elapsed <= 0 {
		return 0, 0
	}
	rate := float64(done) / elapsed.Seconds()
	left := time.Duration(float64(max(total-done, 0)) / rate * float64(time.Second))
	if rate < 10 {
		return math.Round(rate*100) / 100, left.Round(time.Second)
	}
	return math.Round(rate), left.Round(time.Second)
}

package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/robfig/cron/v3"
)

// timeoutError is the cause of a run's context when its sweep timeout
// ends it.
type timeoutError struct {
	job   string
	limit time.Duration
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%s run exceeded its sweep timeout of %v (raise daemon.sweep_timeout, or run %s less often)", e.job, e.limit, e.job)
}

func (e *timeoutError) Is(target error) bool { return target == ErrTimeout }

// schedules are a Config's parsed specs.
type schedules map[string]cron.Schedule

func (c Config) parse() (schedules, error) {
	s := schedules{}
	var errs []error
	for job, spec := range map[string]string{JobDiscovery: c.Discovery, JobProbe: c.Probe} {
		p, err := cron.ParseStandard(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule of %s job %q: %w", job, spec, err))
			continue
		}
		s[job] = p
	}
	if c.GracePeriod <= 0 {
		errs = append(errs, fmt.Errorf("grace period must be positive, got %v", c.GracePeriod))
	}
	return s, errors.Join(errs...)
}

// pickOffsets draws each job's start offset in [0, Jitter). Callers hold
// d.mu.
func (d *Daemon) pickOffsets() {
	d.offsets = map[string]time.Duration{}
	for _, job := range []string{JobDiscovery, JobProbe} {
		if d.cfg.Jitter > 0 {
			d.offsets[job] = rand.N(d.cfg.Jitter)
		}
	}
}

// timeout is how long one run of job may take.
func (d *Daemon) timeout(job string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	gap := shortestGap(d.sched[job])
	if d.cfg.SweepTimeout > 0 {
		return d.cfg.SweepTimeout
	}
	return max(gap-d.cfg.Jitter, gap/2, time.Second)
}

// shortestGap is the shortest time between two runs of s over its next 64
// runs.
func shortestGap(s cron.Schedule) time.Duration {
	t := s.Next(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	gap := time.Duration(0)
	for range 64 {
		next := s.Next(t)
		if t.IsZero() || next.IsZero() {
			break
		}
		if g := next.Sub(t); gap == 0 || g < gap {
			gap = g
		}
		t = next
	}
	return cmp.Or(gap, 24*time.Hour)
}

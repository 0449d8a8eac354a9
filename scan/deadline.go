package scan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultSourceTimeout is the deadline of each source's discovery when
// Pass.SourceTimeout is zero: long enough for a zone transfer with its
// delegations or an AWS account of thousands of records, short enough
// that a source hanging on something (a FIFO that never opens, a server
// that accepts and never answers) costs every other source's probing no
// more than a few minutes.
const DefaultSourceTimeout = 10 * time.Minute

// sourceGrace is how long a source whose deadline has passed gets to hand
// back what it found (a network sweep cut short yields its open ports)
// before it is abandoned.
const sourceGrace = 2 * time.Second

// SourceTimeoutError is a source's failure when it did not return within
// its deadline (Pass.SourceTimeout). Match it with errors.As.
type SourceTimeoutError struct {
	// Source is the source's name, Limit its deadline.
	Source string
	Limit  time.Duration
	// Busy is set when the source was not started at all because its call
	// of an earlier pass, abandoned at its deadline, had still not
	// returned; Since is when that call started.
	Busy  bool
	Since time.Time
}

func (e *SourceTimeoutError) Error() string {
	if e.Busy {
		return fmt.Sprintf("not started: its discovery started at %s was abandoned at its deadline of %v (discovery_timeout) and has still not returned; "+
			"find what it hangs on (a FIFO or device among its files, a server that accepts and never answers) and fix it, or restart certwatch",
			e.Since.UTC().Format(time.RFC3339), e.Limit)
	}
	return fmt.Sprintf("did not finish within its deadline of %v (discovery_timeout) and was abandoned: "+
		"find what it hangs on (a FIFO or device among its files, a server that accepts and never answers), "+
		"or raise discovery_timeout if it is only slow", e.Limit)
}

// pendingCall is a source's call abandoned at its deadline that has not
// returned yet.
type pendingCall struct {
	since time.Time
	done  <-chan struct{}
}

// sourceTimeout returns the deadline of the source called name.
func (p *Pass) sourceTimeout(name string) time.Duration {
	if d, ok := p.SourceTimeouts[name]; ok && d > 0 {
		return d
	}
	return cmp.Or(p.SourceTimeout, DefaultSourceTimeout)
}

// bounded runs call, a call of the source called name, in a goroutine of
// its own under the source's deadline, and returns what it returns. When
// the deadline passes first, the source gets sourceGrace to return what it
// has; when ctx ends first (a sweep timeout, a shutdown), it gets the
// grace only if ctx was not cancelled. A call that has not returned then
// is abandoned: bounded returns a *SourceTimeoutError (or ctx's cause)
// at once, and the goroutine is left to end when the call returns, if
// ever. A source can block in a system call that no context reaches
// (opening a FIFO with no writer): waiting for it would stall every other
// source's probing, and the process's shutdown. Until such a call
// returns, the source is not called again: later passes fail it at once
// (SourceTimeoutError.Busy), so a source hanging every hour holds one
// goroutine, not one per pass.
func bounded[T any](ctx context.Context, p *Pass, name string, call func(context.Context) (T, error)) (T, error) {
	var zero T
	limit := p.sourceTimeout(name)
	if since, busy := p.pending(name); busy {
		return zero, &SourceTimeoutError{Source: name, Limit: limit, Busy: true, Since: since}
	}
	timeout := &SourceTimeoutError{Source: name, Limit: limit}
	cctx, cancel := context.WithTimeoutCause(ctx, limit, timeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // the call never blocks on sending
	returned := make(chan struct{})
	since := p.now()
	go func() {
		defer close(returned)
		v, err := call(cctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, late(cctx, timeout, r.err)
	case <-cctx.Done():
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		grace := time.NewTimer(sourceGrace)
		defer grace.Stop()
		select {
		case r := <-done:
			return r.v, late(cctx, timeout, r.err)
		case <-grace.C:
		}
	}
	select {
	case r := <-done: // it returned meanwhile after all
		return r.v, late(cctx, timeout, r.err)
	default:
	}
	p.abandon(name, since, returned)
	return zero, context.Cause(cctx)
}

// late returns err, the error of a source's call that returned, saying
// first that its deadline (timeout) passed when it did: the source's own
// words are then often only "context deadline exceeded".
func late(ctx context.Context, timeout *SourceTimeoutError, err error) error {
	if err == nil || context.Cause(ctx) != timeout || errors.As(err, new(*SourceTimeoutError)) {
		return err
	}
	return fmt.Errorf("%w: %w", timeout, err)
}

// pending reports whether a call of the source called name, abandoned
// earlier, is still running, and since when.
func (p *Pass) pending(name string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.abandoned[name]
	if !ok {
		return time.Time{}, false
	}
	select {
	case <-c.done:
		delete(p.abandoned, name)
		return time.Time{}, false
	default:
		return c.since, true
	}
}

// abandon records the call of the source called name started at since,
// which ends when done is closed, as abandoned.
func (p *Pass) abandon(name string, since time.Time, done <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.abandoned == nil {
		p.abandoned = map[string]pendingCall{}
	}
	p.abandoned[name] = pendingCall{since: since, done: done}
}

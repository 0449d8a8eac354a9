package notify

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a failure retrying cannot fix (a request the
// service refuses: bad credentials, unknown channel, invalid payload). The
// dispatcher does not retry it; it marks the notification failed, logs it and
// reports the channel as failing. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryAfterError is a retryable failure for which the service said how long
// to wait (HTTP 429 or 503 with Retry-After). The dispatcher waits at least
// Delay before the next attempt on the channel.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.Err, e.Delay)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err with the delay the service asked for.
func RetryAfter(d time.Duration, err error) error {
	return &RetryAfterError{Delay: d, Err: err}
}

// RetryDelay returns the delay carried by a RetryAfterError in err's chain.
func RetryDelay(err error) (time.Duration, bool) {
	var r *RetryAfterError
	if errors.As(err, &r) {
		return r.Delay, true
	}
	return 0, false
}

// StatusError is an HTTP response that is not a success, for senders to
// build their errors on. Retryable statuses are 408, 429 and 5xx.
type StatusError struct {
	// Op names the call, e.g. "slack chat.postMessage #certs".
	Op     string
	Status int
	// Detail is what the service said, without secrets.
	Detail string
}

func (e *StatusError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s: http %d", e.Op, e.Status)
	}
	return fmt.Sprintf("%s: http %d: %s", e.Op, e.Status, e.Detail)
}

// Retryable reports whether the status may succeed on a later attempt.
func (e *StatusError) Retryable() bool {
	return e.Status == 408 || e.Status == 429 || e.Status >= 500
}

// Classify returns err marked Permanent when it is a StatusError that is
// not retryable, and err unchanged otherwise.
func Classify(err error) error {
	var s *StatusError
	if errors.As(err, &s) && !s.Retryable() {
		return Permanent(err)
	}
	return err
}

// StripURL removes the URL from a *url.Error, which may carry a secret in
// its query or path (a webhook URL, a key), keeping the operation and the
// cause.
func StripURL(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return fmt.Errorf("%s: %w", u.Op, u.Err)
	}
	return err
}

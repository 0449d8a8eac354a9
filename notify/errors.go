package notify

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a failure retrying cannot fix for this one
// notification (the service refuses its payload: invalid blocks, a message
// too long, an event it does not accept). The dispatcher does not retry it;
// it marks the notification failed, logs it and reports the channel as
// failing until the next delivery works. A refusal that concerns the whole
// channel (credentials, channel settings) is marked with ChannelDown
// instead, so that nothing is dropped. Permanent(nil) is nil.
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

// channelDownError marks a refusal of the whole channel.
type channelDownError struct{ err error }

func (e *channelDownError) Error() string { return e.err.Error() }
func (e *channelDownError) Unwrap() error { return e.err }

// ChannelDown marks err as a refusal that concerns the whole channel rather
// than one notification: bad or revoked credentials, a channel that does not
// exist, is archived or that the bot is not in, a missing permission, a
// wrong endpoint. Every notification would be refused alike until an
// operator fixes the channel, so the dispatcher holds the channel instead of
// dropping anything: the notification stays in the outbox and is tried again
// every retry.max, the channel is reported as failing on the other channels
// at once, and the error is logged at Error level when it first appears.
// err should say what to fix. A ChannelDown error is not Permanent.
// ChannelDown(nil) is nil.
func ChannelDown(err error) error {
	if err == nil {
		return nil
	}
	return &channelDownError{err: err}
}

// IsChannelDown reports whether err, or an error it wraps, was marked with
// ChannelDown.
func IsChannelDown(err error) bool {
	var d *channelDownError
	return errors.As(err, &d)
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
// build their errors on. Retryable statuses are 408, 429 and 5xx; 401, 403
// and 404 concern the whole channel (credentials, endpoint).
type StatusError struct {
	// Op names the call, e.g. "slack chat.postMessage #certs".
	Op     string
	Status int
	// Detail is what the service said, without secrets.
	Detail string
	// Hint, when set, says what an operator should check.
	Hint string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s: http %d", e.Op, e.Status)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Retryable reports whether the status may succeed on a later attempt.
func (e *StatusError) Retryable() bool {
	return e.Status == 408 || e.Status == 429 || e.Status >= 500
}

// ChannelLevel reports whether the status refuses the channel rather than
// one request: 401 and 403 (credentials) and 404 (a wrong endpoint).
func (e *StatusError) ChannelLevel() bool {
	return e.Status == 401 || e.Status == 403 || e.Status == 404
}

// Classify returns err marked ChannelDown when it is a StatusError of the
// whole channel, marked Permanent when it is another StatusError that is not
// retryable, and unchanged otherwise.
func Classify(err error) error {
	var s *StatusError
	switch {
	case !errors.As(err, &s), s.Retryable():
		return err
	case s.ChannelLevel():
		return ChannelDown(err)
	}
	return Permanent(err)
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

// ParseRetryAfter parses an HTTP Retry-After value, delay seconds or an
// HTTP date (RFC 9110, 10.2.3), as a wait from now; ok is false for an
// empty or unreadable value.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

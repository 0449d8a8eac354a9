package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Answer says what a channel makes of the answer to one of its requests:
// the parts every HTTP channel words its own way.
type Answer struct {
	// Op names the request in errors ("webhook oncall resolved"); never
	// the URL or a secret.
	Op string
	// Redirected is the error for a redirect (RedirectError), which the
	// client does not follow.
	Redirected func(*RedirectError) error
	// Detail is what of a refusal's body goes into its StatusError:
	// printable, short, without secrets.
	Detail func(body []byte) string
	// Refused, when set, may add a Hint to a refusal, or return the error
	// to report instead of the classified refusal (nil: classify it).
	Refused func(*StatusError) error
}

// Send sends req with client and returns nil for a 2xx answer read whole,
// else an error classified for the dispatcher: a redirect as a.Redirected
// says; a deadline of ctx as its cause; another transport error, its URL
// stripped, retryable; a 2xx whose body is over the client's cap,
// retryable (not an answer the service gives); a 429 or 503 with a
// Retry-After, RetryAfter; any other refusal a StatusError (a.Refused
// first), Classified. ctx is the one req was made with.
func Send(ctx context.Context, client *http.Client, req *http.Request, a Answer) error {
	resp, err := client.Do(req)
	var redirect *RedirectError
	if errors.As(err, &redirect) {
		return a.Redirected(redirect)
	}
	if err != nil {
		return TransportError(ctx, a.Op, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 2 {
		if IsBodyTooLarge(err) {
			return fmt.Errorf("%s: http %d: %w", a.Op, resp.StatusCode, err)
		}
		return nil
	}
	serr := &StatusError{Op: a.Op, Status: resp.StatusCode, Detail: a.Detail(b)}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return RetryAfter(d, serr)
		}
	}
	if a.Refused != nil {
		if err := a.Refused(serr); err != nil {
			return err
		}
	}
	return Classify(serr)
}

// TransportError is the error of a request to op that got no answer: the
// cause of ctx when its deadline ran out (it names the budget), else err
// with its URL stripped.
func TransportError(ctx context.Context, op string, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return fmt.Errorf("%s: %w", op, StripURL(err))
}

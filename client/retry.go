package queen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
)

// RetryPolicy says how often and how patiently a request is sent again
// after a retryable failure (Error.Retryable: HTTP 5xx, gRPC UNAVAILABLE, a
// connection lost on the way, an Idempotency-Key still in flight). Nothing
// else is retried: not a 4xx or INVALID_ARGUMENT (a rate limit only with
// RateLimited), not a refusal the broker answers as a value, not the
// caller's own deadline.
type RetryPolicy struct {
	MaxAttempts int           // sends in all, the first included; 0 = 4, 1 = no retries, < 0 = until the context ends
	BaseDelay   time.Duration // the first wait; 0 = 200ms. Each wait doubles
	MaxDelay    time.Duration // 0 = 5s
	// RateLimited also retries a refusal for rate (HTTP 429, gRPC
	// RESOURCE_EXHAUSTED: the node's KV read rate, for one), which is
	// otherwise returned at once.
	RateLimited bool
	// AttemptTimeout bounds each send of a call (a long-poll pop's: its
	// Wait plus this). A send that runs out while the call's context lives
	// is retried like a lost connection, and if it was the last one the
	// call fails with DEADLINE_EXCEEDED. 0 = none: only the call's context
	// bounds it.
	AttemptTimeout time.Duration
	// OnRetry, if set, is told each failure that is about to be retried
	// (to count or log them). It must be safe for concurrent use.
	OnRetry func(err error)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 4
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 200 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 5 * time.Second
	}
	return p
}

// backoff is the wait before send attempt+1 (attempt counts from 1):
// exponential, capped, with "equal jitter": half fixed, half random, so
// that clients that failed together do not retry together.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := p.BaseDelay << min(attempt-1, 30)
	if d <= 0 || d > p.MaxDelay {
		d = p.MaxDelay
	}
	return d/2 + rand.N(d/2+1)
}

// retries reports whether err may be retried under the policy.
func (p RetryPolicy) retries(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Retryable() || (p.RateLimited && e.Code == codes.ResourceExhausted) || e.attemptTimedOut
}

// do runs call until it succeeds, fails for good, or ctx ends.
func do[T any](ctx context.Context, p RetryPolicy, call func(context.Context) (T, error)) (T, error) {
	return doWait(ctx, p, 0, call)
}

// doWait is do for a call that may rightly take wait longer than a send
// does (a long-poll pop): each attempt's timeout is extended by it.
func doWait[T any](ctx context.Context, p RetryPolicy, wait time.Duration, call func(context.Context) (T, error)) (T, error) {
	var last error // the previous attempt's failure
	for attempt := 1; ; attempt++ {
		v, err := sendOnce(ctx, p, wait, call)
		if err != nil && ctx.Err() != nil && last != nil {
			// The caller's context ended during a retry: what the earlier
			// attempts were told says more than the cut-off one.
			return v, last
		}
		if err == nil || !p.retries(err) || (p.MaxAttempts > 0 && attempt >= p.MaxAttempts) || ctx.Err() != nil {
			return v, err
		}
		last = err
		if p.OnRetry != nil {
			p.OnRetry(err)
		}
		t := time.NewTimer(p.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// sendOnce is one attempt under the policy's attempt timeout. An attempt
// that ran out (while ctx did not) is an *Error with DEADLINE_EXCEEDED that
// the policy retries.
func sendOnce[T any](ctx context.Context, p RetryPolicy, wait time.Duration, call func(context.Context) (T, error)) (T, error) {
	if p.AttemptTimeout <= 0 {
		return call(ctx)
	}
	limit := p.AttemptTimeout + wait
	actx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	v, err := call(actx)
	if err != nil && actx.Err() != nil && ctx.Err() == nil {
		err = &Error{Code: codes.DeadlineExceeded, Message: fmt.Sprintf("no answer within the attempt timeout (%v): %v", limit, err), attemptTimedOut: true}
	}
	return v, err
}

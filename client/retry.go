package queen

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and how patiently a request is sent again
// after a retryable failure (Error.Retryable: HTTP 5xx, gRPC UNAVAILABLE).
// Nothing else is retried: not a 4xx or INVALID_ARGUMENT, not a refusal
// the broker answers as a value, not the caller's own deadline.
type RetryPolicy struct {
	MaxAttempts int           // sends in all, the first included; 0 = 4, 1 = no retries
	BaseDelay   time.Duration // the first wait; 0 = 200ms. Each wait doubles
	MaxDelay    time.Duration // 0 = 5s
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
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

// retryable reports whether err may be retried under the policy.
func retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable()
}

// do runs call until it succeeds, fails for good, or ctx ends.
func do[T any](ctx context.Context, p RetryPolicy, call func(context.Context) (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := call(ctx)
		if err == nil || !retryable(err) || attempt >= p.MaxAttempts {
			return v, err
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

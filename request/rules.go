package request

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
)

// Options are the node's settings the rules depend on. Zero means the
// default.
type Options struct {
	// DefaultSubscriptionMode is where a new named group starts when a pop
	// does not say: "new" (2.0, the default) or "all" (0.15).
	DefaultSubscriptionMode string
	// KVReadRate limits KV reads outside transactions on this node, per
	// second, across both front ends (burst twice that); 0 = the default
	// 200, < 0 = unlimited.
	KVReadRate float64
	// IdempotencyTTL is how long an Idempotency-Key's answer is kept; 0 = 24h.
	IdempotencyTTL time.Duration
	// Streams bound a stream cycle (spec §4.16); zero fields = the defaults.
	Streams StreamLimits
}

// Rules are the request rules with the node's settings. One Rules serves
// both front ends of a node, so that per-node limits hold across them.
type Rules struct {
	opts    Options
	kvReads *rate.Limiter
}

// New makes the rules of a node.
func New(opts Options) *Rules {
	if opts.DefaultSubscriptionMode == "" {
		opts.DefaultSubscriptionMode = "new"
	}
	if opts.KVReadRate == 0 {
		opts.KVReadRate = 200
	}
	if opts.IdempotencyTTL <= 0 {
		opts.IdempotencyTTL = 24 * time.Hour
	}
	r := &Rules{opts: opts}
	if opts.KVReadRate > 0 {
		r.kvReads = rate.NewLimiter(rate.Limit(opts.KVReadRate), int(2*opts.KVReadRate))
	}
	return r
}

// StreamLimits are the node's stream cycle limits.
func (r *Rules) StreamLimits() StreamLimits { return r.opts.Streams.withDefaults() }

// AllowKVRead spends one token of the node's KV read rate (a read-only KV
// call outside a transaction), or refuses with 429.
func (r *Rules) AllowKVRead() error {
	if r.kvReads == nil || r.kvReads.Allow() {
		return nil
	}
	return &Error{Kind: RateLimited, Msg: "kv read rate exceeded on this node", Code: "kv_rate_limited", RetryAfter: 1}
}

// Idempotency reads a request's Idempotency-Key (see package idempotency):
// nil when the request has none. operation and body identify the request.
// caller is the token's sub with JWT on ("" off): keys are kept per
// caller, so two callers' keys never collide and one never receives
// another's stored answer.
func (r *Rules) Idempotency(key, caller, operation string, body []byte) (*command.Idempotency, error) {
	idem, err := idempotency.New(key, operation, body, r.opts.IdempotencyTTL)
	if err != nil {
		return nil, FromError(err)
	}
	if idem != nil && caller != "" {
		idem.Key = fmt.Sprintf("%d:%s/%s", len(caller), caller, idem.Key)
	}
	return idem, nil
}

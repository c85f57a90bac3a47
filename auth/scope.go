package auth

import (
	"context"
	"strings"
)

// Scopes (issue 14): a token may carry a "queues" claim, a list of name
// prefixes; beyond its role it may then touch only queues and KV
// namespaces whose names start with one of them. A token without the claim
// is not scoped. What each command touches is its kind's to say
// (fsm.Kind.Touches); the write path (package pipeline) asks Touches of
// every name.

// Touches reports whether the identity may touch the queue or namespace.
func (id *Identity) Touches(name string) bool {
	if id == nil || id.scopes == nil {
		return true
	}
	for _, p := range id.scopes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Scoped reports whether the identity carries a queues claim.
func (id *Identity) Scoped() bool { return id != nil && id.scopes != nil }

// InScope reports whether the caller of ctx may touch every name.
func InScope(ctx context.Context, names ...string) bool {
	id := IdentityFrom(ctx)
	for _, n := range names {
		if !id.Touches(n) {
			return false
		}
	}
	return true
}

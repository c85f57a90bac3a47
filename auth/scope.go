package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/queen-node/queen-node/tenant"
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

// setTenant reads a token's tenant claim: a valid tenant name, or
// tenant.All on an admin token. Anything else is refused with the rule
// (400: the token is genuine, its claim is not a tenant), never read as
// the default tenant.
func (id *Identity) setTenant(raw json.RawMessage) *Error {
	var name string
	if json.Unmarshal(raw, &name) != nil {
		return &Error{http.StatusBadRequest, "the token's tenant claim is not a string: " + tenant.Rule}
	}
	if name == tenant.All {
		if !id.admin {
			return &Error{http.StatusBadRequest, `the token's tenant claim "*" (every tenant) is for admin tokens only`}
		}
		id.Tenant = name
		return nil
	}
	if err := tenant.Valid(name); err != nil {
		return &Error{http.StatusBadRequest, "the token's tenant claim: " + err.Error()}
	}
	id.Tenant = name
	return nil
}

// AllTenants reports whether the identity may read across tenants (an
// admin token whose tenant claim is "*").
func (id *Identity) AllTenants() bool { return id != nil && id.admin && id.Tenant == tenant.All }

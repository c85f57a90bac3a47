package tenant

import (
	"context"
	"fmt"
)

// Default is the tenant of a request that names none.
const Default = "default"

// All is the claim of an admin token that may read across tenants
// (listings, status); it names no tenant a write could go to.
const All = "*"

// Header is the header a trusted proxy sets (Queen 2.x's only way to name a
// tenant); a node reads it only with --trust-tenant-header.
const Header = "x-queen-tenant"

// Rule is the rule a tenant name follows, as error messages state it.
const Rule = "a tenant is 1 to 63 characters of a-z, 0-9, '-' and '_', starting with a letter or a digit"

// Valid checks name against Rule. All is not a name.
func Valid(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("tenant %q is not a valid name: %s", name, Rule)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return fmt.Errorf("tenant %q is not a valid name: %s", name, Rule)
		}
	}
	return nil
}

// Key is how the log and the state file name a tenant: "" for Default, so
// that entries and records of the default tenant are today's.
func Key(name string) string {
	if name == Default {
		return ""
	}
	return name
}

// Name is the tenant a key names (the inverse of Key).
func Name(key string) string {
	if key == "" {
		return Default
	}
	return key
}

type ctxKey struct{}

// With carries the request's tenant in ctx (a name, or All).
func With(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, ctxKey{}, name)
}

// From is the tenant ctx carries: Default when it carries none.
func From(ctx context.Context) string {
	if t, ok := ctx.Value(ctxKey{}).(string); ok && t != "" {
		return t
	}
	return Default
}

// Carried reports whether ctx names a tenant at all (a request's context
// does; a node's own loops name theirs on each command).
func Carried(ctx context.Context) bool {
	_, ok := ctx.Value(ctxKey{}).(string)
	return ok
}

type everyKey struct{}

// WithEvery marks ctx as a request of an admin of every tenant that named
// none: its listings span every tenant (its writes go to From's).
func WithEvery(ctx context.Context) context.Context { return context.WithValue(ctx, everyKey{}, true) }

// Every reports whether ctx's listings span every tenant.
func Every(ctx context.Context) bool { v, _ := ctx.Value(everyKey{}).(bool); return v }

package auth

import (
	"context"
)

// What both front ends do with an identity once a route let it in.

type identityKey struct{}

// WithIdentity carries the caller's identity in ctx.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom is the caller ctx carries; nil with JWT off.
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

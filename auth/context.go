package auth

import (
	"context"

	"github.com/queen-node/queen-node/command"
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

// Stamp marks cmd with its caller: the actor the audit trail records, and
// producerSub on the messages it appends (StampPushes).
func Stamp(ctx context.Context, cmd *command.Command) {
	if id := IdentityFrom(ctx); id != nil {
		cmd.Actor = id.Sub
	}
	StampPushes(ctx, cmd)
}

// StampPushes sets producerSub from the caller's sub on every message a
// command will append: push items, a transaction's pushes, timers (spec
// §4.17: a producerSub in the body is never taken). With JWT off it does
// nothing.
func StampPushes(ctx context.Context, cmd *command.Command) {
	id := IdentityFrom(ctx)
	if id == nil {
		return
	}
	switch b := cmd.Body.(type) {
	case *command.Command_Push:
		for _, it := range b.Push.Items {
			it.ProducerSub = id.Sub
		}
	case *command.Command_Transaction:
		for _, op := range b.Transaction.Ops {
			if p := op.GetPush(); p != nil {
				p.ProducerSub = id.Sub
			}
		}
	case *command.Command_Timers:
		for _, op := range b.Timers.Ops {
			op.ProducerSub = id.Sub
		}
	}
}

// MayRun reports whether the caller may run cmd beyond its route's level:
// a write-only token schedules timers but never cancels one, and KV writes
// need read-write on the KV route that reads take with read-only.
func MayRun(ctx context.Context, cmd *command.Command) bool {
	id := IdentityFrom(ctx)
	if id == nil {
		return true
	}
	if cmd.GetKv() != nil && !id.Allows(ReadWrite, false) {
		return false
	}
	if !id.WriteOnly() {
		return true
	}
	if t := cmd.GetTimers(); t != nil {
		for _, op := range t.Ops {
			if op.Kind == command.TimerOp_CANCEL {
				return false
			}
		}
	}
	return true
}

package auth

import (
	"context"
	"strings"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/locks"
)

// Scopes (issue 14): a token may carry a "queues" claim, a list of name
// prefixes; beyond its role it may then touch only queues and KV
// namespaces whose names start with one of them. A token without the claim
// is not scoped.

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

// CommandInScope reports whether the caller may run cmd given its scope:
// every queue it pushes to, pops, configures, deletes or seeks, every KV
// namespace it touches, and the queue of every partition it acks
// (partitionQueue resolves one; false = unknown, refused). A scoped caller
// may not run what spans every queue (a namespace pop, deleting a group
// everywhere, moving a group's subscription everywhere).
func CommandInScope(ctx context.Context, cmd *command.Command, partitionQueue func(pid []byte) (string, bool)) bool {
	id := IdentityFrom(ctx)
	if !id.Scoped() {
		return true
	}
	acks := func(items []*command.AckItem) bool {
		for _, it := range items {
			q, ok := partitionQueue(it.PartitionId)
			if !ok || !id.Touches(q) {
				return false
			}
		}
		return true
	}
	kv := func(ops []*command.KVOp) bool {
		for _, op := range ops {
			if !id.Touches(op.Ns) {
				return false
			}
		}
		return true
	}
	switch b := cmd.Body.(type) {
	case *command.Command_Push:
		for _, it := range b.Push.Items {
			if !id.Touches(it.Queue) {
				return false
			}
		}
	case *command.Command_Pop:
		return b.Pop.Queue != "" && id.Touches(b.Pop.Queue)
	case *command.Command_Ack:
		return acks(b.Ack.Items)
	case *command.Command_Transaction:
		for _, op := range b.Transaction.Ops {
			if p := op.GetPush(); p != nil && !id.Touches(p.Queue) {
				return false
			}
			if a := op.GetAck(); a != nil && !acks([]*command.AckItem{a}) {
				return false
			}
		}
		return kv(b.Transaction.Kv)
	case *command.Command_Kv:
		return kv(b.Kv.Ops)
	case *command.Command_Timers:
		for _, op := range b.Timers.Ops {
			if !id.Touches(op.Queue) {
				return false
			}
		}
	case *command.Command_Configure:
		return id.Touches(b.Configure.Queue)
	case *command.Command_DeleteQueue:
		return id.Touches(b.DeleteQueue.Queue)
	case *command.Command_DeleteGroup:
		return b.DeleteGroup.Queue != "" && id.Touches(b.DeleteGroup.Queue)
	case *command.Command_Seek:
		return id.Touches(b.Seek.Queue)
	case *command.Command_SetSubscription:
		return false
	case *command.Command_DeleteMessage:
		q, ok := partitionQueue(b.DeleteMessage.PartitionId)
		return ok && id.Touches(q)
	case *command.Command_RecordTrace:
		q, ok := partitionQueue(b.RecordTrace.PartitionId)
		return ok && id.Touches(q)
	case *command.Command_ReplayDeadLetter:
		r := b.ReplayDeadLetter
		return r.SourceQueue != "" && id.Touches(r.SourceQueue) && (r.Queue == "" || id.Touches(r.Queue))
	case *command.Command_PurgeDeadLetters:
		return id.Touches(b.PurgeDeadLetters.Queue)
	case *command.Command_Locks:
		return id.Touches(locks.Namespace) // permits are KV rows of that namespace, as the guard's check is
	}
	return true
}

// QueryInScope reports whether the caller may run a read query given its
// scope: KV reads by namespace, timer reads by queue.
func QueryInScope(ctx context.Context, q *command.Query) bool {
	id := IdentityFrom(ctx)
	if !id.Scoped() {
		return true
	}
	switch b := q.Body.(type) {
	case *command.Query_Kv:
		for _, op := range b.Kv.Ops {
			if !id.Touches(op.Ns) {
				return false
			}
		}
	case *command.Query_Timer:
		return id.Touches(b.Timer.Queue)
	case *command.Query_Timers:
		return id.Touches(b.Timers.Queue)
	case *command.Query_TimerCount:
		return id.Touches(b.TimerCount.Queue)
	}
	return true
}

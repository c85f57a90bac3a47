package fsm

import (
	"reflect"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
)

// handler applies one kind of command. It returns the result and whether to
// keep its writes: false discards every write of the command (all or
// nothing), which is how a refused transaction leaves no trace.
type handler struct {
	name  string
	apply func(c *applyCtx, cmd *command.Command) (proto.Message, bool)
}

// handlers maps a command body's type to its handler. Adding a command is:
//
//  1. its message in command/commands.proto, with an arm in Command's body
//     oneof, and its result message in command/results.proto, with an arm
//     in Response's result oneof (command.Wrap and Unwrap find results
//     there; nothing else switches on result types);
//  2. one register line below, naming its handler (the name labels its
//     apply metric);
//  3. its handler, in the file of its domain, and its tests.
//
// TestEveryCommandBodyHasAHandler fails until steps 1 and 2 agree.
var handlers = map[reflect.Type]*handler{}

func register(body any, name string, fn func(*applyCtx, *command.Command) (proto.Message, bool)) {
	key := reflect.TypeOf(body)
	if _, dup := handlers[key]; dup {
		panic("fsm: handler registered twice for " + key.String())
	}
	handlers[key] = &handler{name: name, apply: fn}
}

func init() {
	register(&command.Command_Noop{}, "noop", func(*applyCtx, *command.Command) (proto.Message, bool) {
		return &command.Response{}, true
	})
	register(&command.Command_Push{}, "push", applyPush)
	register(&command.Command_Pop{}, "pop", applyPop)
	register(&command.Command_Ack{}, "ack", applyAck)
	register(&command.Command_Transaction{}, "transaction", applyTransaction)
	register(&command.Command_ExtendLease{}, "extend_lease", applyExtendLease)
	register(&command.Command_Configure{}, "configure", applyConfigure)
	register(&command.Command_DeleteQueue{}, "delete_queue", applyDeleteQueue)
	register(&command.Command_Sweep{}, "sweep", applySweep)
	register(&command.Command_Retain{}, "retain", applyRetain)
	register(&command.Command_Kv{}, "kv", applyKV)
	register(&command.Command_IdempotencyRecord{}, "idempotency_record", applyIdempotencyRecord)
	register(&command.Command_SetSwitches{}, "set_switches", applySetSwitches)
	register(&command.Command_Timers{}, "timers", applyTimerBatch)
	register(&command.Command_FireTimers{}, "fire_timers", applyFireTimers)
	register(&command.Command_DrainBuffer{}, "drain_buffer", applyDrainBuffer)
	register(&command.Command_DeleteGroup{}, "delete_group", applyDeleteGroup)
	register(&command.Command_SetSubscription{}, "set_subscription", applySetSubscription)
	register(&command.Command_Seek{}, "seek", applySeek)
	register(&command.Command_AuditNote{}, "audit_note", func(*applyCtx, *command.Command) (proto.Message, bool) {
		return &command.Response{}, true // its record is written by applyCommand, like every audited command's
	})
	register(&command.Command_DeleteMessage{}, "delete_message", applyDeleteMessage)
	register(&command.Command_ReplayDeadLetter{}, "replay_dead_letter", applyReplayDeadLetter)
	register(&command.Command_PurgeDeadLetters{}, "purge_dead_letters", applyPurgeDeadLetters)
	register(&command.Command_RecordTrace{}, "record_trace", applyRecordTrace)
	register(&command.Command_Locks{}, "locks", applyLocks)
}

// Kinds is how many kinds of command this FSM applies.
func Kinds() int { return len(handlers) }

// Applies reports whether this FSM applies cmd (or may skip it): a command
// with no body it knows would stop every replica that meets it, so it must
// never enter the log.
func Applies(cmd *command.Command) bool { return handlerFor(cmd) != nil || cmd.Skippable }

func handlerFor(cmd *command.Command) *handler {
	if cmd.Body == nil {
		return nil
	}
	return handlers[reflect.TypeOf(cmd.Body)]
}

// applyIdempotencyRecord has no effect but its result, the refusal, which
// applyCommand stores under the command's key as it stores every keyed
// command's outcome (package idempotency).
func applyIdempotencyRecord(_ *applyCtx, cmd *command.Command) (proto.Message, bool) {
	if r := cmd.GetIdempotencyRecord().GetRefusal(); r != nil {
		return r, true
	}
	return &command.Refusal{}, true
}

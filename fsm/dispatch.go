package fsm

import (
	"reflect"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// handler applies one kind of command. It returns the result and whether to
// keep its writes: false discards every write of the command (all or
// nothing), which is how a refused transaction leaves no trace.
type handler struct {
	name  string
	apply func(c *applyCtx, cmd *fsmpb.Command) (proto.Message, bool)
}

// handlers maps a command body's type to its handler. Adding a command is
// one message in commands.proto, one entry here and its handler.
var handlers = map[reflect.Type]*handler{}

func register(body any, name string, fn func(*applyCtx, *fsmpb.Command) (proto.Message, bool)) {
	key := reflect.TypeOf(body)
	if _, dup := handlers[key]; dup {
		panic("fsm: handler registered twice for " + key.String())
	}
	handlers[key] = &handler{name: name, apply: fn}
}

func init() {
	register(&fsmpb.Command_Noop{}, "noop", func(*applyCtx, *fsmpb.Command) (proto.Message, bool) {
		return &fsmpb.Response{}, true
	})
	register(&fsmpb.Command_Push{}, "push", applyPush)
	register(&fsmpb.Command_Pop{}, "pop", applyPop)
	register(&fsmpb.Command_Ack{}, "ack", applyAck)
	register(&fsmpb.Command_Transaction{}, "transaction", applyTransaction)
	register(&fsmpb.Command_ExtendLease{}, "extend_lease", applyExtendLease)
	register(&fsmpb.Command_Configure{}, "configure", applyConfigure)
	register(&fsmpb.Command_DeleteQueue{}, "delete_queue", applyDeleteQueue)
	register(&fsmpb.Command_Sweep{}, "sweep", applySweep)
	register(&fsmpb.Command_Kv{}, "kv", applyKV)
	register(&fsmpb.Command_IdempotencyRecord{}, "idempotency_record", applyIdempotencyRecord)
	register(&fsmpb.Command_SetSwitches{}, "set_switches", applySetSwitches)
	register(&fsmpb.Command_Timers{}, "timers", applyTimerBatch)
	register(&fsmpb.Command_FireTimers{}, "fire_timers", applyFireTimers)
}

func handlerFor(cmd *fsmpb.Command) *handler {
	if cmd.Body == nil {
		return nil
	}
	return handlers[reflect.TypeOf(cmd.Body)]
}

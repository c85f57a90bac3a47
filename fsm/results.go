package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// Wrap puts a command's result into the Response envelope, for storing it
// (idempotency) or sending it over the wire (forwarding).
func Wrap(m proto.Message) *fsmpb.Response {
	r := &fsmpb.Response{}
	switch v := m.(type) {
	case *fsmpb.Response:
		return v
	case *fsmpb.PushResult:
		r.Result = &fsmpb.Response_Push{Push: v}
	case *fsmpb.PopResult:
		r.Result = &fsmpb.Response_Pop{Pop: v}
	case *fsmpb.AckResult:
		r.Result = &fsmpb.Response_Ack{Ack: v}
	case *fsmpb.TxnResult:
		r.Result = &fsmpb.Response_Transaction{Transaction: v}
	case *fsmpb.ExtendResult:
		r.Result = &fsmpb.Response_Extend{Extend: v}
	case *fsmpb.ConfigureResult:
		r.Result = &fsmpb.Response_Configure{Configure: v}
	case *fsmpb.DeleteQueueResult:
		r.Result = &fsmpb.Response_DeleteQueue{DeleteQueue: v}
	case *fsmpb.SweepResult:
		r.Result = &fsmpb.Response_Sweep{Sweep: v}
	case *fsmpb.KVBatchResult:
		r.Result = &fsmpb.Response_Kv{Kv: v}
	case *fsmpb.SwitchesResult:
		r.Result = &fsmpb.Response_Switches{Switches: v}
	case *fsmpb.IdempotencyResult:
		r.Result = &fsmpb.Response_Idempotency{Idempotency: v}
	case *fsmpb.Replay:
		r.Result = &fsmpb.Response_Replay{Replay: v}
	case *fsmpb.TimerBatchResult:
		r.Result = &fsmpb.Response_Timers{Timers: v}
	case *fsmpb.FireResult:
		r.Result = &fsmpb.Response_Fire{Fire: v}
	case nil:
	default:
		panic(fmt.Sprintf("fsm: no envelope for result %T", m))
	}
	return r
}

// Unwrap returns the typed result inside a Response (the Response itself
// when it carries none, e.g. an internal error).
func Unwrap(r *fsmpb.Response) proto.Message {
	switch v := r.Result.(type) {
	case *fsmpb.Response_Push:
		return v.Push
	case *fsmpb.Response_Pop:
		return v.Pop
	case *fsmpb.Response_Ack:
		return v.Ack
	case *fsmpb.Response_Transaction:
		return v.Transaction
	case *fsmpb.Response_Extend:
		return v.Extend
	case *fsmpb.Response_Configure:
		return v.Configure
	case *fsmpb.Response_DeleteQueue:
		return v.DeleteQueue
	case *fsmpb.Response_Sweep:
		return v.Sweep
	case *fsmpb.Response_Kv:
		return v.Kv
	case *fsmpb.Response_Switches:
		return v.Switches
	case *fsmpb.Response_Idempotency:
		return v.Idempotency
	case *fsmpb.Response_Replay:
		return v.Replay
	case *fsmpb.Response_Timers:
		return v.Timers
	case *fsmpb.Response_Fire:
		return v.Fire
	}
	return r
}

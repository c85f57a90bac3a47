package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/timers"
)

// The operator switches (spec §4.14, addendum §4.4) are replicated state:
// one entry flips them on every node at the same point of the log.

func switchesOf(m *command.MetaRecord) *command.SwitchesResult {
	return &command.SwitchesResult{
		PushMaintenance: m.PushMaintenance, PopMaintenance: m.PopMaintenance,
		KvEnabled: !m.KvDisabled, TimersScheduleEnabled: !m.TimersScheduleDisabled,
		TimersFireEnabled: !m.TimersFireDisabled, Buffered: m.Buffered,
	}
}

func applySetSwitches(c *applyCtx, cmd *command.Command) (proto.Message, bool) {
	in := cmd.GetSetSwitches()
	m := c.meta
	if in.PushMaintenance != nil {
		m.PushMaintenance = *in.PushMaintenance
	}
	if in.PopMaintenance != nil {
		m.PopMaintenance = *in.PopMaintenance
	}
	if in.KvEnabled != nil {
		m.KvDisabled = !*in.KvEnabled
	}
	if in.TimersScheduleEnabled != nil {
		m.TimersScheduleDisabled = !*in.TimersScheduleEnabled
	}
	if in.TimersFireEnabled != nil {
		m.TimersFireDisabled = !*in.TimersFireEnabled
	}
	c.all = true // pop maintenance ending, or anything else, may wake pollers
	return switchesOf(m), true
}

// Switches reports the operator switches.
func (rd *Reader) Switches() *command.SwitchesResult { return switchesOf(rd.Meta()) }

// switchedOff is the refusal the operator's kill switches give cmd, or nil
// (addendum §4.4): KV calls and transactions with KV while KV is off,
// timer schedules (standalone or in a transaction) while scheduling is
// off. Apply answers with it; so does the pre-check a node makes before it
// proposes (Reader.SwitchedOff), so that a refused call writes no entry.
func switchedOff(m *command.MetaRecord, cmd *command.Command) proto.Message {
	switch b := cmd.Body.(type) {
	case *command.Command_Kv:
		if m.KvDisabled {
			return &command.KVBatchResult{Ok: false, Reason: command.Reason_KV_DISABLED, FailedIndex: -1}
		}
	case *command.Command_Locks: // a permit is a KV row
		if m.KvDisabled {
			return &command.LocksResult{Reason: command.Reason_KV_DISABLED}
		}
	case *command.Command_Timers:
		if m.TimersScheduleDisabled && timers.Schedules(b.Timers.Ops) {
			return &command.TimerBatchResult{Reason: command.Reason_TIMERS_DISABLED}
		}
	case *command.Command_Transaction:
		in := b.Transaction
		refuse := func(reason command.Reason, text string) proto.Message {
			return &command.TxnResult{TransactionId: in.TransactionId, Reason: reason, Error: text, FailedIndex: -1}
		}
		if len(in.Kv) > 0 && m.KvDisabled {
			return refuse(command.Reason_KV_DISABLED, "kv is disabled by the operator")
		}
		if m.TimersScheduleDisabled && timers.Schedules(in.Timers) {
			return refuse(command.Reason_TIMERS_DISABLED, "timer scheduling is disabled by the operator")
		}
	}
	return nil
}

// Refused is the answer apply would give cmd without changing anything,
// when this view already shows it: the operator's switches are off for it,
// or a seek names a queue or partition that does not exist. nil: cmd must
// be proposed (apply decides again, on the state it meets). A node asks
// before it proposes, so that a call refused for these reasons writes no
// entry at all.
func (rd *Reader) Refused(cmd *command.Command) proto.Message {
	if off := switchedOff(rd.Meta(), cmd); off != nil {
		return off
	}
	if s := cmd.GetSeek(); s != nil {
		if rd.Queue(s.Queue) == nil {
			return &command.SeekResult{}
		}
		if s.OnePartition && !rd.HasPartition(s.Queue, s.Partition) {
			return &command.SeekResult{QueueFound: true}
		}
	}
	return nil
}

package fsm

import (
	"fmt"

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

// The refusals the operator's kill switches give (addendum §4.4): KV
// calls, lock calls (a permit is a KV row) and transactions with KV while
// KV is off, timer schedules (standalone or in a transaction) while
// scheduling is off. Apply answers with them; so does the check a node
// makes before it proposes (Kind.Refusal), so that a refused call writes
// no entry.

func kvSwitchedOff(m *command.MetaRecord) proto.Message {
	if m.KvDisabled {
		return &command.KVBatchResult{Ok: false, Reason: command.Reason_KV_DISABLED, FailedIndex: -1}
	}
	return nil
}

func locksSwitchedOff(m *command.MetaRecord) proto.Message {
	if m.KvDisabled {
		return &command.LocksResult{Reason: command.Reason_KV_DISABLED}
	}
	return nil
}

func timersSwitchedOff(m *command.MetaRecord, cmd *command.Command) proto.Message {
	if m.TimersScheduleDisabled && timers.Schedules(cmd.GetTimers().Ops) {
		return &command.TimerBatchResult{Reason: command.Reason_TIMERS_DISABLED}
	}
	return nil
}

func transactionSwitchedOff(m *command.MetaRecord, cmd *command.Command) proto.Message {
	in := cmd.GetTransaction()
	refuse := func(reason command.Reason, text string) proto.Message {
		return &command.TxnResult{TransactionId: in.TransactionId, Reason: reason, Error: text, FailedIndex: -1}
	}
	if len(in.Kv) > 0 && m.KvDisabled {
		return refuse(command.Reason_KV_DISABLED, "kv is disabled by the operator")
	}
	if m.TimersScheduleDisabled && timers.Schedules(in.Timers) {
		return refuse(command.Reason_TIMERS_DISABLED, "timer scheduling is disabled by the operator")
	}
	return nil
}

func switchesAudit(cmd *command.Command) (string, string) {
	s := cmd.GetSetSwitches()
	return "set_switches", fmt.Sprintf("pushMaintenance=%s popMaintenance=%s kv=%s timersSchedule=%s timersFire=%s",
		opt(s.PushMaintenance), opt(s.PopMaintenance), opt(s.KvEnabled), opt(s.TimersScheduleEnabled), opt(s.TimersFireEnabled))
}

func opt(b *bool) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprint(*b)
}

// Refused is the answer apply would give cmd without changing anything,
// when this view already shows it (its kind's Refusal), or nil: cmd must
// be proposed (apply decides again, on the state it meets). A node asks
// before it proposes, so that a call refused for these reasons writes no
// entry at all.
func (rd *Reader) Refused(cmd *command.Command) proto.Message {
	if k := KindOf(cmd); k != nil {
		return k.Refusal(rd, cmd)
	}
	return nil
}

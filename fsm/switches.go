package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
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

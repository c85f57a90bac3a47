package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/queen-node/queen-node/command"
)

// What the FSM's apply adds to the domains' rules: the push buffer follows
// the push maintenance switch and the meta record's count of what waits
// there, and a full disk halts apply. (The queue rules are tested in
// package queue, without the FSM.)

// Buffered pushes are appended in order when push maintenance ends; a
// retried push buffered twice is appended once (the dedup window).
func TestPushMaintenanceBuffersThenAppendsInOrder(t *testing.T) {
	h := newHarness(t)
	on, off := true, false
	sw := func(v *bool) {
		h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{PushMaintenance: v}}})
	}
	drain := func(limit uint32) *command.DrainResult {
		return h.apply(&command.Command{Body: &command.Command_DrainBuffer{DrainBuffer: &command.DrainBuffer{Limit: limit}}}).(*command.DrainResult)
	}
	sw(&on)
	res := h.push(item("q", "", "a"), item("q", "", "b"))
	eq(t, "buffered", res[0].Status, command.PushItemResult_BUFFERED)
	h.push(item("q", "", "a"), item("q", "", "c")) // a retried a
	eq(t, "invisible", len(h.pop("q", group("g"), fromAll()).Messages), 0)
	eq(t, "no drain while on", drain(10).Appended, uint32(0))
	sw(&off)
	// Pushes that come while the buffer drains queue behind it.
	eq(t, "behind the buffer", h.push(item("q", "", "d"))[0].Status, command.PushItemResult_BUFFERED)
	d := drain(2)
	eq(t, "first step", d.Appended, uint32(2))
	eq(t, "left", d.Remaining, uint64(3))
	for drain(2).Remaining > 0 {
	}
	eq(t, "appended now", h.push(item("q", "", "e"))[0].Status, command.PushItemResult_QUEUED)
	eqList(t, "in order, a once", h.txns(h.pop("q", group("g"), fromAll(), batch(10))), []string{"a", "b", "c", "d", "e"})
}

// A node that stops while its disk is full halts apply: the batch is not
// applied (the state's applied index stays, so the entries are applied
// after the restart), and no snapshot claims entries the state lacks.
func TestApplyHaltsWhenTheDiskStaysFull(t *testing.T) {
	h := newHarness(t)
	h.push(item("q", "", "a"))
	before := stateHash(t, h.f)
	applied := h.f.AppliedIndex()
	full := false
	h.f.opts.AwaitSpace = func() bool { return !full }
	full = true
	l := h.entry(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{item("q", "", "b")}}}})
	if res := h.f.ApplyBatch([]*raft.Log{l}); res[0] != nil {
		t.Fatalf("a halted FSM answered %v", res[0])
	}
	eq(t, "applied index", h.f.AppliedIndex(), applied)
	eq(t, "state", stateHash(t, h.f), before)
	if _, err := h.f.Snapshot(); err == nil {
		t.Fatal("a halted FSM took a snapshot")
	}
	full = false // halted for the rest of the process, whatever the disk does now
	if res := h.f.ApplyBatch([]*raft.Log{l}); res[0] != nil || h.f.AppliedIndex() != applied {
		t.Fatal("a halted FSM applied again")
	}
}

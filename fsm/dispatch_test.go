package fsm

import (
	"testing"

	"github.com/queen-node/queen-node/command"
)

// Each queue command's handler makes its call into the queue domain and
// answers with what the domain returned; an operator's write is audited
// when it is kept, and a seek that finds no queue keeps nothing, not even
// its audit record. (The queue rules themselves are tested in package
// queue, without the FSM.)
func TestQueueCommandsReachTheDomain(t *testing.T) {
	h := newHarness(t)
	h.configure("q", &command.QueueOptions{LeaseTime: ptr(int64(3))})
	h.push(item("q", "p1", "a"), item("q", "p2", "b"))
	r := h.pop("q", group("g"), fromAll(), batch(2), partitions(2))
	eq(t, "popped", len(r.Messages), 2)
	ext := h.apply(&command.Command{Body: &command.Command_ExtendLease{ExtendLease: &command.ExtendLease{LeaseId: r.LeaseId, Seconds: 600}}}).(*command.ExtendResult)
	eq(t, "extended", ext.Success, true)
	for _, a := range h.ackAll(r, command.AckStatus_COMPLETED) {
		eq(t, "acked and released", a.Success && a.LeaseReleased, true)
	}
	seek := func(queue string) *command.SeekResult {
		return h.apply(&command.Command{Body: &command.Command_Seek{Seek: &command.Seek{Group: "g", Queue: queue, TimestampUs: 1}}}).(*command.SeekResult)
	}
	eq(t, "seek back", seek("q").PartitionsUpdated, uint32(2))
	eq(t, "delivered again", len(h.pop("q", group("g"), batch(2), partitions(2)).Messages), 2)
	before := stateHashWithoutMeta(t, h)
	eq(t, "seek of no queue", seek("nope").QueueFound, false)
	eq(t, "kept nothing", stateHashWithoutMeta(t, h), before)
	del := h.apply(&command.Command{Body: &command.Command_DeleteGroup{DeleteGroup: &command.DeleteGroup{Group: "g", DeleteMetadata: true}}}).(*command.DeleteGroupResult)
	eq(t, "group deleted", del.DeletedPartitions == 2 && del.MetadataDeleted, true)
	h.read(func(rd *Reader) {
		var actions []string
		for _, a := range rd.Audit(0, 10) {
			actions = append(actions, a.Action)
		}
		eqList(t, "audited, newest first", actions, []string{"delete_consumer_group", "seek"})
	})
}

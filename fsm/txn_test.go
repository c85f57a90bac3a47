package fsm

import (
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
)

func (h *harness) txn(in *command.Transaction) *command.TxnResult {
	h.t.Helper()
	return h.apply(&command.Command{Body: &command.Command_Transaction{Transaction: in}}).(*command.TxnResult)
}

func ackOp(a *command.AckItem) *command.TxnOp { return &command.TxnOp{Op: &command.TxnOp_Ack{Ack: a}} }
func pushOp(p *command.PushItem) *command.TxnOp {
	return &command.TxnOp{Op: &command.TxnOp_Push{Push: p}}
}

func marker(key string, required bool) *command.KVOp {
	return &command.KVOp{Kind: command.KVOp_PUT_IF_ABSENT, Ns: "charges", Key: key, Value: []byte(`{"charged":true}`), TtlSeconds: 3600, Required: required}
}

func TestTransactionAckAndPushCommitTogether(t *testing.T) {
	h := newHarness(t)
	h.push(item("a", "", "a1"))
	r := h.pop("a")
	res := h.txn(&command.Transaction{Ops: []*command.TxnOp{ackOp(h.ackOf(r, 0, command.AckStatus_COMPLETED)), pushOp(item("b", "", "b1"))}})
	eq(t, "success", res.Success, true)
	eq(t, "results", len(res.Results), 2)
	eq(t, "a drained", len(h.pop("a").Messages), 0)
	eqList(t, "b", h.txns(h.pop("b")), []string{"b1"})
}

func TestTransactionWithAStaleAckWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.configure("a", &command.QueueOptions{LeaseTime: ptr(int64(1))})
	h.push(item("a", "", "a1"))
	r := h.pop("a")
	h.advance(2 * time.Second) // the lease ran out while the card was charged
	before := stateHashWithoutMeta(t, h)
	res := h.txn(&command.Transaction{
		Ops: []*command.TxnOp{pushOp(item("b", "", "b1")), ackOp(h.ackOf(r, 0, command.AckStatus_COMPLETED))},
		Kv:  []*command.KVOp{marker("charge:a1", true)},
	})
	eq(t, "success", res.Success, false)
	eq(t, "reason", res.Reason, command.Reason_REJECTED_ACK)
	eq(t, "nothing written", stateHashWithoutMeta(t, h), before)
	// The message is still there for the next worker.
	eqList(t, "redelivered", h.txns(h.pop("a")), []string{"a1"})
}

func TestRacingMarkerCommitsExactlyOneWins(t *testing.T) {
	h := newHarness(t)
	h.configure("orders", &command.QueueOptions{LeaseTime: ptr(int64(1))})
	h.push(item("orders", "", "o1"))
	a := h.pop("orders")
	h.advance(2 * time.Second)
	b := h.pop("orders") // worker B gets the order under a new lease
	resB := h.txn(&command.Transaction{Ops: []*command.TxnOp{ackOp(h.ackOf(b, 0, command.AckStatus_COMPLETED))}, Kv: []*command.KVOp{marker("charge:o1", true)}})
	eq(t, "B commits", resB.Success, true)
	// A's late commit: refused by its lease, and its marker is not written.
	resA := h.txn(&command.Transaction{Ops: []*command.TxnOp{ackOp(h.ackOf(a, 0, command.AckStatus_COMPLETED))}, Kv: []*command.KVOp{marker("charge:o1", true)}})
	eq(t, "A refused", resA.Reason, command.Reason_REJECTED_ACK)

	// Same key, both leases valid (two messages of one order): exactly one gate wins.
	h.push(item("orders", "p2", "x1"), item("orders", "p3", "x2"))
	p2 := h.pop("orders", onPartition("p2"))
	p3 := h.pop("orders", onPartition("p3"))
	first := h.txn(&command.Transaction{Ops: []*command.TxnOp{ackOp(h.ackOf(p2, 0, command.AckStatus_COMPLETED))}, Kv: []*command.KVOp{marker("charge:x", true)}})
	second := h.txn(&command.Transaction{Ops: []*command.TxnOp{ackOp(h.ackOf(p3, 0, command.AckStatus_COMPLETED))}, Kv: []*command.KVOp{marker("charge:x", true)}})
	eq(t, "first wins", first.Success, true)
	eq(t, "second loses", second.Reason, command.Reason_KV_PRECONDITION)
	eq(t, "failed index", second.FailedIndex, int32(1))
	eq(t, "kv reason", second.FailedKv.Reason, command.KVResult_EXISTS)
	eq(t, "winner value", string(second.FailedKv.Value), `{"charged":true}`)
	// The loser's ack did not land: the message is still leased to it, not consumed.
	h.read(func(rd *Reader) {
		eq(t, "loser not consumed", rd.Cursor(p3.Messages[0].PartitionId, command.QueueModeGroup).Consumed, uint64(0))
	})
}

func TestTransactionNonRequiredKVLossCommitsTheRest(t *testing.T) {
	h := newHarness(t)
	h.txn(&command.Transaction{Kv: []*command.KVOp{marker("k", false)}})
	res := h.txn(&command.Transaction{Ops: []*command.TxnOp{pushOp(item("b", "", "b1"))}, Kv: []*command.KVOp{marker("k", false)}})
	eq(t, "success", res.Success, true)
	eq(t, "kv applied", res.Results[1].Kv.Applied, false)
	eq(t, "pushed", len(h.pop("b").Messages), 1)
}

func TestTransactionDuplicatePushAbortsBeforeKV(t *testing.T) {
	h := newHarness(t)
	h.push(item("b", "", "dup"))
	h.txn(&command.Transaction{Kv: []*command.KVOp{marker("once", true)}})
	res := h.txn(&command.Transaction{Ops: []*command.TxnOp{pushOp(item("b", "", "dup"))}, Kv: []*command.KVOp{marker("once", true)}})
	eq(t, "reason", res.Reason, command.Reason_DUPLICATE)
	// Repeated inside one transaction: stored once, and it commits.
	res = h.txn(&command.Transaction{Ops: []*command.TxnOp{pushOp(item("c", "", "x")), pushOp(item("c", "", "x"))}})
	eq(t, "in-call repeat commits", res.Success, true)
	eq(t, "stored once", len(h.pop("c", batch(10)).Messages), 1)
}

// The transaction hands its requiredLeases to its acks (the rule of that
// evidence is queue.TestRequiredLeasesCoverAcksWithoutALeaseID), and an ack
// they do not cover refuses the transaction as rejected_ack.
func TestTransactionThreeAcksCompletingOneLease(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"m0", "m1", "m2"} {
		h.push(item("q", "", id))
	}
	r := h.pop("q", batch(3))
	var ops []*command.TxnOp
	for i := range r.Messages {
		a := h.ackOf(r, i, command.AckStatus_COMPLETED)
		a.LeaseId = "" // evidence from requiredLeases instead
		ops = append(ops, ackOp(a))
	}
	res := h.txn(&command.Transaction{Ops: ops, RequiredLeases: []string{r.LeaseId}})
	eq(t, "success", res.Success, true)
	eq(t, "released", res.Results[2].LeaseReleased, true)
	// Wrong lease in requiredLeases: rejected.
	h.push(item("q", "", "m3"))
	r = h.pop("q")
	a := h.ackOf(r, 0, command.AckStatus_COMPLETED)
	a.LeaseId = ""
	res = h.txn(&command.Transaction{Ops: []*command.TxnOp{ackOp(a)}, RequiredLeases: []string{"other"}})
	eq(t, "rejected", res.Reason, command.Reason_REJECTED_ACK)
}

func TestTransactionAckOfMissingMessage(t *testing.T) {
	h := newHarness(t)
	res := h.txn(&command.Transaction{Ops: []*command.TxnOp{ackOp(&command.AckItem{TransactionId: "x", PartitionId: newMsgID(), Status: command.AckStatus_COMPLETED})}})
	eq(t, "error", res.Error, "ACK operation failed: Message not found")
}

func position(queue, group, partition string, offset uint64) *command.PositionOp {
	return &command.PositionOp{Queue: queue, ConsumerGroup: group, Partition: partition, Offset: offset}
}

// Positions in a transaction (addendum §4.2) are set atomically with the
// rest of it: their results come after the KV ones, and a queue that does
// not exist rolls it all back. (What a position does to a group is
// queue.TestPositionsSetWhereAGroupReadsNext.)
func TestTransactionPositions(t *testing.T) {
	h := newHarness(t)
	h.push(item("q", "p", "m1"), item("q", "p", "m2"), item("q", "p", "m3"), item("q", "p", "m4"))
	held := h.pop("q", group("g"), fromAll(), onPartition("p"), batch(10))
	eq(t, "the group holds the run", len(held.Messages), 4)

	// Rewind g to offset 2, push to another queue and write KV with it.
	res := h.txn(&command.Transaction{Ops: []*command.TxnOp{pushOp(item("audit", "", "a1"))},
		Kv:        []*command.KVOp{marker("pos:1", true)},
		Positions: []*command.PositionOp{{Queue: "q", ConsumerGroup: "g", Partition: "p", Offset: 2, Metadata: []byte(`{"by":"ops"}`)}}})
	eq(t, "success", res.Success, true)
	last := res.Results[len(res.Results)-1]
	eq(t, "position result", last.Type, command.TxnItemResult_POSITION)
	eq(t, "its opIndex", last.OpIndex, uint32(0))
	eqList(t, "g reads from offset 2, its old lease gone", h.txns(h.pop("q", group("g"), onPartition("p"), batch(10))), []string{"m2", "m3", "m4"})
	eqList(t, "the push committed with it", h.txns(h.pop("audit")), []string{"a1"})

	// A queue that does not exist: nothing of the transaction is written.
	before := stateHashWithoutMeta(t, h)
	res = h.txn(&command.Transaction{Ops: []*command.TxnOp{pushOp(item("audit", "", "a2"))},
		Positions: []*command.PositionOp{position("q", "g", "p", 1), position("nope", "g", "", 1)}})
	eq(t, "queue_not_found", res.Reason, command.Reason_QUEUE_NOT_FOUND)
	eq(t, "nothing written", stateHashWithoutMeta(t, h), before)
}

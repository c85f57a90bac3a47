package queue

import (
	"testing"

	"github.com/queen-node/queen-node/command"
)

// Conflation (addendum §8): a group's conflated pop delivers the newest
// message of the partition's backlog; its ack retires the older ones;
// pushes that arrive meanwhile wait for the next pop; queue mode and
// autoAck never conflate.
func TestConflatedPopsDeliverTheNewest(t *testing.T) {
	h := newStamped(t)
	h.push(item("prices", "eur", "p1"), item("prices", "eur", "p2"), item("prices", "eur", "p3"))
	r := h.popq("prices", group("ui"), fromAll(), batch(10), conflate(true))
	eqList(t, "the newest only", h.txnsOf(r), []string{"p3"})
	eq(t, "echoed", r.ConflationEcho && r.Conflation && !r.ConflationConflict, true)
	h.push(item("prices", "eur", "p4")) // arrives while p3 is being processed
	eq(t, "the partition is held meanwhile", len(h.popq("prices", group("ui"), batch(10), conflate(true)).Messages), 0)
	res := h.ackAll(r, command.AckStatus_COMPLETED)
	eq(t, "acked", res[0].Success, true)
	eq(t, "p1 and p2 retired with p3", res[0].Conflated, uint64(2))
	r = h.popq("prices", group("ui"), batch(10), conflate(true))
	eqList(t, "the one pushed meanwhile", h.txnsOf(r), []string{"p4"})
	eq(t, "a single message retires nothing", h.ackAll(r, command.AckStatus_COMPLETED)[0].Conflated, uint64(0))
	eq(t, "drained", len(h.popq("prices", group("ui"), batch(10), conflate(true)).Messages), 0)

	// Another group, without the flag, reads everything; queue mode too.
	eqList(t, "an unconflated group", h.txnsOf(h.popq("prices", group("audit"), fromAll(), batch(10))), []string{"p1", "p2", "p3", "p4"})
	eqList(t, "queue mode", h.txnsOf(h.popq("prices", batch(10))), []string{"p1", "p2", "p3", "p4"})
}

// The queue's stored policy wins over the pop's flag, and the pop is told.
func TestConflationPolicyWinsOverTheFlag(t *testing.T) {
	h := newStamped(t)
	on, off := true, false
	h.configure("ticks", &command.QueueOptions{Conflation: &on})
	h.push(item("ticks", "", "t1"), item("ticks", "", "t2"))
	r := h.popq("ticks", group("a"), fromAll(), batch(10)) // no flag: the policy conflates
	eqList(t, "policy on, no flag", h.txnsOf(r), []string{"t2"})
	eq(t, "echoed without a flag", r.ConflationEcho && r.Conflation && !r.ConflationConflict, true)
	r = h.popq("ticks", group("b"), fromAll(), batch(10), conflate(false))
	eqList(t, "policy on, flag off: conflated", h.txnsOf(r), []string{"t2"})
	eq(t, "conflict", r.ConflationConflict, true)

	h.configure("ticks", &command.QueueOptions{Conflation: &off})
	r = h.popq("ticks", group("c"), fromAll(), batch(10), conflate(true))
	eqList(t, "policy off, flag on: not conflated", h.txnsOf(r), []string{"t1", "t2"})
	eq(t, "conflict the other way", r.ConflationConflict && !r.Conflation, true)
}

// A conflating group dead-letters a poison message after retryLimit (one
// delivery a message), with one row for the last one it failed, then goes
// on.
func TestConflatedPoisonGoesToTheDLQOnce(t *testing.T) {
	h := newStamped(t)
	limit, delay := int64(1), int64(0)
	h.configure("q", &command.QueueOptions{RetryLimit: &limit, RetryDelay: &delay})
	h.push(item("q", "", "a"), item("q", "", "b"))
	r := h.popq("q", group("g"), fromAll(), conflate(true))
	eqList(t, "first delivery", h.txnsOf(r), []string{"b"})
	h.ackAll(r, command.AckStatus_FAILED)
	h.push(item("q", "", "c")) // a newer one arrives before the retry
	r = h.popq("q", group("g"), conflate(true))
	eqList(t, "the retry delivers the newest", h.txnsOf(r), []string{"c"})
	res := h.ackAll(r, command.AckStatus_FAILED)
	eq(t, "retries spent: dead-lettered", res[0].Dlq, true)
	h.read(func(rd *Reader) {
		dl, total := rd.DeadLetters(DLQFilter{Queue: "q", Limit: 10})
		eq(t, "one row", total, 1)
		eq(t, "with the last failed transaction", dl[0].TransactionId, "c")
	})
	h.push(item("q", "", "d"))
	eqList(t, "then it goes on", h.txnsOf(h.popq("q", group("g"), conflate(true))), []string{"d"})
}

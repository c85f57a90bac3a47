package queue

import (
	"fmt"
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

// The policy is the group's (addendum §8, corrected): its first pop stores
// it (the flag, else the queue's option, else off), no later pop flips it,
// and a pop whose flag differs is told, behaving by the stored policy.
func TestConflationIsTheGroupsPolicy(t *testing.T) {
	h := newStamped(t)
	on, off := true, false
	h.push(item("ticks", "", "t1"), item("ticks", "", "t2"))
	r := h.popq("ticks", group("a"), fromAll(), batch(10), conflate(true)) // registers a conflating group
	eqList(t, "registered on", h.txnsOf(r), []string{"t2"})
	eq(t, "echo", r.ConflationEcho && r.Conflation && !r.ConflationConflict, true)
	h.ackAll(r, command.AckStatus_COMPLETED)
	h.push(item("ticks", "", "t3"), item("ticks", "", "t4"))
	r = h.popq("ticks", group("a"), batch(10), conflate(false))
	eqList(t, "a later flag off does not flip it", h.txnsOf(r), []string{"t4"})
	eq(t, "conflict", r.ConflationConflict && r.Conflation, true)
	h.ackAll(r, command.AckStatus_COMPLETED)
	h.push(item("ticks", "", "t5"), item("ticks", "", "t6"))
	r = h.popq("ticks", group("a"), batch(10)) // no flag: the stored policy, echoed, no conflict
	eqList(t, "no flag: stored on", h.txnsOf(r), []string{"t6"})
	eq(t, "echo without a flag", r.ConflationEcho && r.Conflation && !r.ConflationConflict, true)

	r = h.popq("ticks", group("b"), fromAll(), batch(10)) // registers without a flag, no queue option: off
	eqList(t, "registered off", h.txnsOf(r), []string{"t1", "t2", "t3", "t4", "t5", "t6"})
	eq(t, "no echo", r.ConflationEcho, false)
	h.ackAll(r, command.AckStatus_COMPLETED)
	h.push(item("ticks", "", "t7"), item("ticks", "", "t8"))
	r = h.popq("ticks", group("b"), batch(10), conflate(true))
	eqList(t, "a stored-off group asked to conflate delivers the batch", h.txnsOf(r), []string{"t7", "t8"})
	eq(t, "conflict, no conflation:true", r.ConflationConflict && r.ConflationEcho && !r.Conflation, true)

	// The queue's option is the default of a flag-less registration only.
	h.configure("ticks", &command.QueueOptions{Conflation: &on})
	r = h.popq("ticks", group("c"), fromAll(), batch(10))
	eqList(t, "flag-less registration takes the queue's option", h.txnsOf(r), []string{"t8"})
	h.configure("ticks", &command.QueueOptions{Conflation: &off})
	h.ackAll(r, command.AckStatus_COMPLETED)
	h.push(item("ticks", "", "t9"), item("ticks", "", "t10"))
	eqList(t, "a later /configure does not flip a stored policy", h.txnsOf(h.popq("ticks", group("c"), batch(10))), []string{"t10"})
	r = h.popq("ticks", group("d"), fromAll(), batch(10), conflate(true))
	eqList(t, "the flag wins over the option at registration", h.txnsOf(r), []string{"t10"})
}

// An entry written before the group's policy (log format 3) applies the
// old rule, the queue's option winning over the flag, so a replay of it
// does what it did; the first pop of the new rule stores the group's policy.
func TestOldEntriesApplyTheQueuesPolicy(t *testing.T) {
	h := newStamped(t)
	on := true
	h.configure("ticks", &command.QueueOptions{Conflation: &on})
	h.push(item("ticks", "", "t1"), item("ticks", "", "t2"))
	old := func(g string, flag bool) *command.PopResult {
		return h.popUnder(QueuePolicy, &command.Pop{Queue: "ticks", ConsumerGroup: g, Batch: 10, LeaseId: fmt.Sprint("old-", h.index),
			HasConflation: true, Conflation: flag})
	}
	r := old("a", false)
	eqList(t, "old rule: the queue's option wins", h.txnsOf(r), []string{"t2"})
	eq(t, "conflict", r.ConflationConflict, true)
	h.read(func(rd *Reader) {
		eq(t, "no policy stored by an old entry", rd.Group("ticks", "a").Conflation, command.GroupRecord_CONFLATION_UNSET)
	})
	h.ackAll(r, command.AckStatus_COMPLETED)
	h.push(item("ticks", "", "t3"), item("ticks", "", "t4"))
	r = h.popq("ticks", group("a"), batch(10), conflate(false)) // the new rule meets a group without a policy
	eqList(t, "the first new-rule pop registers its flag", h.txnsOf(r), []string{"t3", "t4"})
	h.read(func(rd *Reader) {
		eq(t, "stored", rd.Group("ticks", "a").Conflation, command.GroupRecord_CONFLATION_OFF)
	})
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

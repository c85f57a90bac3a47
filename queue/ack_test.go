package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
)

// deliveries pops one message at a time (advancing past retry delays) and
// fails it, until the message stops coming; it returns how many deliveries
// there were.
func failUntilGone(h *domain, queue string, max int) int {
	n := 0
	for i := 0; i < max; i++ {
		r := h.popq(queue)
		if len(r.Messages) == 0 {
			h.advance(10 * time.Minute) // past any backoff
			r = h.popq(queue)
			if len(r.Messages) == 0 {
				return n
			}
		}
		n++
		e := h.ackOf(r, 0, command.AckStatus_FAILED)
		e.Error, e.HasError = "boom", true
		h.ack(e)
	}
	return n
}

func TestRetryLimitDecidesDeliveriesBeforeTheDLQ(t *testing.T) {
	for _, limit := range []int64{0, 1, 2, 3} {
		t.Run(fmt.Sprint("retryLimit=", limit), func(t *testing.T) {
			h := newStamped(t)
			h.configure("q", &command.QueueOptions{RetryLimit: ptr(limit), RetryDelay: ptr(int64(0))})
			h.push(item("q", "", "a"), item("q", "", "b"))
			eq(t, "deliveries", failUntilGone(h, "q", 20) >= int(limit)+1, true)
			h.read(func(rd *Reader) {
				dl, total := rd.DeadLetters(DLQFilter{Queue: "q", Limit: 10})
				eq(t, "dead letters", total, 2)
				eq(t, "error", dl[0].Error, "boom")
				eq(t, "group", dl[0].ConsumerGroup, command.QueueModeGroup)
				eq(t, "retry count", int64(dl[0].RetryCount), limit)
				eq(t, "payload kept", string(dl[1].Payload), `{"txn":"a"}`)
			})
		})
	}
}

func TestEachMessageGetsRetryLimitPlusOneDeliveries(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{RetryLimit: ptr(int64(1)), RetryDelay: ptr(int64(0))})
	h.push(item("q", "", "a"))
	eq(t, "deliveries of a", failUntilGone(h, "q", 10), 2)
}

func TestFailTwiceThenSucceed(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{RetryLimit: ptr(int64(3)), RetryDelay: ptr(int64(0))})
	h.push(item("q", "", "a"))
	for i := 0; i < 2; i++ {
		r := h.popq("q")
		eq(t, "retryCount", r.Messages[0].RetryCount, uint32(i))
		h.ack(h.ackOf(r, 0, command.AckStatus_FAILED))
	}
	r := h.popq("q")
	res := h.ack(h.ackOf(r, 0, command.AckStatus_COMPLETED))
	eq(t, "success", res[0].Success && !res[0].Dlq, true)
	h.read(func(rd *Reader) {
		_, total := rd.DeadLetters(DLQFilter{Queue: "q", Limit: 10})
		eq(t, "no dead letters", total, 0)
	})
}

func TestABatchNackIsOneRetryAndAllItemsSucceed(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{RetryLimit: ptr(int64(5)), RetryDelay: ptr(int64(0))})
	for i := 0; i < 100; i++ {
		h.push(item("q", "", fmt.Sprint(i)))
	}
	r := h.popq("q", batch(100))
	for _, a := range h.ackAll(r, command.AckStatus_FAILED) {
		eq(t, "item", a.Success, true)
	}
	h.read(func(rd *Reader) {
		c := rd.Cursor(r.Messages[0].PartitionId, command.QueueModeGroup)
		eq(t, "retry count", c.RetryCount, uint32(1))
		eq(t, "cursor", c.Consumed, uint64(0))
		eq(t, "released", c.Lease == nil, true)
	})
}

func TestFailedAckReleasesTheLeaseAndFencesLaterAcks(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{RetryDelay: ptr(int64(1000))})
	for i := 0; i < 3; i++ {
		h.push(item("q", "", fmt.Sprint("m", i)))
	}
	r := h.popq("q", batch(3))
	h.ack(h.ackOf(r, 0, command.AckStatus_COMPLETED))
	res := h.ack(h.ackOf(r, 1, command.AckStatus_FAILED))
	eq(t, "released", res[0].LeaseReleased, true)
	// A later ack with the old lease is refused: its work will be redone.
	res = h.ack(h.ackOf(r, 2, command.AckStatus_COMPLETED))
	eq(t, "later ack refused", res[0].Success, false)
	// The retry delay holds the lane (1 s + up to 25% jitter).
	eq(t, "held by backoff", len(h.popq("q").Messages), 0)
	h.advance(1300 * time.Millisecond)
	next := h.popq("q", batch(5))
	eqList(t, "redelivered from the failed one", h.txnsOf(next), []string{"m1", "m2"})
	eq(t, "retryCount", next.Messages[0].RetryCount, uint32(1))
}

// retryWaits fails the one message of q four times and measures, in 100 ms
// steps of entry time, how long each failure kept it away.
func retryWaits(t *testing.T, h *domain) []time.Duration {
	t.Helper()
	h.push(item("q", "", "a"))
	var waits []time.Duration
	for attempt := 0; attempt < 4; attempt++ {
		r := h.popq("q")
		if len(r.Messages) == 0 {
			t.Fatalf("attempt %d: nothing delivered", attempt)
		}
		h.ack(h.ackOf(r, 0, command.AckStatus_FAILED))
		var w time.Duration
		for len(h.popq("q").Messages) == 0 { // pops while waiting: each is an entry
			h.advance(100 * time.Millisecond)
			w += 100 * time.Millisecond
			if w > time.Minute {
				t.Fatal("never came back")
			}
		}
		h.advance(time.Hour) // let the lease just taken expire
		waits = append(waits, w)
	}
	return waits
}

func TestRetryDelayIsConstantByDefault(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{RetryLimit: ptr(int64(10)), RetryDelay: ptr(int64(1000))})
	for i, w := range retryWaits(t, h) {
		if w < time.Second || w > time.Second*5/4+100*time.Millisecond {
			t.Fatalf("wait %d = %v, want 1s..+25%%", i, w)
		}
	}
}

func TestRetryBackoffIsAnOption(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{RetryLimit: ptr(int64(10)), RetryDelay: ptr(int64(1000)),
		RetryBackoff: ptr(true), RetryDelayMax: ptr(int64(5000))})
	for i, w := range retryWaits(t, h) {
		base := min(time.Second<<i, 5*time.Second)
		if w < base || w > base*5/4+100*time.Millisecond {
			t.Fatalf("wait %d = %v, want %v..+25%%", i, w, base)
		}
	}
}

func TestDLQStatusGoesStraightToTheDLQAndRetryKeepsTheCounter(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "", "a"), item("q", "", "b"))
	r := h.popq("q")
	res := h.ack(h.ackOf(r, 0, command.AckStatus_DLQ))
	eq(t, "dlq", res[0].Dlq, true)
	eq(t, "released", res[0].LeaseReleased, true)
	r = h.popq("q")
	eqList(t, "next", h.txnsOf(r), []string{"b"})
	res = h.ack(h.ackOf(r, 0, command.AckStatus_RETRY))
	eq(t, "retry released", res[0].LeaseReleased, true)
	r = h.popq("q")
	eqList(t, "again at once", h.txnsOf(r), []string{"b"})
	eq(t, "counter untouched", r.Messages[0].RetryCount, uint32(0))
	h.read(func(rd *Reader) {
		dl, total := rd.DeadLetters(DLQFilter{Limit: 10})
		eq(t, "total", total, 1)
		eq(t, "default error", dl[0].Error, "Retries exhausted")
	})
}

func TestAckBatchAcrossPartitionsAndGroups(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "a", "a0"), item("q", "b", "b0"))
	r := h.popq("q", group("g"), fromAll(), batch(10), partitions(2))
	res := h.ackAll(r, command.AckStatus_COMPLETED)
	eq(t, "both released", res[0].LeaseReleased && res[1].LeaseReleased, true)
	// Queue mode still sees both.
	eq(t, "queue mode", len(h.popq("q", batch(10), partitions(2)).Messages), 2)
}

func TestAckWithoutLeaseIDActsUnderTheLiveLease(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "", "a"), item("q", "", "b"))
	r := h.popq("q", batch(2))
	a := h.ackOf(r, 0, command.AckStatus_COMPLETED)
	a.LeaseId = ""
	eq(t, "ok", h.ack(a)[0].Success, true)
	b := h.ackOf(r, 1, command.AckStatus_COMPLETED)
	b.LeaseId = ""
	eq(t, "releases", h.ack(b)[0].LeaseReleased, true)
}

func TestExtendLease(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{LeaseTime: ptr(int64(3))})
	h.push(item("q", "", "a"))
	r := h.popq("q")
	extend := h.extend
	for i := 0; i < 5; i++ { // renew every second for 5 s on a 3 s lease
		h.advance(time.Second)
		eq(t, "renew", extend(r.LeaseId, 3).Success, true)
	}
	eq(t, "ack after renewals", h.ack(h.ackOf(r, 0, command.AckStatus_COMPLETED))[0].Success, true)
	eq(t, "unknown lease", extend("nope", 3).Error, "Lease not found")

	h.push(item("q", "", "b"))
	r = h.popq("q")
	h.advance(4 * time.Second)
	eq(t, "expired lease", extend(r.LeaseId, 3).Error, "Lease already expired")
	eq(t, "ack refused", h.ack(h.ackOf(r, 0, command.AckStatus_COMPLETED))[0].Success, false)
}

// Inside a transaction (addendum §4.5) an ack without its own leaseId
// takes its lease evidence from requiredLeases: three acks complete the
// lease that covers them; a required lease that is not the partition's is
// refused. (fsm's TestTransactionThreeAcksCompletingOneLease: the
// transaction hands its requiredLeases over and answers rejected_ack.)
func TestRequiredLeasesCoverAcksWithoutALeaseID(t *testing.T) {
	h := newStamped(t)
	for _, id := range []string{"m0", "m1", "m2"} {
		h.push(item("q", "", id))
	}
	r := h.popq("q", batch(3))
	var items []*command.AckItem
	for i := range r.Messages {
		a := h.ackOf(r, i, command.AckStatus_COMPLETED)
		a.LeaseId = "" // evidence from requiredLeases instead
		items = append(items, a)
	}
	res := h.txnAcks([]string{r.LeaseId}, items...)
	for _, a := range res {
		eq(t, "success", a.Success, true)
	}
	eq(t, "released", res[2].LeaseReleased, true)
	// Wrong lease in requiredLeases: rejected.
	h.push(item("q", "", "m3"))
	r = h.popq("q")
	a := h.ackOf(r, 0, command.AckStatus_COMPLETED)
	a.LeaseId = ""
	res = h.txnAcks([]string{"other"}, a)
	eq(t, "rejected", res[0].Success, false)
	eq(t, "for its lease", res[0].Error, errInvalidLease)
}

func TestTransactionAckGroupAdvancesOnlyThatGroup(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "", "a"), item("q", "", "b"))
	r := h.popq("q", group("g1"), fromAll(), batch(2))
	for _, a := range h.txnAcks(nil, h.ackOf(r, 0, command.AckStatus_COMPLETED), h.ackOf(r, 1, command.AckStatus_COMPLETED)) {
		eq(t, "acked", a.Success, true)
	}
	h.read(func(rd *Reader) {
		eq(t, "g1's cursor", rd.Cursor(r.Messages[0].PartitionId, "g1").Consumed, uint64(2))
	})
	eq(t, "g2 sees both", len(h.popq("q", group("g2"), fromAll(), batch(2)).Messages), 2)
	eq(t, "g1 drained", len(h.popq("q", group("g1"), batch(2)).Messages), 0)
}

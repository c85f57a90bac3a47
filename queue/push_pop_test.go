package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
)

func TestPushCreatesQueueAndDedupsPerPartition(t *testing.T) {
	h := newStamped(t)
	r := h.push(item("orders", "p1", "t1"), item("orders", "p1", "t1"), item("orders", "p2", "t1"))
	eq(t, "first", r[0].Status, command.PushItemResult_QUEUED)
	// Repeated inside one request: duplicate with the first one's id.
	eq(t, "second", r[1].Status, command.PushItemResult_DUPLICATE)
	eq(t, "dup id", string(r[1].MessageId), string(r[0].MessageId))
	// Another partition: a new message.
	eq(t, "other partition", r[2].Status, command.PushItemResult_QUEUED)
	// A later entry: still a duplicate, with the original id.
	again := h.push(item("orders", "p1", "t1"))
	eq(t, "later dup", again[0].Status, command.PushItemResult_DUPLICATE)
	eq(t, "later dup id", string(again[0].MessageId), string(r[0].MessageId))
	h.read(func(rd *Reader) {
		q := rd.Queue("orders")
		if q == nil {
			t.Fatal("queue not created")
		}
		eq(t, "namespace", q.Namespace, "orders")
		eq(t, "partitions", len(rd.Partitions("orders")), 2)
	})
}

func TestImplicitQueueNamespaceAndTask(t *testing.T) {
	h := newStamped(t)
	h.push(item("billing.invoice.v2", "", "a"))
	h.read(func(rd *Reader) {
		q := rd.Queue("billing.invoice.v2")
		eq(t, "namespace", q.Namespace, "billing")
		eq(t, "task", q.Task, "invoice.v2")
	})
}

func TestPopFIFOAndLeaseIsExclusivePerPartitionAndGroup(t *testing.T) {
	h := newStamped(t)
	for i := 0; i < 5; i++ {
		h.push(item("q", "", fmt.Sprint("m", i)))
	}
	a := h.popq("q", batch(2))
	eqList(t, "first pop", h.txnsOf(a), []string{"m0", "m1"})
	// The partition is leased: another consumer of the same group gets nothing.
	b := h.popq("q", batch(2))
	eq(t, "held lease", len(b.Messages), 0)
	// Another group is independent (fan-out).
	g := h.popq("q", group("other"), fromAll(), batch(10))
	eqList(t, "other group", h.txnsOf(g), []string{"m0", "m1", "m2", "m3", "m4"})
	// Acking the whole delivered run releases the lease; delivery continues in order.
	res := h.ackAll(a, command.AckStatus_COMPLETED)
	eq(t, "second ack releases", res[1].LeaseReleased, true)
	c := h.popq("q", batch(10))
	eqList(t, "after ack", h.txnsOf(c), []string{"m2", "m3", "m4"})
}

func TestBatchIsAGlobalCapAcrossPartitions(t *testing.T) {
	h := newStamped(t)
	for p := 0; p < 5; p++ {
		for i := 0; i < 100; i++ {
			h.push(item("q", fmt.Sprint("p", p), fmt.Sprint(p, "-", i)))
		}
	}
	r := h.popq("q", batch(10), partitions(5))
	eq(t, "messages", len(r.Messages), 10)
	// Without partitions: one partition only.
	h2 := newStamped(t)
	for p := 0; p < 4; p++ {
		for i := 0; i < 5; i++ {
			h2.push(item("q", fmt.Sprint("p", p), fmt.Sprint(p, "-", i)))
		}
	}
	r2 := h2.popq("q", batch(100))
	eq(t, "single partition", len(r2.Messages), 5)
}

func TestMultiPartitionPopSharesOneLeaseAndReleasesPerPartition(t *testing.T) {
	h := newStamped(t)
	for p := 0; p < 3; p++ {
		for i := 0; i < 2; i++ {
			h.push(item("q", fmt.Sprint("p", p), fmt.Sprint(p, "-", i)))
		}
	}
	r := h.popq("q", batch(100), partitions(3))
	eq(t, "messages", len(r.Messages), 6)
	eq(t, "partitions claimed", r.PartitionsClaimed, uint32(3))
	pids := map[string]bool{}
	for _, m := range r.Messages {
		pids[string(m.PartitionId)] = true
	}
	eq(t, "distinct partitions", len(pids), 3)
	// One extend extends every partition it holds.
	ext := h.extend(r.LeaseId, 600)
	eq(t, "extend", ext.Success, true)
	released := 0
	for _, a := range h.ackAll(r, command.AckStatus_COMPLETED) {
		eq(t, "ack", a.Success, true)
		if a.LeaseReleased {
			released++
		}
	}
	eq(t, "each partition released its own lease", released, 3)
}

func TestLeaseExpiryRedeliversWithoutSpendingARetry(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{LeaseTime: ptr(int64(1))})
	h.push(item("q", "", "a"))
	first := h.popq("q")
	eq(t, "first", len(first.Messages), 1)
	h.advance(2 * time.Second)
	second := h.popq("q")
	eqList(t, "redelivered", h.txnsOf(second), []string{"a"})
	eq(t, "retryCount", second.Messages[0].RetryCount, uint32(0))
	// The old lease is fenced off.
	res := h.ack(h.ackOf(first, 0, command.AckStatus_COMPLETED))
	eq(t, "stale ack", res[0].Success, false)
	eq(t, "stale ack error", res[0].Error, "Invalid or expired lease")
	res = h.ack(h.ackOf(second, 0, command.AckStatus_COMPLETED))
	eq(t, "live ack", res[0].Success, true)
	// A retried ack of an acked message is a success (lost reply).
	res = h.ack(h.ackOf(second, 0, command.AckStatus_COMPLETED))
	eq(t, "retried ack", res[0].Success, true)
	eq(t, "retried ack noop", res[0].Noop, true)
}

func TestAckOfUnknownMessage(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "", "a"))
	res := h.ack(&command.AckItem{TransactionId: "nope", PartitionId: []byte("no-such-partitio"), Status: command.AckStatus_COMPLETED})
	eq(t, "unknown partition", res[0].Error, "Message not found")
	r := h.popq("q")
	res = h.ack(&command.AckItem{TransactionId: "nope", PartitionId: r.Messages[0].PartitionId, Status: command.AckStatus_COMPLETED})
	eq(t, "unknown txn", res[0].Error, "Message not found")
}

func TestOutOfOrderAcksAdvanceTheContiguousPrefixOnly(t *testing.T) {
	h := newStamped(t)
	for i := 0; i < 3; i++ {
		h.push(item("q", "", fmt.Sprint("m", i)))
	}
	r := h.popq("q", batch(3))
	res := h.ack(h.ackOf(r, 2, command.AckStatus_COMPLETED))
	eq(t, "ack m2", res[0].Success, true)
	eq(t, "not released", res[0].LeaseReleased, false)
	h.read(func(rd *Reader) {
		eq(t, "cursor", rd.Cursor(r.Messages[0].PartitionId, command.QueueModeGroup).Consumed, uint64(0))
	})
	h.ack(h.ackOf(r, 0, command.AckStatus_COMPLETED))
	h.read(func(rd *Reader) {
		eq(t, "cursor", rd.Cursor(r.Messages[0].PartitionId, command.QueueModeGroup).Consumed, uint64(1))
	})
	res = h.ack(h.ackOf(r, 1, command.AckStatus_COMPLETED))
	eq(t, "gap closed releases", res[0].LeaseReleased, true)
	h.read(func(rd *Reader) {
		eq(t, "cursor", rd.Cursor(r.Messages[0].PartitionId, command.QueueModeGroup).Consumed, uint64(3))
	})
}

func TestAutoAckMovesTheCursorAtDelivery(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "", "a"), item("q", "", "b"))
	r := h.popq("q", batch(1), autoAck())
	eq(t, "lease id", r.LeaseId, "")
	r2 := h.popq("q", batch(5), autoAck())
	eqList(t, "next", h.txnsOf(r2), []string{"b"})
	eq(t, "empty", len(h.popq("q").Messages), 0)
}

func TestSubscriptionModes(t *testing.T) {
	h := newStamped(t)
	for i := 0; i < 5; i++ {
		h.push(item("q", "", fmt.Sprint("old", i)))
	}
	// "new": only what is pushed after the first contact, even if that pop was empty.
	eq(t, "new first", len(h.popq("q", group("g-new"), fromNew(), batch(10)).Messages), 0)
	h.advance(time.Millisecond)
	for i := 0; i < 3; i++ {
		h.push(item("q", "", fmt.Sprint("new", i)))
	}
	eqList(t, "new", h.txnsOf(h.popq("q", group("g-new"), fromNew(), batch(10))), []string{"new0", "new1", "new2"})
	// "all": history first.
	all := h.popq("q", group("g-all"), fromAll(), batch(5))
	eqList(t, "all", h.txnsOf(all), []string{"old0", "old1", "old2", "old3", "old4"})
	// Once recorded, a later request's mode is ignored.
	h.ackAll(all, command.AckStatus_COMPLETED)
	eqList(t, "all continues", h.txnsOf(h.popq("q", group("g-all"), fromNew(), batch(10))), []string{"new0", "new1", "new2"})
	// A new partition created later is covered by the "new" record from its start.
	h.push(item("q", "later", "late0"))
	eqList(t, "later partition", h.txnsOf(h.popq("q", group("g-new"), onPartition("later"), batch(10))), []string{"late0"})
	// Queue mode always starts at the beginning.
	eq(t, "queue mode", len(h.popq("q", fromNew(), batch(100)).Messages), 8)
}

func TestSubscriptionFromTimestamp(t *testing.T) {
	h := newStamped(t)
	h.push(item("q", "", "a"))
	h.advance(time.Second)
	mark := h.now
	h.advance(time.Second)
	h.push(item("q", "", "b"), item("q", "", "c"))
	eqList(t, "from ts", h.txnsOf(h.popq("q", group("g"), fromTime(mark), batch(10))), []string{"b", "c"})
}

func TestDelayedProcessingHoldsTheLane(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{DelayedProcessing: ptr(int64(2))})
	h.push(item("q", "", "a"))
	h.advance(time.Second)
	h.push(item("q", "", "b"))
	eq(t, "too early", len(h.popq("q", batch(10)).Messages), 0)
	h.read(func(rd *Reader) {
		ready := rd.PopReadiness(&command.Pop{Queue: "q"}, h.now, 1)
		eq(t, "ready", ready.Ready, false)
		// a was created at the entry's effective time, a µs or so after its stamp.
		if due := h.now + time.Second.Microseconds(); ready.NextUs < due || ready.NextUs > due+10 {
			t.Fatalf("wakes at %d, want about %d", ready.NextUs, due)
		}
	})
	h.advance(1500 * time.Millisecond)
	eqList(t, "a only", h.txnsOf(h.popq("q", batch(10))), []string{"a"})
}

func TestWindowBufferHoldsThePartitionUntilItsNewestMessageIsOldEnough(t *testing.T) {
	h := newStamped(t)
	h.configure("q", &command.QueueOptions{WindowBuffer: ptr(int64(2))})
	for i := 0; i < 3; i++ {
		h.push(item("q", "", fmt.Sprint("m", i)))
		h.advance(100 * time.Millisecond)
	}
	eq(t, "inside window", len(h.popq("q", batch(4)).Messages), 0)
	h.advance(2500 * time.Millisecond)
	eq(t, "all at once", len(h.popq("q", batch(4)).Messages), 3)
}

func TestPopOfMissingQueueOrPartitionIsEmptyAndCreatesNothing(t *testing.T) {
	h := newStamped(t)
	before := h.stateHash()
	eq(t, "missing queue", len(h.popq("nope", group("g")).Messages), 0)
	eq(t, "state unchanged", h.stateHash(), before)
	h.push(item("q", "", "a"))
	eq(t, "missing partition", len(h.popq("q", onPartition("zzz")).Messages), 0)
}

func TestWildcardPopRotatesAcrossPartitions(t *testing.T) {
	h := newStamped(t)
	for p := 0; p < 3; p++ {
		for i := 0; i < 10; i++ {
			h.push(item("q", fmt.Sprint("p", p), fmt.Sprint(p, "-", i)))
		}
	}
	seen := map[string]int{}
	for i := 0; i < 6; i++ {
		r := h.popq("q")
		seen[r.Messages[0].Partition]++
		h.ackAll(r, command.AckStatus_COMPLETED)
	}
	for p := 0; p < 3; p++ {
		eq(t, fmt.Sprint("pops from p", p), seen[fmt.Sprint("p", p)], 2)
	}
}

func TestNamespacePopTakesFromMatchingQueuesByPriority(t *testing.T) {
	h := newStamped(t)
	h.apply(true, func(tx *Tx) {
		tx.Configure(&command.Configure{Queue: "low", Namespace: "ns", HasNamespace: true, Options: &command.QueueOptions{Priority: ptr(int64(1))}})
	})
	h.apply(true, func(tx *Tx) {
		tx.Configure(&command.Configure{Queue: "high", Namespace: "ns", HasNamespace: true, Options: &command.QueueOptions{Priority: ptr(int64(9))}})
	})
	h.push(item("low", "", "l"), item("high", "", "h"))
	r := h.pop(&command.Pop{Namespace: "ns", Batch: 1, LeaseId: "L"})
	eq(t, "queue", r.Messages[0].Queue, "high")
}

func TestPopStopsAtTheByteBudgetButAlwaysDeliversOne(t *testing.T) {
	h := newStamped(t)
	big := make([]byte, MaxPopBytes/3)
	for i := range big {
		big[i] = 'x'
	}
	big[0], big[len(big)-1] = '"', '"'
	for i := 0; i < 5; i++ {
		it := item("q", "", fmt.Sprint("b", i))
		it.Payload = big
		h.push(it)
	}
	r := h.popq("q", batch(100))
	eq(t, "messages under 16 MiB", len(r.Messages), 2)
	h.ackAll(r, command.AckStatus_COMPLETED)
	huge := item("q2", "", "huge")
	huge.Payload = make([]byte, MaxPopBytes+10)
	for i := range huge.Payload {
		huge.Payload[i] = '1'
	}
	h.push(huge)
	eq(t, "an oversized message still goes alone", len(h.popq("q2", batch(100)).Messages), 1)
}

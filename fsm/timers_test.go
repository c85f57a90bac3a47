package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/timers"
)

func schedule(queue, key, txn string, delay time.Duration) *command.TimerOp {
	return &command.TimerOp{Kind: command.TimerOp_SCHEDULE, Queue: queue, TimerKey: key, Txn: txn,
		DelayUs: delay.Microseconds(), Payload: []byte(fmt.Sprintf(`{"timer":%q}`, key)), MessageId: newMsgID()}
}

func cancel(queue, key string) *command.TimerOp {
	return &command.TimerOp{Kind: command.TimerOp_CANCEL, Queue: queue, TimerKey: key}
}

func (h *harness) timers(ops ...*command.TimerOp) *command.TimerBatchResult {
	h.t.Helper()
	return h.apply(&command.Command{Body: &command.Command_Timers{Timers: &command.TimerBatch{Ops: ops}}}).(*command.TimerBatchResult)
}

func (h *harness) fire() *command.FireResult {
	h.t.Helper()
	return h.apply(&command.Command{Body: &command.Command_FireTimers{FireTimers: &command.FireTimers{}}}).(*command.FireResult)
}

func TestTimerScheduleRescheduleCancel(t *testing.T) {
	h := newHarness(t)
	r := h.timers(schedule("q", "k1", "t1", time.Minute), cancel("q", "nope"))
	eq(t, "scheduled", r.Results[0].Status, command.TimerResult_SCHEDULED)
	if d := r.Results[0].DeliverAtUs - h.now - time.Minute.Microseconds(); d < 0 || d > 10 {
		t.Fatalf("deliver at is off by %dµs", d)
	}
	eq(t, "absent", r.Results[1].Status, command.TimerResult_ABSENT)
	eq(t, "absent ok", r.Results[1].Ok, false)
	r = h.timers(schedule("q", "k1", "t2", 2*time.Minute))
	eq(t, "rescheduled", r.Results[0].Status, command.TimerResult_RESCHEDULED)
	h.read(func(rd *Reader) {
		tm := rd.Timer("q", "k1")
		eq(t, "replaced txn", tm.Txn, "t2")
		eq(t, "one due entry", rd.NextTimerDue(), tm.DeliverAtUs)
	})
	r = h.timers(cancel("q", "k1"))
	eq(t, "cancelled", r.Results[0].Status, command.TimerResult_CANCELLED)
	eq(t, "stored txn", r.Results[0].Txn, "t2")
	h.read(func(rd *Reader) { eq(t, "gone", rd.Timer("q", "k1") == nil && rd.NextTimerDue() == 0, true) })
}

func TestTimerFiresOnceNeverEarlyEarliestFirst(t *testing.T) {
	h := newHarness(t)
	h.timers(schedule("q", "late", "tl", 2*time.Second), schedule("q", "early", "te", time.Second))
	eq(t, "nothing before due", h.fire().Fired, uint32(0))
	h.advance(1500 * time.Millisecond)
	f := h.fire()
	eq(t, "one due", f.Fired, uint32(1))
	h.advance(time.Second)
	eq(t, "second", h.fire().Fired, uint32(1))
	eq(t, "never twice", h.fire().Fired, uint32(0))
	eqList(t, "order", h.txns(h.pop("q", batch(10))), []string{"te", "tl"})
	h.read(func(rd *Reader) { eq(t, "timers gone", rd.NextTimerDue(), int64(0)) })
}

func TestTimersDueTogetherEnterInDueOrderAndDedupByTxn(t *testing.T) {
	h := newHarness(t)
	h.timers(schedule("q", "b", "same", 2*time.Second), schedule("q", "a", "x", 3*time.Second), schedule("q", "c", "same", time.Second))
	h.advance(5 * time.Second)
	f := h.fire()
	eq(t, "all three delivered (one absorbed by dedup)", f.Fired, uint32(3))
	eqList(t, "due order, txn once", h.txns(h.pop("q", batch(10))), []string{"same", "x"})
}

func TestTimerFireRespectsLimitsAndSwitch(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 5; i++ {
		h.timers(schedule("q", fmt.Sprint("k", i), fmt.Sprint("t", i), 0))
	}
	off := false
	h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{TimersFireEnabled: &off}}})
	h.advance(time.Second)
	eq(t, "fire off", h.fire().Fired, uint32(0))
	on := true
	h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{TimersFireEnabled: &on}}})
	f := h.apply(&command.Command{Body: &command.Command_FireTimers{FireTimers: &command.FireTimers{Limit: 3}}}).(*command.FireResult)
	eq(t, "limit", f.Fired, uint32(3))
	eq(t, "more", f.More, true)
	eq(t, "rest", h.fire().Fired, uint32(2))
	// Scheduling off refuses schedules whole; cancels still go.
	h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{TimersScheduleEnabled: &off}}})
	eq(t, "schedule refused", h.timers(schedule("q", "z", "z", 0)).Reason, command.Reason_TIMERS_DISABLED)
	eq(t, "cancel allowed", h.timers(cancel("q", "z")).Results[0].Status, command.TimerResult_ABSENT)
}

func TestRefusedFireBacksOffThenDeadLetters(t *testing.T) {
	h := newHarness(t)
	h.configure("full", &command.QueueOptions{MaxSize: ptr(int64(1))})
	h.push(item("full", "", "occupant"))
	h.timers(schedule("full", "k", "tk", 0))
	var waits []time.Duration
	for attempt := 1; attempt <= timers.MaxAttempts; attempt++ {
		var w time.Duration
		for {
			f := h.fire()
			if f.Deferred+f.Dead > 0 {
				break
			}
			h.advance(100 * time.Millisecond)
			w += 100 * time.Millisecond
			if w > 2*time.Minute {
				t.Fatal("never retried")
			}
		}
		waits = append(waits, w)
	}
	// Backoff 1 s, 2 s, 4 s, 8 s between the five attempts.
	for i, want := range []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		if waits[i] < want || waits[i] > want+200*time.Millisecond {
			t.Fatalf("wait before attempt %d = %v, want %v", i+1, waits[i], want)
		}
	}
	h.read(func(rd *Reader) {
		eq(t, "timer gone", rd.Timer("full", "k") == nil, true)
		dl, total, _ := rd.DeadLetters(DLQFilter{Queue: "full", Limit: 10})
		eq(t, "dead letter", total, 1)
		eq(t, "group", dl[0].ConsumerGroup, command.TimerDLQGroup)
		eq(t, "payload", string(dl[0].Payload), `{"timer":"k"}`)
		eq(t, "attempts", dl[0].RetryCount, uint32(timers.MaxAttempts))
	})
}

func TestTimersInATransactionShareItsFate(t *testing.T) {
	h := newHarness(t)
	// A refused transaction schedules nothing and cancels nothing.
	h.timers(schedule("q", "keep", "k", time.Hour))
	res := h.txn(&command.Transaction{
		Ops:    []*command.TxnOp{ackOp(&command.AckItem{TransactionId: "x", PartitionId: newMsgID(), Status: command.AckStatus_COMPLETED})},
		Timers: []*command.TimerOp{schedule("q", "new", "n", 0), cancel("q", "keep")},
	})
	eq(t, "refused", res.Success, false)
	h.read(func(rd *Reader) {
		eq(t, "not scheduled", rd.Timer("q", "new") == nil, true)
		eq(t, "not cancelled", rd.Timer("q", "keep") != nil, true)
	})
	res = h.txn(&command.Transaction{Kv: []*command.KVOp{marker("m", true)}, Timers: []*command.TimerOp{schedule("q", "new", "n", 0)}})
	eq(t, "committed", res.Success, true)
	eq(t, "timer result after kv", res.Results[1].Type, command.TxnItemResult_TIMER)
}

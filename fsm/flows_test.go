package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/queen-node/queen-node/command"
)

// The per-minute counts: each entry counts in the minute of its own time,
// a refused command counts nothing, and a second FSM that applies the same
// entries holds the same counts (what makes every replica's dashboard
// agree).
func TestFlowsCountByEntryTime(t *testing.T) {
	h := newHarness(t)
	h.configure("f.q", &command.QueueOptions{RetryLimit: ptr(int64(1)), RetryDelay: ptr(int64(0))})
	t0 := h.now
	h.push(item("f.q", "", "a"), item("f.q", "", "b"), item("f.q", "", "c"))
	h.push(item("f.q", "", "a")) // a duplicate stores nothing
	h.advance(90 * time.Second)  // the next minute
	pr := h.pop("f.q", batch(2))
	eq(t, "popped", len(pr.Messages), 2)
	h.ackAll(pr, command.AckStatus_COMPLETED)
	pr = h.pop("f.q")
	h.ack(h.ackOf(pr, 0, command.AckStatus_FAILED)) // retry 1 spent
	h.advance(2 * time.Second)
	pr = h.pop("f.q")
	h.ack(h.ackOf(pr, 0, command.AckStatus_FAILED)) // retries exhausted: the DLQ
	h.pop("other", autoAck())                       // nothing: no counts

	series := func(f *FSM, bucket time.Duration) FlowSeries {
		var s FlowSeries
		if err := f.Read(func(r *Reader) error {
			s = r.Flows(FlowQuery{FromUs: t0 - 3600e6, ToUs: h.now + 3600e6, BucketUs: bucket.Microseconds()})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := series(h.f, time.Minute)
	eq(t, "since", s.SinceUs, 0)
	eq(t, "buckets", len(s.Buckets), 2)
	first, second := s.Buckets[0], s.Buckets[1]
	eq(t, "first minute", first.StartUs, t0-t0%60e6)
	eq(t, "pushed", first.Pushed, uint64(3))
	eq(t, "first minute popped", first.Popped, uint64(0))
	eq(t, "popped", second.Popped, uint64(4))
	eq(t, "pops", second.Pops, uint64(3))
	eq(t, "consumed", second.Consumed, uint64(2))
	eq(t, "failed", second.Failed, uint64(2))
	eq(t, "dead-lettered", second.DeadLettered, uint64(1))
	if second.LagMaxUs < 90e6 {
		t.Errorf("max lag %d µs, want at least the 90 s the messages waited", second.LagMaxUs)
	}
	hour := series(h.f, time.Hour)
	eq(t, "one hour bucket", len(hour.Buckets), 1)
	eq(t, "hour pushed", hour.Buckets[0].Pushed, uint64(3))
	eq(t, "hour consumed", hour.Buckets[0].Consumed, uint64(2))

	// Another replica applying the same log counts the same.
	f2, _ := freshFSM(t)
	for _, l := range h.log {
		f2.Apply(l)
	}
	s2 := series(f2, time.Minute)
	if len(s2.Buckets) != len(s.Buckets) {
		t.Fatalf("replica: %d buckets, want %d", len(s2.Buckets), len(s.Buckets))
	}
	for i := range s.Buckets {
		if s.Buckets[i] != s2.Buckets[i] {
			t.Errorf("replica bucket %d: %+v, want %+v", i, s2.Buckets[i], s.Buckets[i])
		}
	}
}

// The counts are bounded: past MaxFlowMinutes queue-minutes the oldest
// minutes go.
func TestFlowsAreBounded(t *testing.T) {
	fl := newFlows(0)
	for minute := range int64(3) {
		for q := range MaxFlowMinutes / 2 {
			fl.staged = append(fl.staged, stagedFlow{minute: minute * minuteUs, key: flowKey{queue: fmt.Sprint("q", q)}, c: FlowCounts{Pushed: 1}})
		}
		fl.publish()
	}
	if fl.entries > MaxFlowMinutes {
		t.Fatalf("%d queue-minutes kept", fl.entries)
	}
	s := fl.Series(FlowQuery{FromUs: 0, ToUs: 3 * minuteUs, BucketUs: minuteUs})
	if len(s.Buckets) != fl.entries || s.Buckets[0].StartUs != minuteUs {
		t.Fatalf("%d buckets from %d; %d entries", len(s.Buckets), s.Buckets[0].StartUs, fl.entries)
	}
}

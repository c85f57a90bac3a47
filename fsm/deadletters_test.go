package fsm

import (
	"bytes"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Dead letters stored before the message index existed (a state whose
// dlq_msg bucket lacks them) are found by the message views and the retry
// route once the leader's IndexDeadLetters steps ran: each step resumes
// where the state says the last stopped, the last marks the index
// complete, and the state is then the one the index was written with.
func TestIndexDeadLettersBackfillsTheMessageIndex(t *testing.T) {
	h := newHarness(t)
	var pids [][]byte
	for _, txn := range []string{"d1", "d2", "d3"} {
		pids = append(pids, h.push(item("q", txn, txn))[0].PartitionId)
	}
	for range 3 {
		pr := h.pop("q", batch(1))
		h.ack(h.ackOf(pr, 0, command.AckStatus_DLQ))
	}
	h.read(func(rd *Reader) {
		if rd.IndexDue() || !rd.Meta().DeadLettersIndexed {
			t.Fatal("dead letters filed by this code need no backfill: the first one records the index complete")
		}
	})
	indexed := stateHashOf(t, h.f, Buckets[1:]) // every bucket but the meta record
	dlqMsg := store.Bucket("dlq_msg")
	if err := h.db.Update(func(b *store.Batch) error { // as a state of the code before the index wrote it
		tx := b.Begin()
		var keys [][]byte
		c := b.Reader().Cursor(dlqMsg)
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		if len(keys) != 3 {
			t.Fatalf("%d index entries, want 3", len(keys))
		}
		for _, k := range keys {
			tx.Delete(dlqMsg, k)
		}
		tx.Commit()
		h.f.meta.DeadLettersIndexed = false // nor had that code the flag
		return b.Put(bMeta, metaKey, command.MustEncodeRecord(h.f.meta))
	}); err != nil {
		t.Fatal(err)
	}
	found := func() (n int) {
		h.read(func(rd *Reader) {
			for i, pid := range pids {
				if rd.Reader.DeadLetterOf(pid, []string{"d1", "d2", "d3"}[i], "") != nil {
					n++
				}
			}
		})
		return n
	}
	var due bool
	h.read(func(rd *Reader) { due = rd.IndexDue() })
	if n := found(); n != 0 || !due {
		t.Fatalf("before the backfill: %d dead letters found by message, due %t; want 0 and due", n, due)
	}
	step := func() *command.IndexDeadLettersResult {
		return h.apply(&command.Command{Body: &command.Command_IndexDeadLetters{IndexDeadLetters: &command.IndexDeadLetters{Limit: 2}}}).(*command.IndexDeadLettersResult)
	}
	if r := step(); r.Indexed != 2 || !r.More {
		t.Fatalf("first step: %+v, want 2 indexed and more", r)
	}
	if n := found(); n != 2 {
		t.Fatalf("after one step: %d found, want 2", n)
	}
	if r := step(); r.Indexed != 1 || r.More {
		t.Fatalf("second step: %+v, want 1 indexed and no more", r)
	}
	h.read(func(rd *Reader) { due = rd.IndexDue() })
	if n := found(); n != 3 || due {
		t.Fatalf("after the backfill: %d found, due %t; want 3, not due", n, due)
	}
	if r := step(); r.Indexed != 0 || r.More {
		t.Fatalf("a step after the index is complete: %+v", r)
	}
	eq(t, "the state as the index wrote it", stateHashOf(t, h.f, Buckets[1:]), indexed)
	h.read(func(rd *Reader) {
		d, err := rd.MessageDetail(pids[0], "d1", h.now)
		if err != nil || d == nil || len(d.DeadLetters) != 1 {
			t.Fatalf("detail of d1: %+v %v", d, err)
		}
	})
}

package fsm

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm/fsmpb"
)

func withKey(cmd *fsmpb.Command, key, hash string, ttl int64) *fsmpb.Command {
	cmd.Idempotency = &fsmpb.Idempotency{Key: key, RequestHash: []byte(hash), TtlSeconds: ttl}
	return cmd
}

func TestIdempotencyKeyAnswersARetryFromTheStore(t *testing.T) {
	h := newHarness(t)
	push := func() proto.Message {
		return h.apply(withKey(&fsmpb.Command{Body: &fsmpb.Command_Push{Push: &fsmpb.Push{Items: []*fsmpb.PushItem{item("q", "", "")}}}}, "k1", "h1", 60))
	}
	first := push().(*fsmpb.PushResult)
	eq(t, "first", first.Items[0].Status, fsmpb.PushItemResult_QUEUED)
	// A retry (even with a new server-minted message id and an empty
	// transactionId, which would not dedup) is answered from the store.
	replay, ok := push().(*fsmpb.Replay)
	if !ok {
		t.Fatal("retry was applied again")
	}
	eq(t, "hash kept", string(replay.Outcome.RequestHash), "h1")
	stored := &fsmpb.Response{}
	mustUnmarshal(replay.Outcome.Result, stored)
	eq(t, "stored result", string(Unwrap(stored).(*fsmpb.PushResult).Items[0].MessageId), string(first.Items[0].MessageId))
	eq(t, "one message", len(h.pop("q", batch(10)).Messages), 1)
	// After the TTL the key is free again.
	h.advance(61 * time.Second)
	if _, replayed := push().(*fsmpb.Replay); replayed {
		t.Fatal("expired key replayed")
	}
	// The sweep collects expired records.
	h.advance(61 * time.Second)
	res := h.apply(&fsmpb.Command{Body: &fsmpb.Command_Sweep{Sweep: &fsmpb.Sweep{}}}).(*fsmpb.SweepResult)
	eq(t, "swept", res.Idempotency, uint32(1))
}

func TestIdempotencyStoresRefusedTransactionsToo(t *testing.T) {
	h := newHarness(t)
	ack := &fsmpb.AckItem{TransactionId: "x", PartitionId: newMsgID(), Status: StatusCompleted}
	txn := func() proto.Message {
		return h.apply(withKey(&fsmpb.Command{Body: &fsmpb.Command_Transaction{Transaction: &fsmpb.Transaction{
			Ops: []*fsmpb.TxnOp{ackOp(ack), pushOp(item("b", "", "b1"))}}}}, "t1", "h", 60))
	}
	eq(t, "refused", txn().(*fsmpb.TxnResult).Success, false)
	if _, ok := txn().(*fsmpb.Replay); !ok {
		t.Fatal("a definitive refusal was not stored")
	}
	eq(t, "nothing pushed", len(h.pop("b").Messages), 0)
}

func TestIdempotencyRecordStoresALiteralAnswer(t *testing.T) {
	h := newHarness(t)
	rec := func() proto.Message {
		return h.apply(withKey(&fsmpb.Command{Body: &fsmpb.Command_IdempotencyRecord{IdempotencyRecord: &fsmpb.IdempotencyRecord{
			Status: 400, Body: []byte(`{"error":"bad"}`)}}}, "r1", "h", 60))
	}
	rec()
	r, ok := rec().(*fsmpb.Replay)
	if !ok || r.Outcome.Status != 400 || string(r.Outcome.Body) != `{"error":"bad"}` {
		t.Fatalf("literal answer: %v", r)
	}
}

func TestKVSwitchRefusesKVWrites(t *testing.T) {
	h := newHarness(t)
	off := false
	h.apply(&fsmpb.Command{Body: &fsmpb.Command_SetSwitches{SetSwitches: &fsmpb.SetSwitches{KvEnabled: &off}}})
	res := h.apply(&fsmpb.Command{Body: &fsmpb.Command_Kv{Kv: &fsmpb.KVBatch{Ops: []*fsmpb.KVOp{marker("m", false)}}}}).(*fsmpb.KVBatchResult)
	eq(t, "kv refused", res.Reason, ReasonKVDisabled)
	tr := h.txn(&fsmpb.Transaction{Kv: []*fsmpb.KVOp{marker("m", false)}})
	eq(t, "txn refused", tr.Reason, ReasonKVDisabled)
	h.read(func(rd *Reader) { eq(t, "switch", rd.Switches().KvEnabled, false) })
}

package fsm

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
)

func withKey(cmd *command.Command, key, hash string, ttl int64) *command.Command {
	cmd.Idempotency = &command.Idempotency{Key: key, RequestHash: []byte(hash), TtlSeconds: ttl}
	return cmd
}

func TestIdempotencyKeyAnswersARetryFromTheStore(t *testing.T) {
	h := newHarness(t)
	push := func() proto.Message {
		return h.apply(withKey(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{item("q", "", "")}}}}, "k1", "h1", 60))
	}
	first := push().(*command.PushResult)
	eq(t, "first", first.Items[0].Status, command.PushItemResult_QUEUED)
	// A retry (even with a new server-minted message id and an empty
	// transactionId, which would not dedup) is answered from the store.
	replay, ok := push().(*command.Replay)
	if !ok {
		t.Fatal("retry was applied again")
	}
	stored, replayed, err := idempotency.Outcome(&command.Idempotency{Key: "k1", RequestHash: []byte("h1")}, replay)
	if err != nil || !replayed {
		t.Fatalf("outcome of the replay: %v, replayed %v", err, replayed)
	}
	eq(t, "stored result", string(stored.(*command.PushResult).Items[0].MessageId), string(first.Items[0].MessageId))
	if _, _, err := idempotency.Outcome(&command.Idempotency{Key: "k1", RequestHash: []byte("other")}, replay); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("the key with another request: %v", err)
	}
	eq(t, "one message", len(h.pop("q", batch(10)).Messages), 1)
	// After the TTL the key is free again.
	h.advance(61 * time.Second)
	if _, replayed := push().(*command.Replay); replayed {
		t.Fatal("expired key replayed")
	}
	// The sweep collects expired records.
	h.advance(61 * time.Second)
	res := h.apply(&command.Command{Body: &command.Command_Sweep{Sweep: &command.Sweep{}}}).(*command.SweepResult)
	eq(t, "swept", res.Idempotency, uint32(1))
}

func TestIdempotencyStoresRefusedTransactionsToo(t *testing.T) {
	h := newHarness(t)
	ack := &command.AckItem{TransactionId: "x", PartitionId: newMsgID(), Status: command.AckStatus_COMPLETED}
	txn := func() proto.Message {
		return h.apply(withKey(&command.Command{Body: &command.Command_Transaction{Transaction: &command.Transaction{
			Ops: []*command.TxnOp{ackOp(ack), pushOp(item("b", "", "b1"))}}}}, "t1", "h", 60))
	}
	eq(t, "refused", txn().(*command.TxnResult).Success, false)
	if _, ok := txn().(*command.Replay); !ok {
		t.Fatal("a definitive refusal was not stored")
	}
	eq(t, "nothing pushed", len(h.pop("b").Messages), 0)
}

func TestIdempotencyRecordStoresARefusal(t *testing.T) {
	h := newHarness(t)
	idem := &command.Idempotency{Key: "r1", RequestHash: []byte("h"), TtlSeconds: 60}
	refusal := &command.Refusal{Kind: "invalid", Error: "items array is required"}
	first := h.apply(idempotency.Refused(idem, refusal))
	eq(t, "first answer", proto.Equal(first, refusal), true)
	out, replayed, err := idempotency.Outcome(idem, h.apply(idempotency.Refused(idem, refusal)))
	if err != nil || !replayed || !proto.Equal(out, refusal) {
		t.Fatalf("stored refusal: %v (replayed %v, %v)", out, replayed, err)
	}
}

func TestKVSwitchRefusesKVWrites(t *testing.T) {
	h := newHarness(t)
	off := false
	h.apply(&command.Command{Body: &command.Command_SetSwitches{SetSwitches: &command.SetSwitches{KvEnabled: &off}}})
	res := h.apply(&command.Command{Body: &command.Command_Kv{Kv: &command.KVBatch{Ops: []*command.KVOp{marker("m", false)}}}}).(*command.KVBatchResult)
	eq(t, "kv refused", res.Reason, command.Reason_KV_DISABLED)
	tr := h.txn(&command.Transaction{Kv: []*command.KVOp{marker("m", false)}})
	eq(t, "txn refused", tr.Reason, command.Reason_KV_DISABLED)
	h.read(func(rd *Reader) { eq(t, "switch", rd.Switches().KvEnabled, false) })
}

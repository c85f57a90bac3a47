package fsm

import (
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/queue"
)

// A Kafka transaction's commit applies only from an entry of the term its
// coordinator staged it in. A coordinator that lost the lead and forwarded
// the commit to the next leader would land it after that leader answered
// OffsetFetch without knowing the offsets were pending: a consumer of the
// rebalanced group replays the inputs and the outputs appear twice. The
// refusal must leave nothing behind: no output, no offset.
func TestKafkaCommitOnlyInItsCoordinatorsTerm(t *testing.T) {
	h := newHarness(t)
	h.apply(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{item("out", "", "seed")}}}})
	h.apply(&command.Command{Body: &command.Command_Push{Push: &command.Push{Items: []*command.PushItem{item("in", "0", "in-1")}}}})
	init := h.apply(&command.Command{Body: &command.Command_KafkaInitProducer{KafkaInitProducer: &command.KafkaInitProducer{
		TransactionalId: "transformer-1", TxnTimeoutMs: 60000, IdleUs: 1e9}}}).(*command.KafkaInitProducerResult)
	if init.ErrorCode != 0 {
		t.Fatalf("init producer: %+v", init)
	}
	commit := func(term, coordinatorTerm uint64, txn string) *command.TxnResult {
		t.Helper()
		cmd := &command.Command{Body: &command.Command_Transaction{Transaction: &command.Transaction{
			TransactionId: []byte(txn),
			Kafka: &command.KafkaTxnGuard{ProducerId: init.ProducerId, ProducerEpoch: init.ProducerEpoch,
				TransactionalId: "transformer-1", ProducerIdleUs: 1e9, CoordinatorTerm: coordinatorTerm},
			Ops: []*command.TxnOp{{Op: &command.TxnOp_Push{Push: item("out", "", txn+"-out")}}},
			Positions: []*command.PositionOp{{Queue: "in", ConsumerGroup: "transformers", Partition: "0", Offset: 2,
				KafkaGroup: true, Subscription: command.Pop_DEFAULT_ALL}},
		}}}
		l := h.entry(cmd)
		l.Term = term
		return h.f.Apply(l).(*command.TxnResult)
	}
	outCount := func() (n uint64) {
		h.f.Read(func(r *Reader) error {
			n = r.PartitionNamed("out", queue.DefaultPartition).GetNextSeq() - 1
			return nil
		})
		return n
	}
	consumed := func() (n uint64) {
		h.f.Read(func(r *Reader) error {
			if cur := r.Cursor(r.PartitionNamed("in", "0").GetId(), "transformers"); cur != nil {
				n = cur.Consumed
			}
			return nil
		})
		return n
	}
	before := outCount()
	if res := commit(7, 6, "moved"); res.Success || res.Reason != command.Reason_COORDINATOR_MOVED {
		t.Fatalf("a commit staged in term 6 applied from an entry of term 7: %+v", res)
	}
	if got := outCount(); got != before {
		t.Fatalf("the refused commit left %d output messages behind", got-before)
	}
	if cur := consumed(); cur != 0 {
		t.Fatalf("the refused commit moved the group's offset to %d", cur)
	}
	if res := commit(7, 7, "kept"); !res.Success {
		t.Fatalf("a commit in its coordinator's term: %+v", res)
	}
	if got := outCount(); got != before+1 {
		t.Fatalf("the commit in its coordinator's term wrote %d outputs, want 1", got-before)
	}
	if cur := consumed(); cur != 1 {
		t.Fatalf("the commit in its coordinator's term left the group at consumed %d, want 1", cur)
	}
	if res := commit(8, 0, "old-format"); !res.Success {
		t.Fatalf("a commit without a coordinator term (an entry from before the field): %+v", res)
	}
}

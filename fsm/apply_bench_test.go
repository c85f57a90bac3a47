package fsm

// Benchmarks of the apply path, without Raft. Each answers one question:
//
//   BenchmarkApplyPush100       what does one 100-message push entry cost to apply?
//   BenchmarkApplyPush1         and a one-message push?
//   BenchmarkApplyPopAck        what do a pop of 100 and the ack batch of those 100 cost?
//   BenchmarkApplyTransaction   what does an exactly-once commit (ack + putIfAbsent) cost?
//   BenchmarkApplyBatch64       how much does group commit (64 pushes per store commit) save?
//   BenchmarkEncodePush100      what does encoding a 100-message push command cost?
//   BenchmarkDecodePush100      and decoding it again on a replica?
//
// The store is opened as the node opens it (one commit per CommitEvery
// batches) with NoSync: these measure apply work, not the disk.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
)

var payload256 = []byte(`{"d":"` + strings.Repeat("x", 248) + `"}`)

func pushCmd(queue string, n, base int) *command.Command {
	items := make([]*command.PushItem, n)
	for i := range items {
		items[i] = &command.PushItem{Queue: queue, Partition: fmt.Sprint("p", (base+i)%16),
			TransactionId: fmt.Sprint("t", base+i), Payload: payload256, MessageId: newMsgID()}
	}
	return &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: items}}}
}

func benchPush(b *testing.B, n int) {
	h := newHarness(&testing.T{})
	b.ReportAllocs()
	b.SetBytes(int64(n * len(payload256)))
	for i := 0; b.Loop(); i++ {
		h.f.Apply(h.entry(pushCmd("q", n, i*n)))
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkApplyPush100(b *testing.B) { benchPush(b, 100) }
func BenchmarkApplyPush1(b *testing.B)   { benchPush(b, 1) }

// The pop-ack and transaction benchmarks push (and pop) what they settle
// in each iteration, untimed: their own figure is the custom metric (ns of
// the timed entries per iteration), measured around those entries only
// (testing's StopTimer reads the memory stats, stopping the world, and
// would cost more than the entries).
func BenchmarkApplyPopAck(b *testing.B) {
	h := newHarness(&testing.T{})
	b.ReportAllocs()
	var timed time.Duration
	for i := 0; b.Loop(); i++ {
		h.f.Apply(h.entry(pushCmd("q", 100, i*100)))
		start := time.Now()
		res := h.f.Apply(h.entry(&command.Command{Body: &command.Command_Pop{Pop: &command.Pop{
			Queue: "q", ConsumerGroup: "g", Batch: 100, Partitions: 16, LeaseId: fmt.Sprint("L", i)}}})).(*command.PopResult)
		items := make([]*command.AckItem, len(res.Messages))
		for j, m := range res.Messages {
			items[j] = &command.AckItem{TransactionId: fmt.Sprint("t", i*100+j), PartitionId: m.PartitionId,
				ConsumerGroup: "g", LeaseId: res.LeaseId, Status: command.AckStatus_COMPLETED}
		}
		h.f.Apply(h.entry(&command.Command{Body: &command.Command_Ack{Ack: &command.Ack{Items: items}}}))
		timed += time.Since(start)
	}
	b.ReportMetric(float64(timed.Nanoseconds())/float64(b.N), "ns/pop+ack")
}

func BenchmarkApplyTransaction(b *testing.B) {
	h := newHarness(&testing.T{})
	b.ReportAllocs()
	var timed time.Duration
	for i := 0; b.Loop(); i++ {
		h.f.Apply(h.entry(pushCmd("orders", 1, i)))
		pr := h.f.Apply(h.entry(&command.Command{Body: &command.Command_Pop{Pop: &command.Pop{
			Queue: "orders", Batch: 1, LeaseId: fmt.Sprint("L", i)}}})).(*command.PopResult)
		m := pr.Messages[0]
		start := time.Now()
		h.f.Apply(h.entry(&command.Command{Body: &command.Command_Transaction{Transaction: &command.Transaction{
			Ops: []*command.TxnOp{ackOp(&command.AckItem{TransactionId: fmt.Sprint("t", i), PartitionId: m.PartitionId,
				LeaseId: pr.LeaseId, Status: command.AckStatus_COMPLETED})},
			Kv: []*command.KVOp{marker(fmt.Sprint("charge:", i), true)},
		}}}))
		timed += time.Since(start)
	}
	b.ReportMetric(float64(timed.Nanoseconds())/float64(b.N), "ns/txn")
}

func BenchmarkApplyBatch64(b *testing.B) {
	h := newHarness(&testing.T{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		logs := make([]*raft.Log, 64)
		for j := range logs {
			logs[j] = h.entry(pushCmd("q", 1, i*64+j))
		}
		h.f.ApplyBatch(logs)
	}
	b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkEncodePush100 is what a proposer runs: command.Encode, with
// its checksum.
func BenchmarkEncodePush100(b *testing.B) {
	cmd := pushCmd("q", 100, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := command.Encode(cmd); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePush100(b *testing.B) {
	data, _ := proto.Marshal(pushCmd("q", 100, 0))
	b.ReportAllocs()
	for b.Loop() {
		var cmd command.Command
		if err := proto.Unmarshal(data, &cmd); err != nil {
			b.Fatal(err)
		}
	}
}

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consume-transform-produce loop of a franz-go GroupTransactSession:
// a transaction's outputs and its input offsets commit in one entry, an
// aborted transaction leaves neither, and read_committed and
// read_uncommitted consumers read the same records.
func TestKafkaTransactionsCommitOutputsAndOffsetsTogether(t *testing.T) {
	_, addr := startKafkaNode(t)
	admin := kafkaClient(t, []string{addr})
	createTopic(t, admin, "orders", 2)
	createTopic(t, admin, "charges", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	prod := kafkaClient(t, []string{addr})
	for i := 0; i < 20; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf(`{"order":%d}`, i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("charger-1"),
		kgo.ConsumerGroup("charger"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	// One aborted transaction first: it must leave nothing.
	fs := sess.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if err := sess.Begin(); err != nil {
		t.Fatal(err)
	}
	fs.EachRecord(func(r *kgo.Record) {
		sess.Produce(ctx, &kgo.Record{Topic: "charges", Key: r.Key, Value: []byte(`{"aborted":true}`)}, nil)
	})
	if committed, err := sess.End(ctx, kgo.TryAbort); err != nil || committed {
		t.Fatalf("abort: committed=%v err=%v", committed, err)
	}
	if n := countRecords(t, addr, "charges", kgo.ReadUncommitted()); n != 0 {
		t.Fatalf("an aborted transaction left %d records", n)
	}

	// Then commit until every order is charged once.
	charged := 0
	for charged < 20 && ctx.Err() == nil {
		fs := sess.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			sess.Produce(ctx, &kgo.Record{Topic: "charges", Key: r.Key, Value: []byte(`{"charged":` + string(r.Key) + `}`)}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			charged += n
		}
	}
	for _, level := range []kgo.IsolationLevel{kgo.ReadCommitted(), kgo.ReadUncommitted()} {
		if n := countRecords(t, addr, "charges", level); n != 20 {
			t.Fatalf("%d charges, want 20", n)
		}
	}
	offs, err := kadm.NewClient(admin).FetchOffsets(ctx, "charger")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At - 1 })
	if total != 20 {
		t.Fatalf("the input offsets moved past %d orders, want 20", total)
	}
}

// countRecords reads a topic from the start to its end.
func countRecords(t *testing.T, addr, topic string, level kgo.IsolationLevel) int {
	t.Helper()
	n := 0
	readAll(t, []string{addr}, topic, func(*kgo.Record) { n++ }, kgo.FetchIsolationLevel(level))
	return n
}

// readAll calls fn for every record of a topic, from the start to the end
// offsets it has now.
func readAll(t *testing.T, seeds []string, topic string, fn func(*kgo.Record), opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaClient(t, seeds, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 1 {
			left[o.Partition] = o.Offset
		}
	})
	for len(left) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			fn(r)
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	if len(left) > 0 {
		t.Fatalf("topic %s: partitions %v not read to their end", topic, left)
	}
}

// An EndTxn(commit) that a coordinator meets as the first call of its
// transaction (here: after a restart, as after a failover) may be the
// retry of one the old coordinator appended, which may have committed: it
// is answered PRODUCER_FENCED, never TRANSACTION_ABORTABLE, because
// franz-go answers an abortable commit by rewinding to the offsets it last
// saw committed and replaying them. A transaction that staged on the new
// coordinator first never sent its EndTxn elsewhere: it stays abortable.
func TestKafkaEndTxnThatMayHaveCommittedElsewhereIsFenced(t *testing.T) {
	n, addr := startKafkaNode(t)
	admin := kafkaClient(t, []string{addr})
	createTopic(t, admin, "charges", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	prod := kafkaClient(t, []string{addr}, kgo.TransactionalID("charger-fenced"), kgo.DefaultProduceTopic("charges"))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(`{"charged":1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	id, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n.sigterm(10 * time.Second)
	n.restart() // the coordinator's memory of the producer is gone, its term is new

	raw := kafkaClient(t, []string{addr})
	endTxn := func() int16 {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "charger-fenced", id, epoch, true
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := endTxn(); code != kerr.ProducerFenced.Code {
		t.Fatalf("an EndTxn(commit) that is its transaction's first call here: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}

	n.sigterm(10 * time.Second)
	n.restart() // again: the transaction below begins before this coordinator's term
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "charger-fenced", id, epoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "charges", Partitions: []int32{0}}}
	if resp, err := add.RequestWith(ctx, raw); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, resp)
	}
	if code := endTxn(); code != kerr.TransactionAbortable.Code {
		t.Fatalf("an EndTxn(commit) of a transaction that staged here after the restart: %v, want TRANSACTION_ABORTABLE", kerr.ErrorForCode(code))
	}
	if got := countRecords(t, addr, "charges", kgo.ReadUncommitted()); got != 1 {
		t.Fatalf("%d charges, want the one committed before the restart", got)
	}
}

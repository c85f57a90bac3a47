package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A commit whose entry a failover leaves with an unknown fate: the leader
// proposes it while both followers are paused and loses the lead before
// it can commit. The answer must not be one the client recovers from
// (UNKNOWN_SERVER_ERROR, TRANSACTION_ABORTABLE): franz-go's
// GroupTransactSession answers those by rewinding to the offsets it last
// saw committed and replaying inputs whose outputs may be in the log. It is
// PRODUCER_FENCED; a new producer of the same transactional id starts
// after the entry's fate is settled and commits as usual.
func TestKafkaCommitWithUnknownOutcomeIsFenced(t *testing.T) {
	c := startKafkaCluster(t)
	leader := c.leader(15 * time.Second)
	seeds := c.kafkaSeeds()
	admin := kafkaClient(t, seeds)
	createTopic(t, admin, "charges", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	producer := func() *kgo.Client {
		return kafkaClient(t, seeds, kgo.TransactionalID("charger-unknown"), kgo.DefaultProduceTopic("charges"),
			kgo.TransactionTimeout(30*time.Second), kgo.RequestTimeoutOverhead(3*time.Second), kgo.RetryTimeout(10*time.Second))
	}

	first := producer()
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, &kgo.Record{Value: []byte("uncertain")}).FirstErr(); err != nil {
		t.Fatal(err) // staged on the leader, in memory
	}
	followers := c.others(leader)
	for _, f := range followers {
		if err := f.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	err := first.EndTransaction(ctx, kgo.TryCommit)
	took := time.Since(start)
	for _, f := range followers {
		if err := f.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("EndTxn(commit) of a leader that lost its followers: %v after %v, want PRODUCER_FENCED", err, took)
	}
	if n := leader.logCount("a transaction's commit has an unknown outcome"); n != 1 {
		t.Fatalf("the leader logged %d unknown outcomes, want 1 (another path answered)", n)
	}

	second := producer()
	for ctx.Err() == nil {
		if err := second.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		err := second.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr()
		if err == nil {
			if err = second.EndTransaction(ctx, kgo.TryCommit); err == nil {
				break
			}
		} else if err := second.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Logf("abort: %v", err)
		}
		t.Logf("a transaction of the new producer while the cluster recovers: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
	seen := map[string]int{}
	readAll(t, seeds, "charges", func(r *kgo.Record) { seen[string(r.Value)]++ })
	if seen["after"] != 1 || seen["uncertain"] > 1 || len(seen) > 2 {
		t.Fatalf("charges %v: want the new producer's once and the uncertain commit at most once", seen)
	}
	t.Logf("the uncertain commit was written %d times (the entry's fate)", seen["uncertain"])
}

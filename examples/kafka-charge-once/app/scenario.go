package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// replayWindow is how long the restarted charger polls, once it holds
// every partition, for an order it could charge a second time.
const replayWindow = 3 * time.Second

func (r *run) scenario(ctx context.Context) error {
	for _, topic := range []string{r.orders, r.charges} {
		res, err := r.adm.CreateTopic(ctx, partitions, -1, nil, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		r.created = true
	}

	fmt.Fprintln(r.out, "\nproducing orders")
	if err := r.produceOrders(ctx); err != nil {
		return err
	}

	// charger-0 is the zombie: it began a transaction and staged a charge,
	// then stalled (a long GC pause, a network partition) before its commit.
	fmt.Fprintln(r.out, "\na zombie")
	zombie, err := r.client(kgo.TransactionalID(r.txnID), kgo.TransactionTimeout(2*time.Minute))
	if err != nil {
		return err
	}
	defer zombie.Close()
	if err := zombie.BeginTransaction(); err != nil {
		return err
	}
	zctx, cancel := context.WithTimeout(ctx, r.phase)
	err = zombie.ProduceSync(zctx, r.chargeRecord(order{OrderID: orderID(0), Cents: 1000}, "charger-0")).FirstErr()
	cancel()
	if err != nil {
		return fmt.Errorf("charger-0: %w", err)
	}
	fmt.Fprintf(r.out, "  charger-0: staged a charge for %s in a transaction, then stalled before its commit\n", orderID(0))

	fmt.Fprintln(r.out, "\na crash")
	if err := r.crash(ctx); err != nil {
		return err
	}

	fmt.Fprintln(r.out, "\nresuming")
	if err := r.resume(ctx); err != nil {
		return err
	}

	fmt.Fprintln(r.out, "\nthe zombie wakes up")
	zctx, cancel = context.WithTimeout(ctx, r.phase)
	zerr := zombie.EndTransaction(zctx, kgo.TryCommit)
	cancel()
	fmt.Fprintf(r.out, "  charger-0: EndTransaction(commit): %v\n", zerr)
	fenced := errors.Is(zerr, kerr.ProducerFenced) || errors.Is(zerr, kerr.InvalidProducerEpoch)
	if err := r.check(fenced, "the zombie's commit was refused: a newer instance's InitProducerId fenced its epoch"); err != nil {
		return err
	}

	fmt.Fprintln(r.out, "\nrestarting (replay)")
	if err := r.replay(ctx); err != nil {
		return err
	}

	fmt.Fprintln(r.out, "\nchecking")
	return r.verify(ctx)
}

// produceOrders writes the orders with an idempotent producer (franz-go's
// default): a retried batch is answered with its first offsets and appends
// nothing.
func (r *run) produceOrders(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.phase)
	defer cancel()
	prod, err := r.client()
	if err != nil {
		return err
	}
	defer prod.Close()
	recs := make([]*kgo.Record, r.n)
	for i := range recs {
		v, _ := json.Marshal(order{OrderID: orderID(i), Cents: 1000 + i})
		recs[i] = &kgo.Record{Topic: r.orders, Key: []byte(orderID(i)), Value: v}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce orders: %w", err)
	}
	n, err := r.count(ctx, r.orders, kgo.ReadCommitted())
	if err != nil {
		return err
	}
	return r.check(n == r.n, fmt.Sprintf("%d orders produced with an idempotent producer, %d in the topic", r.n, n))
}

// charger starts one instance of the charging service: a franz-go
// GroupTransactSession with the run's transactional id and group.
// RequireStableFetchOffsets makes its start wait for a transaction that
// is committing offsets of its partitions (KIP-447), so that it starts
// from the offsets that transaction leaves.
func (r *run) charger(assigned func(map[string][]int32)) (*kgo.GroupTransactSession, error) {
	opts := append(r.base(),
		kgo.TransactionalID(r.txnID), kgo.TransactionTimeout(time.Minute),
		kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(r.orders),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequireStableFetchOffsets(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if assigned != nil {
		opts = append(opts, kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { assigned(m) }))
	}
	return kgo.NewGroupTransactSession(opts...)
}

func (r *run) chargeRecord(o order, by string) *kgo.Record {
	v, _ := json.Marshal(charge{OrderID: o.OrderID, Cents: o.Cents, ChargeID: "ch_" + o.OrderID + "_" + by, By: by})
	return &kgo.Record{Topic: r.charges, Key: []byte(o.OrderID), Value: v}
}

// poll waits for the next batch of orders (at most batch of them); an
// empty batch means ctx ran out.
func poll(ctx context.Context, sess *kgo.GroupTransactSession) ([]*kgo.Record, error) {
	fs := sess.PollRecords(ctx, batch)
	if ctx.Err() != nil {
		return nil, nil
	}
	if err := fs.Err0(); err != nil {
		return nil, err
	}
	return fs.Records(), nil
}

// stage produces one charge per order into the open transaction.
func (r *run) stage(ctx context.Context, sess *kgo.GroupTransactSession, recs []*kgo.Record, by string) (func() error, error) {
	var mu sync.Mutex
	var first error
	for _, rec := range recs {
		var o order
		if err := json.Unmarshal(rec.Value, &o); err != nil {
			return nil, fmt.Errorf("order at %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		}
		sess.Produce(ctx, r.chargeRecord(o, by), func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
		})
	}
	return func() error { mu.Lock(); defer mu.Unlock(); return first }, nil
}

// transact is one turn of the loop: poll a batch, charge it, and commit
// the charges and the batch's offsets in one transaction. It returns the
// orders it charged (0 when the transaction aborted: a rebalance, a fenced
// epoch; the session then rewinds to the committed offsets).
// pollCtx bounds the wait for orders; ctx the transaction.
func (r *run) transact(ctx, pollCtx context.Context, sess *kgo.GroupTransactSession, by string) (charged []string, polled bool, err error) {
	recs, err := poll(pollCtx, sess)
	if err != nil || len(recs) == 0 {
		return nil, false, err
	}
	if err := sess.Begin(); err != nil {
		return nil, true, err
	}
	produced, err := r.stage(ctx, sess, recs, by)
	if err != nil {
		sess.End(ctx, kgo.TryAbort)
		return nil, true, err
	}
	committed, err := sess.End(ctx, kgo.TryCommit)
	if err == nil {
		err = produced()
	}
	if err != nil || !committed {
		return nil, true, err
	}
	for _, rec := range recs {
		charged = append(charged, string(rec.Key))
	}
	return charged, true, nil
}

// crash: charger-1 reads a batch, produces its charges (they reach the
// broker and are staged there), and dies before EndTransaction.
func (r *run) crash(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.phase)
	defer cancel()
	sess, err := r.charger(nil)
	if err != nil {
		return err
	}
	recs, err := poll(ctx, sess)
	if err == nil && len(recs) == 0 {
		err = fmt.Errorf("charger-1 got no order within %v", r.phase)
	}
	if err == nil {
		err = sess.Begin()
	}
	var produced func() error
	if err == nil {
		produced, err = r.stage(ctx, sess, recs, "charger-1")
	}
	if err == nil {
		err = sess.Client().Flush(ctx)
	}
	if err == nil {
		err = produced()
	}
	// The crash: the process is gone. No EndTransaction, no offsets.
	sess.Close()
	if err != nil {
		return fmt.Errorf("charger-1: %w", err)
	}
	fmt.Fprintf(r.out, "  charger-1: read %d orders, produced %d charges (staged on the broker), crashed before EndTransaction\n", len(recs), len(recs))
	n, err := r.count(ctx, r.charges, kgo.ReadUncommitted())
	if err != nil {
		return err
	}
	if err := r.check(n == 0, fmt.Sprintf("the crash left no charge behind, not even for read_uncommitted (%d)", n)); err != nil {
		return err
	}
	moved, err := r.committed(ctx)
	if err != nil {
		return err
	}
	return r.check(moved == 0, fmt.Sprintf("the crash moved no input offset (%d orders past)", moved))
}

// resume: charger-2, the same transactional id and group, starts from the
// committed offsets (none yet) and charges until every order is charged.
func (r *run) resume(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.phase)
	defer cancel()
	sess, err := r.charger(nil)
	if err != nil {
		return err
	}
	defer sess.Close()
	charged, txns := map[string]int{}, 0
	total := 0
	for total < r.n {
		keys, polled, err := r.transact(ctx, ctx, sess, "charger-2")
		if err != nil {
			return fmt.Errorf("charger-2: %w", err)
		}
		if !polled && ctx.Err() != nil {
			return fmt.Errorf("charger-2 charged %d of %d orders within %v", total, r.n, r.phase)
		}
		if len(keys) == 0 {
			continue
		}
		txns++
		total += len(keys)
		for _, k := range keys {
			charged[k]++
		}
		fmt.Fprintf(r.out, "  charger-2: transaction %d committed %d charges and their offsets (%s..%s)\n", txns, len(keys), keys[0], keys[len(keys)-1])
	}
	return r.check(total == r.n && len(charged) == r.n,
		fmt.Sprintf("charger-2 resumed and charged all %d orders once each, in %d transactions", r.n, txns))
}

// replay: charger-3 restarts from the committed offsets: it takes every
// partition and must find no order left to charge.
func (r *run) replay(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.phase)
	defer cancel()
	assigned := make(chan map[string][]int32, 1)
	sess, err := r.charger(func(m map[string][]int32) {
		select {
		case assigned <- maps.Clone(m):
		default:
		}
	})
	if err != nil {
		return err
	}
	defer sess.Close()
	total := 0
	// Poll from the start: the assignment happens inside the poll loop.
	deadline := time.Time{}
	var parts []int32
	for {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		keys, _, err := r.transact(ctx, pctx, sess, "charger-3")
		pcancel()
		if err != nil {
			return fmt.Errorf("charger-3: %w", err)
		}
		total += len(keys)
		if len(keys) > 0 {
			fmt.Fprintf(r.out, "  charger-3: charged %v AGAIN\n", keys)
		}
		select {
		case m := <-assigned:
			parts = m[r.orders]
			slices.Sort(parts)
			deadline = time.Now().Add(replayWindow)
			fmt.Fprintf(r.out, "  charger-3: assigned partitions %v of %s, polling for %v\n", parts, r.orders, replayWindow)
		default:
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("charger-3 was assigned no partition within %v", r.phase)
		}
	}
	return r.check(len(parts) == partitions && total == 0,
		fmt.Sprintf("charger-3 restarted from the committed offsets on all %d partitions and charged nothing (%d)", partitions, total))
}

// verify reads the outputs the way a downstream consumer would.
func (r *run) verify(ctx context.Context) error {
	perOrder, by := map[string]int{}, map[string]int{}
	total, bad := 0, 0
	err := r.readAll(ctx, r.charges, kgo.ReadCommitted(), func(rec *kgo.Record) {
		total++
		perOrder[string(rec.Key)]++
		var c charge
		if json.Unmarshal(rec.Value, &c) != nil || c.OrderID != string(rec.Key) {
			bad++
		}
		by[c.By]++
	})
	if err != nil {
		return err
	}
	once := total == r.n && bad == 0
	for i := range r.n {
		once = once && perOrder[orderID(i)] == 1
	}
	uncommitted, err := r.count(ctx, r.charges, kgo.ReadUncommitted())
	if err != nil {
		return err
	}
	moved, err := r.committed(ctx)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		ok   bool
		what string
	}{
		{once, fmt.Sprintf("read_committed from the start: %d orders, %d charges, one per order", r.n, total)},
		{by["charger-2"] == total && by["charger-0"] == 0 && by["charger-1"] == 0,
			fmt.Sprintf("every charge is charger-2's: none of the zombie's (%d), none of the crashed charger's (%d)", by["charger-0"], by["charger-1"])},
		{uncommitted == total, fmt.Sprintf("read_uncommitted reads the same %d charges: nothing aborted was ever written", uncommitted)},
		{moved == int64(r.n), fmt.Sprintf("the group's committed offsets are past all %d orders (%d)", r.n, moved)},
	} {
		if err := r.check(c.ok, c.what); err != nil {
			return err
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, by[k]))
	}
	fmt.Fprintf(r.out, "\n  charges by instance: %s\n", strings.Join(parts, ", "))
	if bad > 0 {
		return errors.New("a charge record does not name its order")
	}
	return nil
}

package lab

import (
	"context"
	"fmt"
	"sync"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// Mode 4: the marker, the ack and the charge of a whole batch in ONE
// transaction, through the Go client's OnceConsumer: pop Batch payments,
// read their markers with one getMany, decide each unmarked one (its charge
// is a push of the ledger entry, committed with its marker), and commit the
// batch's acks, charges and markers together.
//
// Besides the crash plan (a crash before the commit abandons the whole
// batch: it comes back when the lease runs out; a crash right after sending
// it loses the reply, and the payment is settled by its marker), two
// payments show what a batch adds (their partitions are spared the crash
// plan, so that no crash of a neighbour abandons their batch first):
//
//   - the rival's payment (the 3rd): while its batch is being decided,
//     another consumer charges it and commits its marker. The batch's commit
//     loses the marker race and rolls back whole; the consumer re-reads the
//     markers and commits the rest, never charging the rival's payment a
//     second time.
//   - the slow payment (the 12th): deciding it takes longer than the lease,
//     so the batch's commit is refused (rejected_ack). The consumer commits
//     the batch's charges and markers without the acks; the broker delivers
//     the payments again, and the next delivery finds the markers.
const (
	rivalPayment = 3
	slowPayment  = 12
)

// spared reports whether a payment's partition is one of the rival's or the
// slow payment's (a pop claims one partition, so a batch is one
// partition's).
func (r *run) spared(id string) bool {
	part := func(i int) string { return fmt.Sprintf("p%02d", (i-1)%r.cfg.Partitions) }
	var i int
	fmt.Sscanf(id, "pay-%d", &i)
	return part(i) == part(rivalPayment) || part(i) == part(slowPayment)
}

// batchedState is mode 4's bookkeeping beside run's.
type batchedState struct {
	mu      sync.Mutex
	decided map[string]bool // payment/lease: the handler decided that delivery
	deaf    map[string]bool // payments whose worker "died" after sending the commit
}

func (r *run) runBatched(ctx context.Context) {
	st := &batchedState{decided: map[string]bool{}, deaf: map[string]bool{}}
	cons := r.c.Queue(r.queue).OnceConsumer(queen.OnceOptions{
		ConsumerOptions: queen.ConsumerOptions{Group: r.group, Subscription: queen.SubscribeAll, Concurrency: r.cfg.Workers,
			Batch: r.cfg.Batch, Wait: time.Second, RenewEvery: -1, OnError: func(error) {}},
		Namespace: r.ns, TTL: time.Hour,
		Key: func(m *queen.Message) string {
			var p payment
			_ = m.Decode(&p)
			return markerKey(p.PaymentID)
		},
		OnSettled: func(m *queen.Message, s queen.OnceSettled) { r.settledBatched(st, m, s) },
	})
	go func() {
		<-r.allDone
		cons.Stop()
	}()
	if err := cons.Run(ctx, func(ctx context.Context, m *queen.Message, e *queen.Effect) error {
		return r.decideBatched(ctx, st, m, e)
	}); err != nil && ctx.Err() == nil {
		r.fail(err)
	}
}

// decideBatched is the handler: one payment of a batch, not yet marked.
func (r *run) decideBatched(ctx context.Context, st *batchedState, m *queen.Message, e *queen.Effect) error {
	var p payment
	if err := m.Decode(&p); err != nil || p.PaymentID == "" {
		return fmt.Errorf("bad payload %s", m.Data)
	}
	r.mu.Lock()
	r.attempts[p.PaymentID]++
	attempt := r.attempts[p.PaymentID]
	r.res.Deliveries++
	r.mu.Unlock()
	st.mu.Lock()
	st.decided[p.PaymentID+"/"+m.LeaseID] = true
	st.mu.Unlock()

	if crash, afterCommit := crashes(p.PaymentID, attempt, r.cfg.CrashPercent); crash && !r.spared(p.PaymentID) {
		if !afterCommit {
			// The worker dies before the commit: the whole batch comes back.
			r.count(func(s *Result) { s.Crashes++; s.CrashesBeforeCommit++ })
			return queen.ErrAbandon
		}
		// It dies right after sending it: whatever the commit answers, this
		// worker never learns (the supervisor settles the payment by its
		// marker).
		r.mu.Lock()
		r.res.Crashes++
		r.res.CrashesAfterCommit++
		r.unsure[p.PaymentID] = true
		r.mu.Unlock()
		st.mu.Lock()
		st.deaf[p.PaymentID] = true
		st.mu.Unlock()
	}
	switch {
	case p.PaymentID == paymentID(rivalPayment) && attempt == 1:
		// Another consumer charges this payment meanwhile, marker first.
		rivalID := "ch_" + p.PaymentID + "_rival"
		res, err := r.c.Transaction().
			Push(r.led, charge{PaymentID: p.PaymentID, ChargeID: rivalID, Amount: p.Amount},
				queen.WithPartition("ledger"), queen.WithTransactionID("ledger-"+rivalID)).
			KV().PutIfAbsent(r.ns, markerKey(p.PaymentID), marker{ChargeID: rivalID, Amount: p.Amount}, time.Hour, true).
			Commit(ctx)
		if err != nil {
			return err
		}
		if !res.Committed {
			return fmt.Errorf("the rival's charge of %s did not commit", p.PaymentID)
		}
	case p.PaymentID == paymentID(slowPayment) && attempt == 1:
		time.Sleep(time.Duration(r.cfg.LeaseSeconds)*time.Second + 500*time.Millisecond) // the lease runs out
	}
	chargeID := fmt.Sprintf("ch_%s_%d", p.PaymentID, attempt)
	e.Mark(marker{ChargeID: chargeID, Amount: p.Amount})
	e.Push(r.led, charge{PaymentID: p.PaymentID, ChargeID: chargeID, Amount: p.Amount},
		queen.WithPartition("ledger"), queen.WithTransactionID("ledger-"+chargeID))
	return nil
}

// settledBatched counts how each payment of a batch ended.
func (r *run) settledBatched(st *batchedState, m *queen.Message, s queen.OnceSettled) {
	var p payment
	if m.Decode(&p) != nil {
		return
	}
	st.mu.Lock()
	deaf := st.deaf[p.PaymentID]
	delete(st.deaf, p.PaymentID)
	decidedNow := st.decided[p.PaymentID+"/"+m.LeaseID]
	st.mu.Unlock()
	if deaf {
		return // the worker that sent this commit is gone
	}
	if (s.Outcome == queen.OnceCommitted || s.Outcome == queen.OnceMarked) && !s.Acked {
		// The lease ran out before the commit: committed (or found marked)
		// without the ack; the broker delivers it again.
		r.count(func(s *Result) { s.RejectedAcks++ })
	}
	switch s.Outcome {
	case queen.OnceCommitted:
	case queen.OnceMarked:
		if decidedNow {
			r.count(func(s *Result) { s.KVPrecondition++ }) // decided, then found marked: a lost race
		} else {
			r.count(func(s *Result) { s.MarkerHits++; s.Deliveries++ })
		}
	default:
		return
	}
	if s.Acked {
		r.settle(p.PaymentID)
	}
}

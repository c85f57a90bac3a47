package lab

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// One mode. ---------------------------------------------------------------

// run is the state of one mode while it runs.
type run struct {
	cfg   Config
	mode  Mode
	b     *broker
	c     *queen.Client // b.c
	queue string        // payments queue
	group string        // the workers' consumer group
	ns    string        // KV namespace of the markers
	led   string        // ledger queue (mode 3)
	kv    *pacer

	mu       sync.Mutex
	attempts map[string]int  // deliveries per payment
	settled  map[string]bool // payments this mode is finished with
	unsure   map[string]bool // mode 3: commit sent, verdict unknown
	ledger   []charge        // modes 1 and 2: the workers' ledger
	res      Result
	allDone  chan struct{}
	closed   bool
	failure  error
}

func runMode(parent context.Context, cfg Config, b *broker, m Mode) (Result, error) {
	start, retries := time.Now(), b.retries.Load()
	ctx, cancel := context.WithTimeout(parent, cfg.ModeTimeout)
	defer cancel()
	name := fmt.Sprintf("payments-%s-%s", cfg.RunID, m.short())
	r := &run{
		cfg: cfg, mode: m,
		b: b, c: b.c,
		queue: name, group: "workers", ns: strings.ToLower(name), led: name + "-ledger",
		kv:       newPacer(cfg.KVReadRate),
		attempts: map[string]int{}, settled: map[string]bool{}, unsure: map[string]bool{},
		allDone: make(chan struct{}),
	}
	r.res = Result{Mode: m, Queue: r.queue, CorrectTotal: cfg.Payments * cfg.Amount, Ledger: "workers' memory"}
	if m.marks() {
		r.res.Namespace, r.res.Ledger = r.ns, "queue "+r.led
	}
	fmt.Fprintf(cfg.Log, "mode %d (%s): queue %s, %d partitions, lease %ds, %d workers\n",
		int(m), m, r.queue, cfg.Partitions, cfg.LeaseSeconds, cfg.Workers)

	// A retry limit well above anything the crash plan needs: a lease that
	// runs out spends no retry budget anyway (spec §5.3).
	err := r.c.Queue(r.queue).Configure(ctx, queen.LeaseTime(time.Duration(cfg.LeaseSeconds)*time.Second),
		queen.RetryLimit(10), queen.RetryDelay(100*time.Millisecond))
	if err != nil {
		return r.res, err
	}
	if err := r.pushPayments(ctx); err != nil {
		return r.res, err
	}

	// The workers, and for mode 3 a supervisor that settles payments whose
	// commit verdict was lost, by looking for their markers.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if m == BatchedMarker {
		wg.Go(func() { r.runBatched(wctx) })
	} else {
		for w := 0; w < cfg.Workers; w++ {
			wg.Go(func() { r.worker(wctx, w) })
		}
	}
	if m.marks() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.supervise(wctx)
		}()
	}
	select {
	case <-r.allDone:
	case <-ctx.Done():
	}
	stop()
	wg.Wait()
	r.mu.Lock()
	failure, settled := r.failure, len(r.settled)
	r.mu.Unlock()
	if failure != nil {
		return r.res, failure
	}
	if settled < cfg.Payments {
		return r.res, fmt.Errorf("deadline %v passed with %d of %d payments settled", cfg.ModeTimeout, settled, cfg.Payments)
	}

	// The ledger.
	ledger := r.ledger
	if m.marks() {
		var err error
		if ledger, err = r.readLedger(ctx); err != nil {
			return r.res, err
		}
		if err := r.checkMarkers(ctx, ledger); err != nil {
			return r.res, err
		}
	}
	r.tally(ledger)
	r.res.Retries = int(b.retries.Load() - retries)
	r.res.Elapsed = time.Since(start)
	fmt.Fprintf(cfg.Log, "mode %d (%s): done in %v\n", int(m), m, r.res.Elapsed.Round(time.Millisecond))
	return r.res, nil
}

// marks reports whether the mode writes markers and keeps its ledger in a
// queue (modes 3 and 4).
func (m Mode) marks() bool { return m == MarkerTransaction || m == BatchedMarker }

// pushPayments queues the payments, round-robin over the partitions, in
// requests of up to 100 items. The transactionId is the payment id.
func (r *run) pushPayments(ctx context.Context) error {
	var batch []queen.Msg
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := pushed(r.c.Queue(r.queue).Push(ctx, batch...))
		batch = batch[:0]
		return err
	}
	for i := 1; i <= r.cfg.Payments; i++ {
		id := paymentID(i)
		batch = append(batch, queen.Msg{
			Partition: fmt.Sprintf("p%02d", (i-1)%r.cfg.Partitions), TransactionID: id,
			Data: payment{PaymentID: id, Amount: r.cfg.Amount},
		})
		if len(batch) == 100 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	r.res.Sent = r.cfg.Payments
	return nil
}

// pushed requires every pushed item to come back queued (or duplicate, when
// a retried request had already landed).
func pushed(res []queen.PushResult, err error) error {
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Status != "queued" && r.Status != "duplicate" {
			return fmt.Errorf("push of %s came back %q (%s)", r.TransactionID, r.Status, r.Error)
		}
	}
	return nil
}

// fail records the first fatal error and stops the mode.
func (r *run) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil {
		r.failure = err
	}
	r.closeLocked()
}

func (r *run) closeLocked() {
	if !r.closed {
		r.closed = true
		close(r.allDone)
	}
}

// settle marks a payment finished; the mode ends when all are.
func (r *run) settle(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled[id] = true
	delete(r.unsure, id)
	if len(r.settled) == r.cfg.Payments {
		r.closeLocked()
	}
}

// count adds to one of the result's counters under the lock.
func (r *run) count(f func(*Result)) {
	r.mu.Lock()
	f(&r.res)
	r.mu.Unlock()
}

// worker pops one message at a time (batch 1: a failed or abandoned
// delivery gives up the partition's lease, and in a batch every message
// after it would be handled under a dead lease) and handles it.
func (r *run) worker(ctx context.Context, w int) {
	for ctx.Err() == nil {
		if r.mode == MarkerTransaction {
			// A token for the marker read, taken before the pop so that
			// waiting for it never eats into a lease.
			if r.kv.wait(ctx) != nil {
				return
			}
		}
		msgs, err := r.pop(ctx, r.queue, r.group, 1)
		if err != nil {
			if ctx.Err() == nil {
				r.fail(fmt.Errorf("worker %d: %w", w, err))
			}
			return
		}
		for _, m := range msgs {
			var p payment
			if err := m.Decode(&p); err != nil || p.PaymentID == "" {
				r.fail(fmt.Errorf("worker %d: bad payload %s", w, m.Data))
				return
			}
			r.mu.Lock()
			r.attempts[p.PaymentID]++
			attempt := r.attempts[p.PaymentID]
			r.res.Deliveries++
			r.mu.Unlock()
			var herr error
			switch r.mode {
			case AtLeastOnce:
				herr = r.handleAtLeastOnce(ctx, m, p, attempt)
			case AckFirst:
				herr = r.handleAckFirst(ctx, m, p, attempt)
			case MarkerTransaction:
				herr = r.handleMarker(ctx, m, p, attempt, false)
			}
			if herr != nil {
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("worker %d, %s attempt %d: %w", w, p.PaymentID, attempt, herr))
				}
				return
			}
		}
	}
}

// supervise settles mode 3 payments whose verdict a worker could not read,
// once their marker shows the commit landed. Marker and ack are one log
// entry, so a marker means the message is acked.
func (r *run) supervise(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		var keys []string
		for id := range r.unsure {
			if !r.settled[id] {
				keys = append(keys, markerKey(id))
			}
		}
		r.mu.Unlock()
		sort.Strings(keys)
		for len(keys) > 0 {
			n := min(len(keys), 200)
			if r.kv.wait(ctx) != nil {
				return
			}
			rows, err := r.getMany(ctx, keys[:n])
			if err != nil {
				if ctx.Err() == nil {
					r.fail(fmt.Errorf("supervisor: %w", err))
				}
				return
			}
			for _, row := range rows {
				r.settle(strings.TrimPrefix(row.Key, "charged:"))
			}
			keys = keys[n:]
		}
	}
}

// readLedger reads the whole ledger queue back with a fresh consumer group
// (subscriptionMode=all), acking as it goes, until it has every message the
// queue holds.
func (r *run) readLedger(ctx context.Context) ([]charge, error) {
	// The queue detail is the HTTP API's (the lab's client is an HTTP one).
	st, err := r.c.Queue(r.led).Stats(ctx)
	if err != nil {
		return nil, err
	}
	want, group := int(st.Total), "auditor"
	var out []charge
	for len(out) < want {
		if ctx.Err() != nil {
			return out, fmt.Errorf("ledger read-back: %d of %d entries before the deadline", len(out), want)
		}
		msgs, err := r.pop(ctx, r.led, group, 500)
		if err != nil {
			return out, err
		}
		for _, m := range msgs {
			var ch charge
			if err := m.Decode(&ch); err != nil {
				return out, fmt.Errorf("ledger entry %s: %v", m.Data, err)
			}
			out = append(out, ch)
		}
		if err := r.ackAll(ctx, msgs); err != nil {
			return out, err
		}
	}
	return out, nil
}

// checkMarkers reads every payment's marker and checks it names a charge
// in the ledger.
func (r *run) checkMarkers(ctx context.Context, ledger []charge) error {
	charges := map[string]bool{}
	for _, ch := range ledger {
		charges[ch.ChargeID] = true
	}
	var keys []string
	for i := 1; i <= r.cfg.Payments; i++ {
		keys = append(keys, markerKey(paymentID(i)))
	}
	for len(keys) > 0 {
		n := min(len(keys), 200)
		if err := r.kv.wait(ctx); err != nil {
			return err
		}
		rows, err := r.getMany(ctx, keys[:n])
		if err != nil {
			return err
		}
		for _, row := range rows {
			r.res.Markers++
			var v marker
			if row.Decode(&v) == nil && charges[v.ChargeID] {
				r.res.MarkersNamingCharge++
			}
		}
		keys = keys[n:]
	}
	return nil
}

// tally fills the ledger columns of the result.
func (r *run) tally(ledger []charge) {
	per := map[string]int{}
	for _, ch := range ledger {
		per[ch.PaymentID]++
		r.res.LedgerTotal += ch.Amount
	}
	r.res.Charges = len(ledger)
	r.res.Charged = len(per)
	r.res.Duplicates = r.res.Charges - r.res.Charged
	for i := 1; i <= r.cfg.Payments; i++ {
		if per[paymentID(i)] == 0 {
			r.res.Lost++
		}
	}
}

// pop long-polls one batch for group, from the beginning of the queue
// (subscriptionMode=all). An empty pop is no messages.
func (r *run) pop(ctx context.Context, queue, group string, batch int) ([]*queen.Message, error) {
	return r.c.Queue(queue).Pop(ctx, queen.PopOptions{Group: group, Subscription: queen.SubscribeAll, Batch: batch, Wait: time.Second})
}

// ackAll acknowledges a batch in one POST /api/v1/ack/batch.
func (r *run) ackAll(ctx context.Context, msgs []*queen.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	batch := make([]queen.Settle, len(msgs))
	for i, m := range msgs {
		batch[i] = queen.Settle{Message: m}
	}
	res, err := r.c.AckBatch(ctx, batch)
	if err != nil {
		return err
	}
	for i, a := range res {
		if !a.Success {
			return fmt.Errorf("ack/batch: item %d (%s) refused: %s", i, a.TransactionID, a.Error)
		}
	}
	if len(res) != len(msgs) {
		return fmt.Errorf("ack/batch of %d answered %d results", len(msgs), len(res))
	}
	return nil
}

// getMany reads markers in one op.
func (r *run) getMany(ctx context.Context, keys []string) ([]queen.KVEntry, error) {
	rows, err := r.c.KV().GetMany(ctx, r.ns, keys...)
	if err != nil {
		return nil, err
	}
	if rows.Truncated {
		return nil, errors.New("kv getMany: truncated answer")
	}
	return rows.Rows, nil
}

// pacer spaces calls at least 1/rate apart (a token bucket of one). The
// lab takes a token BEFORE it pops, so waiting for the broker's KV read
// rate never eats into a lease.
type pacer struct {
	mu    sync.Mutex
	every time.Duration
	next  time.Time
}

func newPacer(perSecond float64) *pacer {
	if perSecond <= 0 {
		return &pacer{}
	}
	return &pacer{every: time.Duration(float64(time.Second) / perSecond)}
}

func (p *pacer) wait(ctx context.Context) error {
	if p.every == 0 {
		return ctx.Err()
	}
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.every)
	p.mu.Unlock()
	if d := time.Until(at); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return ctx.Err()
}

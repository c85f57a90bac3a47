package queen

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Handler processes one message. Returning nil completes it and returning
// an error fails it (nack, with the error's text), unless the handler
// settled the message itself (Client.Ack/Nack, or a committed transaction
// that acks it), which the consumer then leaves alone.
type Handler func(ctx context.Context, m *Message) error

// ConsumerOptions shape a Consumer.
type ConsumerOptions struct {
	Group            string // "" = queue mode
	Partition        string // "" = any partition
	Subscription     SubscriptionMode
	SubscriptionFrom time.Time
	Concurrency      int           // workers, each popping its own batches; 0 = 1
	Batch            int           // messages per pop; 0 = 1
	Wait             time.Duration // long-poll of each pop; 0 = 10s
	// RenewEvery is how often the lease of a batch being handled is
	// extended; 0 = half the lease, < 0 = never.
	RenewEvery time.Duration
	// OnError is told about failed pops, acks and renewals (the consumer
	// carries on after a pause); nil ignores them.
	OnError func(error)
}

// Consumer runs a Handler over a queue's messages with a number of
// workers. Messages of one batch are handled in order; after a failure the
// rest of the batch is left to come back (the failed ack released its
// lease), so a later message is never completed ahead of a failed one.
type Consumer struct {
	q    *Queue
	o    ConsumerOptions
	once sync.Once
	stop chan struct{}
}

// Consumer makes a consumer of the queue; Run starts it.
func (q *Queue) Consumer(o ConsumerOptions) *Consumer {
	o.Concurrency, o.Batch = max(o.Concurrency, 1), max(o.Batch, 1)
	if o.Wait <= 0 {
		o.Wait = 10 * time.Second
	}
	return &Consumer{q: q, o: o, stop: make(chan struct{})}
}

// Stop asks Run to end gracefully: no new pops (a long-poll in progress is
// abandoned), every batch being handled is finished and settled, then Run
// returns nil. Stop does not wait; it is safe to call from a handler.
func (c *Consumer) Stop() { c.once.Do(func() { close(c.stop) }) }

// Run handles messages until Stop (then it returns nil once in-flight work
// is settled) or until ctx ends (then handlers see ctx cancelled, nothing
// more is settled, and their messages come back when their leases run out).
// A pop the broker refuses for good (an invalid request) ends Run with
// that error.
func (c *Consumer) Run(ctx context.Context, h Handler) error {
	return c.run(ctx, func(ctx context.Context, msgs []*Message) { c.handle(ctx, h, msgs) })
}

// run pops with every worker and hands each batch to settle.
func (c *Consumer) run(ctx context.Context, settle func(ctx context.Context, msgs []*Message)) error {
	popCtx, cancelPops := context.WithCancel(ctx)
	defer cancelPops()
	go func() {
		select {
		case <-c.stop:
			cancelPops()
		case <-popCtx.Done():
		}
	}()
	errs := make(chan error, c.o.Concurrency)
	var wg sync.WaitGroup
	for range c.o.Concurrency {
		wg.Go(func() { errs <- c.work(ctx, popCtx, settle) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Consumer) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// work is one worker: pop, handle, settle, until stopped.
func (c *Consumer) work(ctx, popCtx context.Context, settle func(ctx context.Context, msgs []*Message)) error {
	for !c.stopped() && ctx.Err() == nil {
		msgs, err := c.q.Pop(popCtx, PopOptions{Group: c.o.Group, Partition: c.o.Partition, Batch: c.o.Batch,
			Wait: c.o.Wait, Subscription: c.o.Subscription, SubscriptionFrom: c.o.SubscriptionFrom})
		switch {
		case popCtx.Err() != nil:
			return nil
		case err != nil && !c.q.c.retry.retries(err):
			c.Stop()
			return err
		case err != nil:
			c.report(err)
			c.pause(ctx, time.Second)
			continue
		}
		if len(msgs) > 0 {
			settle(ctx, msgs)
		}
	}
	return nil
}

func (c *Consumer) report(err error) {
	if c.o.OnError != nil && err != nil {
		c.o.OnError(err)
	}
}

func (c *Consumer) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-c.stop:
	case <-t.C:
	}
}

// handle runs the handler over one batch in order while its lease is
// renewed, then settles what the handler left unsettled in one request.
func (c *Consumer) handle(ctx context.Context, h Handler, msgs []*Message) {
	stopRenew := c.renew(ctx, msgs[0])
	var settle []Settle
	for _, m := range msgs {
		if ctx.Err() != nil {
			break
		}
		err := h(ctx, m)
		if m.Settled() {
			if err != nil {
				break // settled by the handler, but the batch's run is over
			}
			continue
		}
		if err == nil {
			settle = append(settle, Settle{Message: m})
			continue
		}
		settle = append(settle, Settle{Message: m, Status: Failed, Reason: err.Error()})
		break // the failed ack releases the lease: the rest comes back
	}
	stopRenew()
	if len(settle) == 0 || ctx.Err() != nil {
		return
	}
	res, err := c.q.c.AckBatch(ctx, settle)
	c.report(err)
	for i, r := range res {
		if !r.Success {
			c.report(&AckError{TransactionID: settle[i].Message.TransactionID, Message: r.Error})
		}
	}
}

// renew extends the batch's lease until the returned func is called.
func (c *Consumer) renew(ctx context.Context, m *Message) (stop func()) {
	if m.LeaseID == "" || c.o.RenewEvery < 0 {
		return func() {}
	}
	length := time.Until(m.LeaseExpiresAt)
	if length <= 0 || m.LeaseExpiresAt.IsZero() {
		length = 2 * time.Second // clocks disagree: renew often
	}
	every := c.o.RenewEvery
	if every == 0 {
		every = length / 2
	}
	every = max(every, 100*time.Millisecond)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			_, err := c.q.c.ExtendLease(rctx, m.LeaseID, max(length, every*2))
			if errors.Is(err, ErrLeaseLost) {
				c.report(err)
				return
			}
			if rctx.Err() == nil {
				c.report(err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Package queen is a Go client for queen-node, over the Queen HTTP API or
// over gRPC (queen.v1) with the same behaviour on both:
//
//	c, err := queen.New("http://127.0.0.1:6632") // or "grpc://127.0.0.1:6633"
//	if err != nil { ... }
//	defer c.Close()
//
//	orders := c.Queue("orders")
//	_ = orders.Configure(ctx, queen.LeaseTime(30*time.Second), queen.RetryLimit(5))
//	_, err = orders.Push(ctx, queen.Msg{TransactionID: "order-1", Data: order})
//
//	// Charge each order once: the marker and the ack commit together.
//	cons := orders.Consumer(queen.ConsumerOptions{Group: "charger", Subscription: queen.SubscribeAll})
//	go func() { <-shutdown; cons.Stop() }() // finish what is in hand, pop nothing new
//	err = cons.Run(ctx, func(ctx context.Context, m *queen.Message) error {
//		if done, err := c.KV().Get(ctx, "charges", m.TransactionID); err != nil || done.Found {
//			return err // charged before: returning nil acks it
//		}
//		chargeID, err := charge(m)
//		if err != nil {
//			return err // nack: the order comes back after the queue's retryDelay
//		}
//		res, err := c.Transaction().
//			KV().PutIfAbsent("charges", m.TransactionID, chargeID, time.Hour, true).
//			Ack(m).
//			Commit(ctx)
//		if err != nil {
//			return err // e.g. *queen.RejectedAckError: the lease ran out, nothing was written
//		}
//		if res.Precondition != nil {
//			return nil // another delivery committed first: ack this one
//		}
//		return nil // committed: m is settled
//	})
//
// Timers (addendum §1–§2) schedule a message for later, on their own or in
// the same transaction as the step that decides them:
//
//	res, err := c.Transaction().
//		IdempotencyKey("reserve/"+m.TransactionID+"/"+m.LeaseID). // a retry is answered from the record
//		KV().PutIfAbsent("bookings", "booking:"+id, reserved, time.Hour, true).
//		Timers(queen.ScheduleTimer("releases", "booking/"+id, 15*time.Minute, release)).
//		Ack(m).
//		Commit(ctx)
//	// ... and when the payment comes: queen.CancelTimer("releases", "booking/"+id)
//	t, err := c.Timers().Get(ctx, "releases", "booking/"+id)      // t.Found, t.DeliverAt, ...
//	n, err := c.Timers().Count(ctx, "releases", "booking/")
//
// What the client adds over raw HTTP:
//
//   - Push mints a UUIDv7 transactionId for every message that has none, so
//     a retried push is deduplicated by the broker instead of stored twice;
//     ScheduleTimer mints the timer's txn the same way.
//   - Calls are retried with exponential backoff and jitter on HTTP 5xx,
//     gRPC UNAVAILABLE, a connection lost on the way and an
//     Idempotency-Key still in flight only (RetryPolicy), never on a 4xx or
//     INVALID_ARGUMENT (a 429 only with RetryPolicy.RateLimited), and every
//     call takes a context. The policy can also bound each send
//     (AttemptTimeout), retry until the context ends (MaxAttempts < 0) and
//     count the retries (OnRetry).
//   - Tx.IdempotencyKey sends a commit with an Idempotency-Key (header or
//     metadata): a retry is answered from the broker's record
//     (TxResult.Replayed), and the key reused with another body is refused
//     (ErrIdempotencyKeyReused).
//   - A Consumer runs a handler with a number of workers and a batch size,
//     renews each batch's lease while the handler runs, acks what succeeded
//     and nacks what failed with the error's text, and stops gracefully.
//   - A transaction builder (Tx) whose Commit returns a lost KV gate as a
//     value (TxResult.Precondition) and the refusals as typed errors
//     (*RejectedAckError, *DuplicateError).
//   - Errors carry one gRPC code on both transports (Code(err)).
//
// Both transports offer the same calls, with one exception: Queue.Stats
// (the queue detail's message counts) exists on the HTTP API only, and over
// gRPC it fails with UNIMPLEMENTED.
package queen

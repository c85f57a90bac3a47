package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

func (r *run) scenario(ctx context.Context) error {
	q := r.c.Queue(r.queue)
	if err := q.Configure(ctx, queen.LeaseTime(30*time.Second), queen.RetryLimit(5), queen.RetryDelay(time.Second)); err != nil {
		return err
	}
	r.created = true
	fmt.Fprintln(r.out, "\nqueuing orders")
	for i, id := range orderIDs {
		if _, err := q.Push(ctx, queen.Msg{TransactionID: "order-" + id, Data: order{OrderID: id, Cents: 1000 + i}}); err != nil {
			return err
		}
	}
	fmt.Fprintf(r.out, "  %d orders queued\n", len(orderIDs))

	fmt.Fprintln(r.out, "\ncharging")
	// Six deliveries: five orders plus the retry of ORD-3.
	if err := r.consume(ctx, "charger", len(orderIDs)+1, r.chargeDelivery); err != nil {
		return err
	}
	charged := r.decided("charger")
	if err := r.check(charged == len(orderIDs), fmt.Sprintf("the charger decided every order (%d, got %d)", len(orderIDs), charged)); err != nil {
		return err
	}

	// A second group reads the same orders from the beginning: the same
	// messages, the same handler, and only the markers stand between them
	// and a second charge.
	fmt.Fprintln(r.out, "\nreplaying")
	if err := r.consume(ctx, "replay", len(orderIDs), r.replayDelivery); err != nil {
		return err
	}
	fmt.Fprintln(r.out, "\nchecking")
	return r.verify(ctx)
}

// consume runs one group over the orders until it has seen limit
// deliveries (then it stops gracefully) or the phase times out.
func (r *run) consume(ctx context.Context, group string, limit int, each func(context.Context, *queen.Message) error) error {
	ctx, cancel := context.WithTimeout(ctx, r.phase)
	defer cancel()
	// One order per pop: a failed ack gives up the partition's lease, so in
	// a batch every order after a failed one would be charged, refused at
	// its commit, and charged again when it came back.
	cons := r.c.Queue(r.queue).Consumer(queen.ConsumerOptions{
		Group: group, Subscription: queen.SubscribeAll, Batch: 1, Wait: 5 * time.Second})
	deliveries := 0
	var fatal error
	err := cons.Run(ctx, func(ctx context.Context, m *queen.Message) error {
		deliveries++
		if deliveries >= limit {
			cons.Stop() // finish this one, pop nothing more
		}
		err := each(ctx, m)
		if errors.Is(err, errCardTimeout) {
			return err // the consumer nacks it: failed, with this text; it comes back after retryDelay
		}
		if err != nil {
			fatal = err
			cons.Stop()
		}
		return err
	})
	return errors.Join(err, fatal)
}

// handle is the whole pattern, four steps in this order. ran reports
// whether this delivery charged the card; every redelivery, whatever its
// cause, must come back with ran=false.
func (r *run) handle(ctx context.Context, m *queen.Message) (ran bool, err error) {
	var o order
	if err := m.Decode(&o); err != nil {
		return false, err
	}
	r.attempts[o.OrderID]++

	// 1. Was this order charged already? Found is its own field because null
	//    is a value you can store. Returning without settling lets the
	//    consumer ack it: it must leave this group's cursor.
	mk, err := r.c.KV().Get(ctx, r.ns, markerKey(o.OrderID))
	if err != nil || mk.Found {
		return false, err
	}
	// 2. Everything that can fail without touching the card goes here, before
	//    the charge. This is where ORD-3 fails, once.
	if o.OrderID == crashingOrder && r.attempts[o.OrderID] == 1 {
		return false, errCardTimeout
	}
	// 3. The external effect.
	chargeID := r.chargeCard(o)
	// 4. The marker and the ack, in ONE transaction. The required
	//    putIfAbsent is a gate: if the marker exists (another delivery got
	//    here first) nothing is written, the ack included, and Commit
	//    returns the lost gate as a value. The ack carries this delivery's
	//    lease: if it ran out while the card was charged, Commit fails with
	//    a *queen.RejectedAckError and writes nothing.
	res, err := r.c.Transaction().
		KV().PutIfAbsent(r.ns, markerKey(o.OrderID), marker{ChargeID: chargeID, Cents: o.Cents}, time.Hour, true).
		Ack(m).
		Commit(ctx)
	if err != nil {
		return false, err
	}
	return res.Precondition == nil, nil // a lost gate: the consumer acks this copy
}

func (r *run) chargeDelivery(ctx context.Context, m *queen.Message) error {
	ran, err := r.handle(ctx, m)
	var o order
	m.Decode(&o)
	if errors.Is(err, errCardTimeout) {
		fmt.Fprintf(r.out, "  %s: %v (will be redelivered)\n", o.OrderID, err)
		// The moment to check the claim: right after a failure before the commit.
		mk, gerr := r.c.KV().Get(ctx, r.ns, markerKey(o.OrderID))
		if gerr != nil {
			return gerr
		}
		if cerr := r.check(!mk.Found, o.OrderID+" failed before its commit and left no marker behind"); cerr != nil {
			return cerr
		}
		return err
	}
	if err != nil {
		return err
	}
	r.seen = append(r.seen, observed{group: "charger", orderID: o.OrderID, ran: ran})
	verdict := "charged"
	if !ran {
		verdict = "already charged, skipped"
	}
	fmt.Fprintf(r.out, "  %s: %s\n", o.OrderID, verdict)
	return nil
}

func (r *run) replayDelivery(ctx context.Context, m *queen.Message) error {
	ran, err := r.handle(ctx, m)
	if err != nil {
		return err
	}
	var o order
	m.Decode(&o)
	r.seen = append(r.seen, observed{group: "replay", orderID: o.OrderID, ran: ran})
	fmt.Fprintf(r.out, "  %s: ran == %v\n", o.OrderID, ran)
	return nil
}

func (r *run) decided(group string) int {
	n := 0
	for _, o := range r.seen {
		if o.group == group {
			n++
		}
	}
	return n
}

// verify runs the closing checks, the seed's.
func (r *run) verify(ctx context.Context) error {
	perOrder := map[string]int{}
	for _, c := range r.ledger {
		perOrder[c.orderID]++
	}
	once := len(r.ledger) == len(orderIDs)
	for _, id := range orderIDs {
		once = once && perOrder[id] == 1
	}
	replayed, ranAgain := 0, false
	for _, o := range r.seen {
		if o.group == "replay" {
			replayed++
			ranAgain = ranAgain || o.ran
		}
	}
	keys := make([]string, len(orderIDs))
	for i, id := range orderIDs {
		keys[i] = markerKey(id)
	}
	markers, err := r.c.KV().GetMany(ctx, r.ns, keys...)
	if err != nil {
		return err
	}
	named := len(markers.Rows) > 0
	for _, row := range markers.Rows {
		var mk marker
		row.Decode(&mk)
		named = named && slices.ContainsFunc(r.ledger, func(c charge) bool { return c.chargeID == mk.ChargeID })
	}
	for _, c := range []struct {
		ok   bool
		what string
	}{
		{once, fmt.Sprintf("%d orders, %d charges, one per order", len(orderIDs), len(r.ledger))},
		{r.attempts[crashingOrder] >= 2, crashingOrder + " came back after its failure and was charged then"},
		{replayed == len(orderIDs) && !ranAgain, fmt.Sprintf("the replay received all %d orders and charged none of them", len(orderIDs))},
		{len(markers.Rows) == len(orderIDs) && len(markers.Missing) == 0, fmt.Sprintf("every order has its marker (%d)", len(markers.Rows))},
		{named, "each marker names the charge that was made"},
	} {
		if err := r.check(c.ok, c.what); err != nil {
			return err
		}
	}
	parts := make([]string, len(r.ledger))
	for i, c := range r.ledger {
		parts[i] = c.orderID + "=" + c.chargeID
	}
	fmt.Fprintf(r.out, "\n  ledger: %s\n", strings.Join(parts, ", "))
	return nil
}

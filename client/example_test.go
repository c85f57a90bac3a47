package queen_test

import (
	"context"
	"fmt"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// A consumer that charges each order once: the marker and the ack commit
// in one transaction, and a redelivery finds the marker.
func Example() {
	ctx := context.Background()
	c, err := queen.New("http://127.0.0.1:6632") // or "grpc://127.0.0.1:6633"
	if err != nil {
		panic(err)
	}
	defer c.Close()

	orders := c.Queue("orders")
	if _, err := orders.Push(ctx, queen.Msg{TransactionID: "order-1", Data: map[string]int{"cents": 1999}}); err != nil {
		panic(err)
	}
	cons := orders.Consumer(queen.ConsumerOptions{Group: "charger", Subscription: queen.SubscribeAll, Concurrency: 4})
	err = cons.Run(ctx, func(ctx context.Context, m *queen.Message) error {
		res, err := c.Transaction().Once("charges", m.TransactionID, time.Hour).Ack(m).Commit(ctx)
		if err != nil {
			return err // nacked: it comes back
		}
		if res.Precondition != nil {
			fmt.Println("charged before; acking the duplicate")
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
}

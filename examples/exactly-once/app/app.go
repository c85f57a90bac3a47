// Package app is "charge each order once" (the seed's scenario) written
// with the Go client: five orders, one failure before its commit, a full
// replay through a second consumer group, and checks that the ledger holds
// exactly five charges. The marker (a KV entry in the broker) and the ack
// of the order commit in one transaction, so an order is either marked and
// acknowledged or neither, and a redelivery finds the marker and charges
// nothing.
//
//	orders
//	  ├── group "charger"  marker + ack in ONE transaction
//	  └── group "replay"   reads every order again and must charge nothing
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	queen "github.com/queen-node/queen-node/client"
)

// Config says where the broker is and how to reach it.
type Config struct {
	URL       string    // http://host:port for HTTP; host:port or grpc://host:port for gRPC
	Transport string    // http | grpc
	Out       io.Writer // where the run is narrated; nil = stdout
	// PhaseTimeout bounds each consuming phase, so that a stall fails the
	// run instead of hanging it; 0 = 30s.
	PhaseTimeout time.Duration
}

var orderIDs = []string{"ORD-1", "ORD-2", "ORD-3", "ORD-4", "ORD-5"}

// crashingOrder's first attempt fails before it charges anything: the
// failure that must leave no trace at all.
const crashingOrder = "ORD-3"

var errCardTimeout = errors.New("card network timed out")

type order struct {
	OrderID string `json:"orderId"`
	Cents   int    `json:"cents"`
}

type marker struct {
	ChargeID string `json:"chargeId"`
	Cents    int    `json:"cents"`
}

type charge struct{ orderID, chargeID string }

type observed struct {
	group, orderID string
	ran            bool
}

// run is one execution's state: the broker, the names, and the external
// effect (the ledger a customer's statement would show).
type run struct {
	c        *queen.Client
	out      io.Writer
	queue    string
	ns       string
	phase    time.Duration
	created  bool // the queue exists: there is something to clean up
	ledger   []charge
	attempts map[string]int
	seen     []observed
	checks   int
}

// Run executes the scenario and returns nil when every check passed
// (having printed "PASS: n checks"), or the first failure (having printed
// "FAIL: ...").
func Run(ctx context.Context, cfg Config) error {
	r := &run{out: cfg.Out, phase: cfg.PhaseTimeout, attempts: map[string]int{}}
	if r.out == nil {
		r.out = os.Stdout
	}
	if r.phase <= 0 {
		r.phase = 30 * time.Second
	}
	target, err := targetOf(cfg)
	if err != nil {
		return err
	}
	if r.c, err = queen.New(target); err != nil {
		return err
	}
	defer r.c.Close()
	// A fresh queue and KV namespace per run: markers outlive the queue
	// (they expire with their TTL), so a second run in the same namespace
	// would find every order charged and pass without charging anything.
	id := strconv.FormatInt(time.Now().UnixMilli(), 36) + "-" + strconv.FormatUint(rand.Uint64N(1<<20), 36)
	r.queue, r.ns = "app-go-exactly-once-"+id, "app-go-exactly-once-"+id
	fmt.Fprintf(r.out, "broker %s (%s)\n", target, cfg.Transport)

	err = r.scenario(ctx)
	if r.created {
		r.cleanup()
	}
	if err != nil {
		fmt.Fprintf(r.out, "\nFAIL: %v\n", err)
		return err
	}
	fmt.Fprintf(r.out, "\nPASS: %d checks\n", r.checks)
	return nil
}

func targetOf(cfg Config) (string, error) {
	switch cfg.Transport {
	case "http", "":
		if !strings.Contains(cfg.URL, "://") {
			return "http://" + cfg.URL, nil
		}
		return cfg.URL, nil
	case "grpc":
		return "grpc://" + strings.TrimPrefix(cfg.URL, "grpc://"), nil
	}
	return "", fmt.Errorf("transport %q: want http or grpc", cfg.Transport)
}

// check records one verified fact, or fails the run.
func (r *run) check(ok bool, description string) error {
	if !ok {
		return errors.New(description)
	}
	r.checks++
	fmt.Fprintf(r.out, "  ok: %s\n", description)
	return nil
}

func markerKey(orderID string) string { return "charge:" + orderID }

// chargeCard is the external effect: each call is a charge on a real card.
func (r *run) chargeCard(o order) string {
	id := fmt.Sprintf("ch_%s_%d", o.OrderID, len(r.ledger))
	r.ledger = append(r.ledger, charge{orderID: o.OrderID, chargeID: id})
	return id
}

// cleanup removes the markers (deleting the queue does not) and the queue,
// failed runs included.
func (r *run) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for _, id := range orderIDs {
		if _, derr := r.c.KV().Delete(ctx, r.ns, markerKey(id)); err == nil {
			err = derr
		}
	}
	if derr := r.c.Queue(r.queue).Delete(ctx); err == nil {
		err = derr
	}
	if err != nil {
		fmt.Fprintf(r.out, "  (cleanup incomplete: %v)\n", err)
	}
}

// Package app is "charge each order once" (the seed's scenario) for Kafka
// users: a franz-go consume-transform-produce loop against queen-node's
// Kafka listener. A charger reads orders from a topic and, for each one,
// produces a charge record (key = the order id) to a second topic; the
// charges and the input offsets commit in ONE Kafka transaction, which the
// broker writes as one Raft entry. So an order is either charged and
// consumed or neither, and a restarted charger resumes from the committed
// offsets and charges nothing twice.
//
//	orders ──► charger (GroupTransactSession) ──► charges
//	           charges + input offsets in ONE transaction
//
// The scenario: a zombie charger that stalls mid-transaction, a charger
// that crashes before its commit, a new instance that resumes and charges
// everything, the zombie waking up (it must be fenced), and a restart from
// the committed offsets (it must charge nothing). Then the charges topic,
// read with read_committed from the start, must hold exactly one charge per
// order.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config says where the broker is and how big the run is.
type Config struct {
	Seeds  []string  // the brokers' Kafka addresses (host:port); empty = 127.0.0.1:9092
	Orders int       // orders produced; 0 = 50
	Out    io.Writer // where the run is narrated; nil = stdout
	// PhaseTimeout bounds each phase, so that a stall fails the run
	// instead of hanging it; 0 = 30s.
	PhaseTimeout time.Duration
}

// partitions of both topics: enough that a transaction spans several.
const partitions = 3

// batch is the most orders one transaction charges.
const batch = 10

type order struct {
	OrderID string `json:"orderId"`
	Cents   int    `json:"cents"`
}

type charge struct {
	OrderID  string `json:"orderId"`
	Cents    int    `json:"cents"`
	ChargeID string `json:"chargeId"`
	By       string `json:"by"` // the charger instance that made it
}

// run is one execution's state: the broker, the names, and what the
// chargers did.
type run struct {
	out     io.Writer
	seeds   []string
	n       int
	phase   time.Duration
	orders  string // topic
	charges string // topic
	group   string
	txnID   string
	admin   *kgo.Client
	adm     *kadm.Client
	created bool // the topics exist: there is something to clean up
	checks  int
}

// Run executes the scenario and returns nil when every check passed
// (having printed "PASS: n checks"), or the first failure (having printed
// "FAIL: ...").
func Run(ctx context.Context, cfg Config) error {
	r := &run{out: cfg.Out, seeds: cfg.Seeds, n: cfg.Orders, phase: cfg.PhaseTimeout}
	if r.out == nil {
		r.out = os.Stdout
	}
	if len(r.seeds) == 0 {
		r.seeds = []string{"127.0.0.1:9092"}
	}
	if r.n <= 0 {
		r.n = 50
	}
	if r.phase <= 0 {
		r.phase = 30 * time.Second
	}
	// Fresh names per run: a second run against the same broker would
	// otherwise find the first run's orders, charges and offsets.
	id := strconv.FormatInt(time.Now().UnixMilli(), 36) + "-" + strconv.FormatUint(rand.Uint64N(1<<20), 36)
	r.orders, r.charges = "orders-"+id, "charges-"+id
	r.group, r.txnID = "charger-"+id, "charger-"+id
	fmt.Fprintf(r.out, "broker %v (Kafka protocol)\n", r.seeds)
	fmt.Fprintf(r.out, "topics %s, %s; group and transactional id %s\n", r.orders, r.charges, r.group)

	var err error
	if r.admin, err = r.client(); err != nil {
		fmt.Fprintf(r.out, "\nFAIL: %v\n", err)
		return err
	}
	defer r.admin.Close()
	r.adm = kadm.NewClient(r.admin)

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

// check records one verified fact, or fails the run.
func (r *run) check(ok bool, description string) error {
	if !ok {
		return errors.New(description)
	}
	r.checks++
	fmt.Fprintf(r.out, "  ok: %s\n", description)
	return nil
}

// client is a franz-go client of the brokers with opts.
func (r *run) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(r.base(), opts...)...)
}

func (r *run) base() []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(r.seeds...), kgo.RequestTimeoutOverhead(5 * time.Second), kgo.RetryTimeout(20 * time.Second)}
}

func orderID(i int) string { return "ORD-" + strconv.Itoa(i+1) }

// readAll calls fn for every record of topic, from the start to the end
// offsets it has now, read at level.
func (r *run) readAll(ctx context.Context, topic string, level kgo.IsolationLevel, fn func(*kgo.Record)) error {
	ctx, cancel := context.WithTimeout(ctx, r.phase)
	defer cancel()
	ends, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	if err := ends.Error(); err != nil {
		return err
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 1 { // queen-node offsets start at 1: an end of 1 is an empty partition
			left[o.Partition] = o.Offset
		}
	})
	if len(left) == 0 {
		return nil
	}
	cl, err := r.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(left) > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			return err
		}
		fs.EachRecord(func(rec *kgo.Record) {
			fn(rec)
			if end, ok := left[rec.Partition]; ok && rec.Offset+1 >= end {
				delete(left, rec.Partition)
			}
		})
	}
	if len(left) > 0 {
		return fmt.Errorf("topic %s: partitions %v not read to their end within %v", topic, left, r.phase)
	}
	return nil
}

// count is how many records topic holds at level.
func (r *run) count(ctx context.Context, topic string, level kgo.IsolationLevel) (int, error) {
	n := 0
	err := r.readAll(ctx, topic, level, func(*kgo.Record) { n++ })
	return n, err
}

// committed is how many orders the group's committed offsets have moved
// past (an offset N means "the next to read is N", and the first is 1).
func (r *run) committed(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.phase)
	defer cancel()
	offs, err := r.adm.FetchOffsetsForTopics(ctx, r.group, r.orders)
	if err != nil {
		return 0, err
	}
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At > 1 {
			total += o.At - 1
		}
	})
	return total, nil
}

// cleanup deletes both topics (with them the group's positions), failed
// runs included.
func (r *run) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := r.adm.DeleteTopics(ctx, r.orders, r.charges)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		fmt.Fprintf(r.out, "  (cleanup incomplete: %v)\n", err)
	}
}

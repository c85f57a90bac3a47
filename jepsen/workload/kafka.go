package workload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/queen-node/queen-node/jepsen/history"
)

// kafkaWL drives the node's Kafka listener with franz-go, as Kafka users
// do, under faults:
//
//   - a producer (idempotent, acks=all, the franz-go default) writes numbered
//     records to an input topic of three partitions;
//   - transformers consume the input in one consumer group and, per poll,
//     write one output record per input record and the input offsets in one
//     transaction (GroupTransactSession: the consume-transform-produce loop
//     of Kafka Streams). Some "crash" mid-transaction (the client closed
//     without EndTxn) and come back with the same transactional id;
//   - a committer consumes the input in a second group, commits offsets
//     synchronously and restarts, checking where it resumes.
//
// The checker reads both topics at the end: every acknowledged input record
// is in the input once, in its partition in the order it was acknowledged;
// every input record is in the output exactly once (transactions never
// replay nor lose an input, even across fencing and failover); every
// transaction found in the output is there whole (no half-visible
// transaction) and no transaction closed before its EndTxn is there; no
// acknowledged group commit is lost (a restarted consumer resumes at or
// after it).
type kafkaWL struct {
	in, out, txGroup, plainGroup string
	parts                        int32

	mu       sync.Mutex
	acked    map[int]bool    // input numbers acknowledged
	ackOrder map[int32][]int // partition → numbers in the order their acks returned (one producer, in order)
	unknown  map[int]bool    // input numbers whose produce stayed unknown
	// crashed: tags of transactions closed without EndTxn (definitely not
	// committed). An End that reports "not committed" is not definite:
	// franz-go says so also after an EndTxn whose outcome was unknown
	// (UNKNOWN_SERVER_ERROR), rewinding to the committed offsets.
	crashed      map[string]bool
	notCommitted int
	floor        map[int32]int64 // committer group: highest acknowledged committed offset per partition
	commitLost   []string

	txns                  atomic.Int64 // numbers the transactions (their tags)
	inputRecs, outputRecs map[int32][]*kgo.Record
	finishErr             error
}

func newKafka() *kafkaWL {
	return &kafkaWL{parts: 3, acked: map[int]bool{}, ackOrder: map[int32][]int{}, unknown: map[int]bool{},
		crashed: map[string]bool{}, floor: map[int32]int64{}}
}

func (k *kafkaWL) Name() string { return "kafka" }

// kafkaOpts are every client's options: every node is a seed, and the
// timeouts are short enough that a fault ends an operation as unknown
// rather than stalling the run.
func kafkaOpts(env *Env, extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(env.Cluster.KafkaAddrs()...), kgo.RequestTimeoutOverhead(3 * time.Second),
		kgo.RetryTimeout(8 * time.Second), kgo.DialTimeout(2 * time.Second), kgo.MetadataMinAge(250 * time.Millisecond)}, extra...)
}

func (k *kafkaWL) Setup(ctx context.Context, env *Env) error {
	k.in = fmt.Sprintf("jepsen-kafka-in-%d", env.Seed)
	k.out = fmt.Sprintf("jepsen-kafka-out-%d", env.Seed)
	k.txGroup = fmt.Sprintf("jepsen-kafka-tx-%d", env.Seed)
	k.plainGroup = fmt.Sprintf("jepsen-kafka-commits-%d", env.Seed)
	cl, err := kgo.NewClient(kafkaOpts(env)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range []string{k.in, k.out} {
		if err := retryDefinite(ctx, func() (bool, error) {
			res, err := adm.CreateTopic(ctx, k.parts, -1, nil, t)
			if err == nil && res.Err != nil && !errors.Is(res.Err, kerr.TopicAlreadyExists) {
				err = res.Err
			}
			return err == nil, err
		}); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

func (k *kafkaWL) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); k.produce(ctx, env) }()
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); k.transformLoop(ctx, env, i, true) }(i)
	}
	wg.Add(1)
	go func() { defer wg.Done(); k.commitLoop(ctx, env) }()
	wg.Wait()
}

// produce writes numbered records, one at a time: each ack is definite.
func (k *kafkaWL) produce(ctx context.Context, env *Env) {
	cl, err := kgo.NewClient(kafkaOpts(env, kgo.DefaultProduceTopic(k.in), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(8*time.Second))...)
	if err != nil {
		env.Logf("kafka: producer: %v", err)
		return
	}
	defer cl.Close()
	id := 1000
	for n := 0; ctx.Err() == nil; n++ {
		p := int32(n) % k.parts
		op := env.Rec.Begin(id, "kafka-produce", n)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := cl.ProduceSync(pctx, &kgo.Record{Partition: p, Key: []byte(strconv.Itoa(n)), Value: []byte(strconv.Itoa(n))}).First()
		cancel()
		k.mu.Lock()
		if err == nil {
			op.End(history.OK, r.Offset, nil)
			k.acked[n] = true
			k.ackOrder[p] = append(k.ackOrder[p], n)
		} else {
			op.End(history.Unknown, nil, err)
			k.unknown[n] = true
		}
		k.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

func (k *kafkaWL) session(env *Env, i int) (*kgo.GroupTransactSession, error) {
	return kgo.NewGroupTransactSession(kafkaOpts(env,
		kgo.TransactionalID(fmt.Sprintf("jepsen-kafka-%d-%d", env.Seed, i)), kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(k.txGroup), kgo.ConsumeTopics(k.in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(time.Second),
		kgo.FetchMaxWait(500*time.Millisecond))...)
}

// transformLoop runs transformer sessions until ctx ends; with crashes a
// session is sometimes closed mid-transaction and replaced.
func (k *kafkaWL) transformLoop(ctx context.Context, env *Env, i int, crashes bool) {
	rng := env.Rand(500 + i)
	for ctx.Err() == nil {
		s, err := k.session(env, i)
		if err != nil {
			env.Logf("kafka: transformer %d: %v", i, err)
			return
		}
		for ctx.Err() == nil {
			crash := crashes && rng.Intn(12) == 0
			if !k.transform(ctx, env, s, i, crash) {
				break
			}
		}
		s.Close()
	}
}

// transform is one poll and one transaction; false when the session
// should be replaced (a crash, or a failure the session cannot go on from).
func (k *kafkaWL) transform(ctx context.Context, env *Env, s *kgo.GroupTransactSession, i int, crash bool) bool {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	fs := s.PollRecords(pctx, 20)
	cancel()
	var recs []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	if len(recs) == 0 {
		return ctx.Err() == nil
	}
	if err := s.Begin(); err != nil {
		env.Logf("kafka: begin: %v", err)
		return false
	}
	tag := fmt.Sprintf("%d-%d-%d", env.Seed, i, k.txns.Add(1))
	var wg sync.WaitGroup
	for _, r := range recs {
		wg.Add(1)
		s.Produce(ctx, &kgo.Record{Topic: k.out, Key: r.Key, Value: r.Value, Headers: []kgo.RecordHeader{
			{Key: "txn", Value: []byte(tag)}, {Key: "size", Value: []byte(strconv.Itoa(len(recs)))}}},
			func(*kgo.Record, error) { wg.Done() })
	}
	wg.Wait()
	if crash {
		k.mu.Lock()
		k.crashed[tag] = true // closed without EndTxn: nothing of it may appear
		k.mu.Unlock()
		return false
	}
	op := env.Rec.Begin(2000+i, "kafka-txn", tag)
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	committed, err := s.End(ectx, kgo.TryCommit)
	cancel()
	switch {
	case err != nil:
		op.End(history.Unknown, nil, err)
		return false
	case committed:
		op.End(history.OK, len(recs), nil)
	default:
		op.End(history.Unknown, "not committed (aborted, or a commit the broker could not confirm)", nil)
		k.mu.Lock()
		k.notCommitted++
		k.mu.Unlock()
	}
	return true
}

// commitLoop runs short consumer sessions in the committer group.
func (k *kafkaWL) commitLoop(ctx context.Context, env *Env) {
	rng := env.Rand(900)
	for ctx.Err() == nil {
		cl, err := kgo.NewClient(kafkaOpts(env, kgo.ConsumerGroup(k.plainGroup), kgo.ConsumeTopics(k.in),
			kgo.DisableAutoCommit(), kgo.SessionTimeout(6*time.Second), kgo.FetchMaxWait(500*time.Millisecond))...)
		if err != nil {
			env.Logf("kafka: committer: %v", err)
			return
		}
		k.mu.Lock()
		floor := map[int32]int64{}
		for p, o := range k.floor {
			floor[p] = o
		}
		k.mu.Unlock()
		seen := map[int32]bool{}
		last := map[int32]*kgo.Record{}
		end := time.Now().Add(time.Duration(500+rng.Intn(2000)) * time.Millisecond)
		for time.Now().Before(end) && ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				if !seen[r.Partition] {
					seen[r.Partition] = true
					if f, ok := floor[r.Partition]; ok && r.Offset < f {
						k.mu.Lock()
						k.commitLost = append(k.commitLost, fmt.Sprintf("committer group resumed partition %d at offset %d below the acknowledged commit %d", r.Partition, r.Offset, f))
						k.mu.Unlock()
					}
				}
				last[r.Partition] = r
			})
		}
		if len(last) > 0 {
			var rs []*kgo.Record
			for _, r := range last {
				rs = append(rs, r)
			}
			op := env.Rec.Begin(3000, "kafka-commit", len(rs))
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := cl.CommitRecords(cctx, rs...)
			cancel()
			if err == nil {
				op.End(history.OK, nil, nil)
				k.mu.Lock()
				for _, r := range rs {
					if r.Offset+1 > k.floor[r.Partition] {
						k.floor[r.Partition] = r.Offset + 1
					}
				}
				k.mu.Unlock()
			} else {
				op.End(history.Unknown, nil, err)
			}
		}
		cl.Close()
	}
}

// Finish lets one transformer (with a transactional id of the load's, so it
// fences a zombie of it) consume the input to its end, then reads both
// topics.
func (k *kafkaWL) Finish(ctx context.Context, env *Env) error {
	cl, err := kgo.NewClient(kafkaOpts(env)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); k.transformLoop(tctx, env, 0, false) }()
	err = retryDefinite(ctx, func() (bool, error) {
		ends, err := adm.ListEndOffsets(ctx, k.in)
		if err != nil {
			return false, err
		}
		got, err := adm.FetchOffsets(ctx, k.txGroup)
		if err != nil {
			return false, err
		}
		caughtUp := true
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := got.Lookup(o.Topic, o.Partition)
			if o.Err != nil || (o.Offset > 1 && (!ok || c.At < o.Offset)) {
				caughtUp = false
			}
		})
		return caughtUp, nil
	})
	stop()
	<-done
	if err != nil {
		k.finishErr = fmt.Errorf("transformers did not catch up with the input: %w", err)
	}
	if k.inputRecs, err = readTopic(ctx, env, adm, k.in); err != nil {
		return err
	}
	k.outputRecs, err = readTopic(ctx, env, adm, k.out)
	return err
}

// readTopic reads every record of a topic, up to the end offsets listed
// first.
func readTopic(ctx context.Context, env *Env, adm *kadm.Client, topic string) (map[int32][]*kgo.Record, error) {
	var ends kadm.ListedOffsets
	if err := retryDefinite(ctx, func() (bool, error) {
		var err error
		ends, err = adm.ListEndOffsets(ctx, topic)
		return err == nil && ends.Error() == nil, err
	}); err != nil {
		return nil, err
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	cl, err := kgo.NewClient(kafkaOpts(env, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	behind := func() bool {
		for p, end := range want {
			if end > 1 && next[p] < end {
				return true
			}
		}
		return false
	}
	for behind() {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %v short of the end offsets %v", topic, next, want)
		}
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			next[r.Partition] = r.Offset + 1
		})
	}
	return out, nil
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (k *kafkaWL) Check(env *Env) Result {
	var res Result
	k.mu.Lock()
	defer k.mu.Unlock()
	res.Ops = len(k.acked) + len(k.unknown)
	if k.finishErr != nil {
		res.violate("%v", k.finishErr)
	}
	for _, v := range k.commitLost {
		res.violate("%s", v)
	}
	if k.inputRecs == nil {
		res.violate("the topics were never read back")
		return res
	}
	// The input: every ack is there once, in ack order per partition.
	inCount := map[int]int{}
	for p, rs := range k.inputRecs {
		var order []int
		for _, r := range rs {
			n, err := strconv.Atoi(string(r.Value))
			if err != nil || string(r.Key) != string(r.Value) || r.Partition != int32(n)%k.parts {
				res.violate("input partition %d offset %d holds %q/%q, not a record the producer wrote there", p, r.Offset, r.Key, r.Value)
				continue
			}
			inCount[n]++
			if k.acked[n] {
				order = append(order, n)
			}
		}
		if !sort.IntsAreSorted(order) {
			res.violate("input partition %d holds acknowledged records out of the order they were acknowledged in", p)
		}
	}
	for n := range k.acked {
		if inCount[n] == 0 {
			res.Lost++
			res.violate("acknowledged input record %d is not in the input topic", n)
		}
	}
	for n, c := range inCount {
		if c > 1 {
			res.Duplicated += c - 1
			res.violate("input record %d written %d times by an idempotent producer", n, c)
		}
	}
	// The output: each input exactly once, transactions whole.
	outCount := map[int]int{}
	txns := map[string][]*kgo.Record{}
	for _, rs := range k.outputRecs {
		for _, r := range rs {
			n, _ := strconv.Atoi(string(r.Value))
			outCount[n]++
			txns[header(r, "txn")] = append(txns[header(r, "txn")], r)
		}
	}
	for n := range inCount {
		if outCount[n] == 0 {
			res.Lost++
			res.violate("input record %d never reached the output", n)
		}
	}
	for n, c := range outCount {
		if c > 1 {
			res.Duplicated += c - 1
			res.violate("input record %d is in the output %d times (a transaction replayed it)", n, c)
		}
		if inCount[n] == 0 {
			res.violate("output holds %d, which is not in the input", n)
		}
	}
	for tag, rs := range txns {
		size, _ := strconv.Atoi(header(rs[0], "size"))
		if len(rs) != size {
			res.violate("transaction %s is half visible: %d of its %d records", tag, len(rs), size)
		}
		if k.crashed[tag] {
			res.violate("transaction %s was closed before its EndTxn, yet its records are in the output", tag)
		}
	}
	env.Logf("kafka: %d acked, %d unknown, %d input records, %d output records in %d transactions, %d not committed, %d closed before EndTxn",
		len(k.acked), len(k.unknown), len(inCount), len(outCount), len(txns), k.notCommitted, len(k.crashed))
	return res
}

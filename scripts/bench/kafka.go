package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runKafka measures the Kafka listener beside the HTTP API, in one sitting
// on the same nodes, as node CPU per message (every node's user + system
// time over the phase, divided by the messages the phase moved):
//
//	http-produce   o.conns producers push o.batch items a request over 16
//	               partitions (the push-batch shape);
//	kafka-produce  o.conns franz-go clients (idempotent, acks=all, the
//	               defaults) each buffer o.batch records over 16
//	               partitions and flush them (one Produce request);
//	               the two alternate in four rounds of o.duration/4 each
//	               (H K K H H K K H), so drift and snapshots fall on both;
//	http-consume   o.conns consumers of one group drain what http-produce
//	               wrote with pop(batch=100) + ack/batch (the pop-ack shape);
//	kafka-consume  min(o.conns, 16) franz-go consumers of one group drain
//	               what kafka-produce wrote (fetch, offsets autocommitted
//	               and committed at the end).
//
// HTTP workers spread over the nodes (worker w → node w mod N; followers
// forward), Kafka clients send to the partition leader Metadata names (the
// Raft leader), each as its users run it.
func runKafka(ctx context.Context, o *options) (*result, error) {
	if o.cluster == nil || o.secure {
		return nil, errors.New("kafka needs -start without -secure: bench turns the nodes' Kafka listeners on only then")
	}
	pids := nodePIDs(o)
	var seeds []string
	for _, n := range o.cluster.Nodes() {
		seeds = append(seeds, n.Addrs().Kafka)
	}
	errs := newTally()
	queue, topic := queueName("kafka-http"), "bench-kafka-"+runName()
	pool := newPayloadPool(o.payload)

	type phase struct {
		name  string
		msgs  int64
		secs  float64
		cpu   time.Duration
		snaps float64
	}
	var phases []*phase
	byName := map[string]*phase{}
	var requests []string
	measure := func(name string, f func() (int64, error)) error {
		before, _ := scrapeAll(ctx, o.urls)
		cpu, start := startCPU(pids), time.Now()
		n, err := f()
		p := byName[name]
		if p == nil {
			p = &phase{name: name}
			byName[name] = p
			phases = append(phases, p)
		}
		p.msgs, p.secs, p.cpu = p.msgs+n, p.secs+time.Since(start).Seconds(), p.cpu+cpu.used()
		if after, perr := scrapeAll(ctx, o.urls); perr == nil {
			if strings.HasPrefix(name, "kafka") {
				requests = append(requests, name+" Kafka requests: "+kafkaRequests(before, after))
			}
			// A snapshot (every 256 MiB of log) costs the phase it falls in
			// a quarter of its CPU: the rounds below share them out.
			const snaps = "queen_fsm_snapshot_persist_seconds_count"
			p.snaps += after.sumPrefix(snaps) - before.sumPrefix(snaps)
		}
		return err
	}
	if err := createKafkaTopic(ctx, seeds, topic); err != nil {
		return nil, err
	}
	// Produce in alternating rounds (HTTP, Kafka, Kafka, HTTP, ...): the
	// machine's drift and the snapshots the log's growth sets off fall on
	// both paths alike.
	const rounds = 4
	d := o.duration / rounds
	ps, closePushers := httpPushers(o, queue, pool)
	defer closePushers()
	cls, closeProducers, err := kafkaProducers(o, seeds, topic)
	if err != nil {
		return nil, err
	}
	defer closeProducers()
	httpRound := func() (int64, error) { return httpProduce(ctx, o, d, ps, errs) }
	kafkaRound := func() (int64, error) { return kafkaProduce(ctx, o, d, cls, pool, errs) }
	for i := range rounds {
		order := []string{"http-produce", "kafka-produce"}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, name := range order {
			f := httpRound
			if name == "kafka-produce" {
				f = kafkaRound
			}
			if err := measure(name, f); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	httpMsgs, kafkaMsgs := byName["http-produce"].msgs, byName["kafka-produce"].msgs
	if err := measure("http-consume", func() (int64, error) { return httpDrain(ctx, o, queue, httpMsgs, errs), nil }); err != nil {
		return nil, err
	}
	if err := measure("kafka-consume", func() (int64, error) { return kafkaDrain(ctx, o, seeds, topic, kafkaMsgs, errs) }); err != nil {
		return nil, err
	}
	var total int64
	var secs float64
	perMsg := map[string]float64{}
	r := newResult("kafka", o, o.conns, 0, 0, 0, errs)
	for _, p := range phases {
		total += p.msgs
		secs += p.secs
		us := 0.0
		if p.msgs > 0 {
			us = float64(p.cpu.Microseconds()) / float64(p.msgs)
		}
		perMsg[p.name] = us
		r.Extra[p.name+"_msgs"] = p.msgs
		r.Extra[p.name+"_cpu_us_per_msg"] = round(us, 2)
		r.Extra[p.name+"_snapshots"] = p.snaps
		r.notes = append(r.notes, fmt.Sprintf("%-13s %8d msgs in %5.1fs (%7.0f msg/s), node CPU %6.2fs = %6.2f µs/msg, %.0f snapshot(s) persisted",
			p.name, p.msgs, p.secs, float64(p.msgs)/max(p.secs, 1e-9), p.cpu.Seconds(), us, p.snaps))
	}
	r.notes = append(r.notes, requests...)
	for _, what := range []string{"produce", "consume"} {
		if h := perMsg["http-"+what]; h > 0 {
			ratio := perMsg["kafka-"+what] / h
			r.Extra[what+"_cpu_ratio_kafka_over_http"] = round(ratio, 3)
			r.notes = append(r.notes, fmt.Sprintf("%s: Kafka CPU per message = %.2f× HTTP's", what, ratio))
		}
	}
	r.Messages, r.Seconds = total, round(secs, 3)
	if secs > 0 {
		r.MsgPerSec = round(float64(total)/secs, 1)
	}
	r.Extra["queue"], r.Extra["topic"], r.Extra["batch"] = queue, topic, o.batch
	return r, nil
}

// kafkaRequests is the Kafka requests the nodes answered between two
// scrapes, by API.
func kafkaRequests(before, after promSamples) string {
	const name = "queen_kafka_requests_total{"
	var parts []string
	for k, v := range after {
		if strings.HasPrefix(k, name) {
			if d := v - before[k]; d > 0 {
				parts = append(parts, fmt.Sprintf("%s=%.0f", strings.TrimSuffix(strings.TrimPrefix(k, name), "}"), d))
			}
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// httpPushers are o.conns producers of queue, kept across the rounds (their
// transactionIds go on counting: a new pusher would repeat them, and the
// dedup window would answer duplicates).
func httpPushers(o *options, queue string, pool payloadPool) ([]*pusher, func()) {
	cs := newClients(o.urls, o.conns, o.timeout)
	ps := make([]*pusher, o.conns)
	for w := range ps {
		ps[w] = newPusher(cs.pick(w), queue, pushPartitions, pool, w)
		ps[w].next = w % pushPartitions
	}
	return ps, cs.close
}

// httpProduce is push-batch's load through ps for d.
func httpProduce(ctx context.Context, o *options, d time.Duration, ps []*pusher, errs *tally) (int64, error) {
	var msgs atomic.Int64
	runFor(ctx, o.conns, d, func(w int) bool {
		v, _ := ps[w].push(ctx, o.batch)
		if ctx.Err() != nil {
			return false
		}
		msgs.Add(int64(v.good))
		if v.bad > 0 {
			errs.add(v)
			return pause(ctx, errPause)
		}
		return true
	})
	return msgs.Load(), ctx.Err()
}

// httpDrain pops and acks want messages of queue in one group (or gives up
// after 3 × o.duration).
func httpDrain(ctx context.Context, o *options, queue string, want int64, errs *tally) int64 {
	cl := newClients(o.urls, o.conns, o.timeout)
	defer cl.close()
	path := "/api/v1/pop/queue/" + url.PathEscape(queue) +
		fmt.Sprintf("?batch=%d&consumerGroup=%s&subscriptionMode=all", popBatch, benchGroup)
	var acked atomic.Int64
	cs := make([]consumer, o.conns)
	runFor(ctx, o.conns, 3*o.duration, func(w int) bool {
		if acked.Load() >= want {
			return false
		}
		return cs[w].cycle(ctx, cl.pick(w), path, errs, &acked)
	})
	if n := acked.Load(); n < want {
		errs.add(failed("http drain short", fmt.Sprintf("acked %d of %d", n, want)))
	}
	return acked.Load()
}

func kafkaOpts(seeds []string, extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(10 * time.Second)}, extra...)
}

// createKafkaTopic makes topic, 16 partitions wide.
func createKafkaTopic(ctx context.Context, seeds []string, topic string) error {
	admin, err := kgo.NewClient(kafkaOpts(seeds)...)
	if err != nil {
		return err
	}
	defer admin.Close()
	res, err := kadm.NewClient(admin).CreateTopic(ctx, pushPartitions, -1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	return nil
}

// kafkaProducers are o.conns producing clients of topic, kept across the
// rounds as the HTTP pushers are.
func kafkaProducers(o *options, seeds []string, topic string) ([]*kgo.Client, func(), error) {
	cls := make([]*kgo.Client, 0, o.conns)
	closeAll := func() {
		for _, c := range cls {
			c.Close()
		}
	}
	for range o.conns {
		c, err := kgo.NewClient(kafkaOpts(seeds, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytes(4<<20), kgo.ManualFlushing())...)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cls = append(cls, c)
	}
	return cls, closeAll, nil
}

// kafkaProduce has o.conns clients each produce o.batch records a flush,
// spread over topic's partitions, for d.
func kafkaProduce(ctx context.Context, o *options, d time.Duration, cls []*kgo.Client, pool payloadPool, errs *tally) (int64, error) {
	var msgs atomic.Int64
	recs := make([][]*kgo.Record, o.conns)
	next := make([]int32, o.conns)
	for w := range recs {
		recs[w] = make([]*kgo.Record, o.batch)
		next[w] = int32(w % pushPartitions)
	}
	runFor(ctx, o.conns, d, func(w int) bool {
		for i := range recs[w] {
			recs[w][i] = &kgo.Record{Partition: next[w], Value: []byte(`{"d":"` + pool[(w*o.batch+i)%len(pool)] + `"}`)}
			next[w] = (next[w] + 1) % pushPartitions
		}
		// Buffered, then flushed together: one Produce request carries the
		// o.batch records (a batch per partition), as one push carries its
		// items.
		var bad atomic.Value
		for _, r := range recs[w] {
			cls[w].Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					bad.Store(err)
				}
			})
		}
		err := cls[w].Flush(ctx)
		if e, ok := bad.Load().(error); ok && err == nil {
			err = e
		}
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			errs.add(failed("kafka produce", err.Error()))
			return pause(ctx, errPause)
		}
		msgs.Add(int64(len(recs[w])))
		return true
	})
	return msgs.Load(), ctx.Err()
}

// kafkaDrain reads want records of topic with a group of consumers (or
// gives up after 3 × o.duration), committing their offsets.
func kafkaDrain(ctx context.Context, o *options, seeds []string, topic string, want int64, errs *tally) (int64, error) {
	dctx, cancel := context.WithTimeout(ctx, 3*o.duration)
	defer cancel()
	group := "bench-kafka-" + runName()
	var got atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(o.conns, pushPartitions); w++ {
		cl, err := kgo.NewClient(kafkaOpts(seeds, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))...)
		if err != nil {
			return got.Load(), err
		}
		wg.Go(func() {
			defer cl.Close()
			for got.Load() < want && dctx.Err() == nil {
				fs := cl.PollFetches(dctx)
				fs.EachError(func(t string, p int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						errs.add(failed("kafka fetch", err.Error()))
					}
				})
				if got.Add(int64(fs.NumRecords())) >= want {
					cancel() // the others' polls end too
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := cl.CommitUncommittedOffsets(cctx); err != nil {
				errs.add(failed("kafka commit", err.Error()))
			}
			cancel()
		})
	}
	wg.Wait()
	if n := got.Load(); n < want {
		errs.add(failed("kafka drain short", fmt.Sprintf("read %d of %d", n, want)))
	}
	return got.Load(), nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS side of the comparison: the same message size and the same
// messages in flight as queen-node's scenarios, each in NATS's own best
// shape (async publishers with a window, a pull consumer with explicit
// acks), on an R3 file stream.

type natsRun struct {
	urls    []string
	payload []byte
	dur     time.Duration
}

func (r natsRun) connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(strings.Join(r.urls, ","), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// stream creates (or replaces) an R3 file stream named name over
// subject name.>.
func (r natsRun) stream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	_ = js.DeleteStream(ctx, name)
	return js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		Storage: jetstream.FileStorage, Replicas: 3})
}

// publishAsync has publishers connections publish asynchronously with at
// most window unacknowledged messages each, for r.dur, to 16 subjects.
// It returns the messages acknowledged and the time it took.
func (r natsRun) publishAsync(ctx context.Context, name string, publishers, window int) (int64, time.Duration, error) {
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	start := time.Now()
	stop := start.Add(r.dur)
	for p := 0; p < publishers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			nc, js, err := r.connect()
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			ajs, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
			_ = js
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil; i++ {
				f, err := ajs.PublishAsync(fmt.Sprintf("%s.p%d", name, (p+i)%16), r.payload)
				if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
					continue // the window stayed full past the stall wait: try again
				}
				if err != nil {
					errs <- err
					return
				}
				go func() {
					select {
					case <-f.Ok():
						acked.Add(1)
					case <-f.Err():
					}
				}()
			}
			select {
			case <-ajs.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
			}
		}(p)
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return acked.Load(), elapsed, err
	default:
	}
	return acked.Load(), elapsed, nil
}

// fill publishes n messages (async, window 1000) as a backlog.
func (r natsRun) fill(ctx context.Context, js jetstream.JetStream, name string, n int) error {
	nc, _, err := r.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ajs, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1000))
	for i := 0; i < n; i++ {
		_, err := ajs.PublishAsync(fmt.Sprintf("%s.p%d", name, i%16), r.payload)
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			i--
			continue
		}
		if err != nil {
			return err
		}
	}
	select {
	case <-ajs.PublishAsyncComplete():
		return nil
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("nats fill: not acknowledged in time")
	}
}

// consume drains the stream with consumers workers of one durable pull
// consumer, fetching batch at a time and acking each message (explicit
// ack). It returns the messages acked and the time until the backlog of n
// was drained.
func (r natsRun) consume(ctx context.Context, js jetstream.JetStream, name string, workers, batch, n int) (int64, time.Duration, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, 0, err
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 100000})
	if err != nil {
		return 0, 0, err
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(2 * time.Minute)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
				b, err := cons.Fetch(batch, jetstream.FetchMaxWait(time.Second))
				if err != nil {
					continue
				}
				for m := range b.Messages() {
					if m.Ack() == nil {
						done.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	return done.Load(), time.Since(start), nil
}

// syncPublish publishes one message at a time, waiting for each ack, for
// r.dur, and records each publish's latency.
func (r natsRun) syncPublish(ctx context.Context, js jetstream.JetStream, name string) (*recorder, time.Duration, error) {
	rec := &recorder{}
	start := time.Now()
	for i := 0; time.Since(start) < r.dur && ctx.Err() == nil; i++ {
		t := time.Now()
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.p%d", name, i%16), r.payload); err != nil {
			return rec, time.Since(start), err
		}
		rec.add(time.Since(t))
	}
	return rec, time.Since(start), nil
}

// kvPut writes one key at a time to an R3 KV bucket for r.dur and records
// each put's latency.
func (r natsRun) kvPut(ctx context.Context, js jetstream.JetStream) (*recorder, error) {
	_ = js.DeleteKeyValue(ctx, "bench")
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "bench", Replicas: 3, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	rec := &recorder{}
	start := time.Now()
	for i := 0; time.Since(start) < r.dur && ctx.Err() == nil; i++ {
		t := time.Now()
		if _, err := kv.Put(ctx, fmt.Sprintf("k%d", i%1000), r.payload); err != nil {
			return rec, err
		}
		rec.add(time.Since(t))
	}
	return rec, nil
}

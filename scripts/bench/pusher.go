package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// payloadPool holds random ASCII strings; a message payload is
// {"d":"<one of them>"}, exactly size bytes of JSON. Strings come from a
// pool so that generating them does not steal CPU from the node.
type payloadPool []string

const poolSize = 1024

const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func newPayloadPool(size int) payloadPool {
	n := max(size-len(`{"d":""}`), 1)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	p := make(payloadPool, poolSize)
	b := make([]byte, n)
	for i := range p {
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		p[i] = string(b)
	}
	return p
}

// runID makes this run's queue names and transaction ids unique.
var runID = strconv.FormatInt(time.Now().UnixNano(), 36)

func queueName(scenario string) string { return "bench-" + scenario + "-" + runName() }

// runName is runID and a count of the names made: a scenario run twice
// against the same nodes (-vs-nats runs exactly-once twice) gets new
// queues, namespaces and transaction ids.
func runName() string { return runID + "-" + strconv.FormatInt(names.Add(1), 36) }

var names atomic.Int64

// pusher is one producer connection's state: it builds push bodies over a
// rotation of partitions and checks the answers.
type pusher struct {
	c      *client
	queue  string
	parts  int
	pool   payloadPool
	rng    *rand.Rand
	prefix string // transactionId prefix, unique per worker (queues are per run)
	seq    int64
	next   int // next partition
	body   []byte
	resp   bytes.Buffer
}

func newPusher(c *client, queue string, parts int, pool payloadPool, w int) *pusher {
	return &pusher{
		c: c, queue: queue, parts: parts, pool: pool,
		rng:    rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano()))),
		prefix: "w" + strconv.Itoa(w) + "-",
	}
}

// push sends one request of n items, item i to the next partition in the
// rotation, and checks the answer. Latency is meaningful only when the
// verdict has no failures.
func (p *pusher) push(ctx context.Context, n int) (verdict, time.Duration) {
	b := append(p.body[:0], `{"items":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"queue":`...)
		b = strconv.AppendQuote(b, p.queue)
		b = append(b, `,"partition":"p`...)
		b = strconv.AppendInt(b, int64(p.next), 10)
		b = append(b, `","transactionId":"`...)
		b = append(b, p.prefix...)
		b = strconv.AppendInt(b, p.seq, 10)
		b = append(b, `","payload":{"d":"`...)
		b = append(b, p.pool[p.rng.IntN(len(p.pool))]...)
		b = append(b, `"}}`...)
		p.next = (p.next + 1) % p.parts
		p.seq++
	}
	b = append(b, "]}"...)
	p.body = b
	status, lat, err := p.c.do(ctx, http.MethodPost, "/api/v1/push", b, &p.resp)
	if err != nil {
		return failed("push transport", err.Error()), lat
	}
	return checkPush(status, p.resp.Bytes(), n), lat
}

var (
	statusTok = []byte(`"status":`)
	queuedTok = []byte(`"status":"queued"`)
)

// checkPush wants 201 and every one of n items "queued" (spec §4.2). The
// fast path counts status fields; anything unexpected is decoded in full
// and the decode decides.
func checkPush(status int, body []byte, n int) verdict {
	if status != http.StatusCreated {
		return failed(fmt.Sprintf("push HTTP %d", status), snippet(body))
	}
	if bytes.Count(body, queuedTok) == n && bytes.Count(body, statusTok) == n {
		return verdict{good: n}
	}
	var items []struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(body, &items); err != nil {
		return failed("push bad body", err.Error()+": "+snippet(body))
	}
	if len(items) != n {
		return failed("push item count", fmt.Sprintf("sent %d items, got %d verdicts", n, len(items)))
	}
	var v verdict
	for i, it := range items {
		if it.Status == "queued" {
			v.good++
			continue
		}
		v.bad++
		v.kind = "push item " + it.Status
		v.detail = fmt.Sprintf("item %d: status %q error %q", i, it.Status, it.Error)
	}
	return v
}

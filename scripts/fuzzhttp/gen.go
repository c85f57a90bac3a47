package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The generator: for every route of the API a request of the spec's shape
// (base), filled from what the node answered before (partition ids, leases,
// KV versions, timers), and the mutations that turn it into bad input.

// base is a request of one route before it is written out.
type base struct {
	params [][2]string // path parameters, in the pattern's order: name, value (not escaped)
	query  [][2]string
	body   any  // the JSON body; nil = none
	noBody bool // (with body nil) send no body at all
	rawBod []byte
}

// lease is what a pop delivered under one lease.
type lease struct {
	id, partitionID, queue, partition, group string
	txns                                     []string
}

// msgRef names a stored message: (partitionId, transactionId), as the
// message and trace routes take it (spec §4.9, §4.15).
type msgRef struct{ partitionID, txn, queue string }

// deadLetter is a row of GET /api/v1/dlq (or of a message's deadLetters).
type deadLetter struct{ id, partitionID, txn, queue, group string }

// world is what the fuzzer knows of the node's state.
type world struct {
	partitionIDs []string          // recent partition ids
	txns         []string          // recent transaction ids
	msgs         []msgRef          // recent messages (pushes, pops, the message, DLQ and trace views)
	deadLetters  []deadLetter      // dead letters the node listed (a replay or purge drops them)
	traceNames   []string          // trace names recorded or listed
	permits      map[string]permit // lock name → the permit an acquire or renew answered
	leases       []lease           // recent leases (newest last)
	kvVersions   map[string]int64  // "ns/key" → the version a write answered
	backup       []byte            // a backup the node served
	keys         []string          // recent Idempotency-Keys
	nodeID       string            // never the id of a voter removal
}

// permit is a lock's permit as an acquire or a renew answered it.
type permit struct {
	slot, token int64
	owner       string
}

func newWorld(nodeID string) *world {
	return &world{kvVersions: map[string]int64{}, permits: map[string]permit{}, nodeID: nodeID}
}

func keepLast[T any](xs []T, n int) []T {
	if len(xs) > n {
		return append([]T(nil), xs[len(xs)-n:]...)
	}
	return xs
}

// Names the requests use: few, so that requests meet each other's state.
var (
	queueNames = []string{"fz.a", "fz.b", "fz.c", "orders", "fz.enc", "fz.ret", "fz.ü"}
	partNames  = []string{"Default", "p1", "p2", "p/3"}
	groupNames = []string{"", "", "g1", "g2", "__QUEUE_MODE__"}
	kvNS       = []string{"fz", "fz.b", "charges"}
	kvKeys     = []string{"k0", "k1", "k2", "k3", "a/b/c", "charge:1", "ü"}
	timerKeys  = []string{"t0", "t1", "t2", "t/3"}
)

type gen struct {
	r     *rand.Rand
	w     *world
	seq   int
	start time.Time // the times in requests are around it
}

func (g *gen) queue() string { return pick(g.r, queueNames) }
func (g *gen) part() string  { return pick(g.r, partNames) }
func (g *gen) group() string { return pick(g.r, groupNames) }

func (g *gen) txn() string {
	if len(g.w.txns) > 0 && g.r.IntN(4) == 0 {
		return pick(g.r, g.w.txns)
	}
	g.seq++
	return fmt.Sprintf("fz-%d-%d", g.r.Uint32(), g.seq)
}

func (g *gen) uuid() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (g *gen) partitionID() string {
	if len(g.w.partitionIDs) > 0 && g.r.IntN(5) != 0 {
		return pick(g.r, g.w.partitionIDs)
	}
	return g.uuid()
}

func (g *gen) lease() lease {
	if len(g.w.leases) > 0 && g.r.IntN(6) != 0 {
		// Mostly the newest: an older one has often been acked already.
		n := len(g.w.leases)
		return g.w.leases[max(n-1-g.r.IntN(3), 0)]
	}
	return lease{id: g.uuid(), partitionID: g.partitionID(), queue: g.queue(), partition: "Default", txns: []string{g.txn()}}
}

// addMsg keeps a message reference (the newest 64, no repeats).
func (w *world) addMsg(m msgRef) {
	if m.partitionID == "" || m.txn == "" {
		return
	}
	for i, x := range w.msgs {
		if x.partitionID == m.partitionID && x.txn == m.txn {
			w.msgs = append(w.msgs[:i:i], w.msgs[i+1:]...)
			break
		}
	}
	w.msgs = keepLast(append(w.msgs, m), 64)
}

// addDeadLetter keeps a dead letter the node named (the newest 32).
func (w *world) addDeadLetter(d deadLetter) {
	if d.id == "" || slices.ContainsFunc(w.deadLetters, func(x deadLetter) bool { return x.id == d.id }) {
		return
	}
	w.deadLetters = keepLast(append(w.deadLetters, d), 32)
	w.addMsg(msgRef{partitionID: d.partitionID, txn: d.txn, queue: d.queue})
}

// dropDeadLetters forgets the dead letters gone (replayed or purged).
func (w *world) dropDeadLetters(gone func(deadLetter) bool) {
	w.deadLetters = slices.DeleteFunc(w.deadLetters, gone)
}

func (w *world) addTraceName(n string) {
	if n != "" && !slices.Contains(w.traceNames, n) {
		w.traceNames = keepLast(append(w.traceNames, n), 32)
	}
}

// Lock names and owners: few, so that acquires meet each other's permits.
var (
	lockNames  = []string{"fz-lock", "daily-report", "sem", "ü/lock"}
	lockOwners = []string{"w1", "w2", "cron-7"}
)

// lockOp is one operation of POST /api/v1/locks on the lock name: mostly
// on a permit the node answered (renew and release with its token and slot).
func (g *gen) lockOp(name string) *obj {
	p, held := g.w.permits[name]
	ops := []string{"acquire", "acquire", "get", "renew", "release"}
	if held {
		ops = append(ops, "renew", "release")
	}
	ttl := func() int { return pick(g.r, []int{1, 2, 5, 30, 300}) }
	switch op := pick(g.r, ops); op {
	case "get":
		return o("op", op, "name", name)
	case "acquire":
		x := o("op", op, "name", name, "ttlSeconds", ttl())
		if g.r.IntN(3) != 0 {
			x.set("owner", pick(g.r, lockOwners))
		}
		if name == "sem" || g.r.IntN(5) == 0 {
			x.set("limit", 1+g.r.IntN(4))
		}
		return x
	default: // renew, release
		if !held || g.r.IntN(6) == 0 {
			p = permit{slot: int64(g.r.IntN(3)), token: int64(1 + g.r.IntN(500)), owner: pick(g.r, lockOwners)}
		}
		x := o("op", op, "name", name, "token", p.token)
		if p.slot != 0 || g.r.IntN(2) == 0 {
			x.set("slot", p.slot)
		}
		if op == "renew" {
			x.set("ttlSeconds", ttl())
			if p.owner != "" && g.r.IntN(2) == 0 {
				x.set("owner", p.owner)
			}
		}
		return x
	}
}

// Trace names the requests use when the node named none yet.
var traceNameList = []string{"checkout", "fz.flow", "order-1", "ü-trace"}

// msg is a message the node stored (a push, a pop, a view named it), a dead
// letter's message, or now and then one that does not exist.
func (g *gen) msg() msgRef {
	if len(g.w.deadLetters) > 0 && g.r.IntN(4) == 0 {
		d := pick(g.r, g.w.deadLetters)
		return msgRef{partitionID: d.partitionID, txn: d.txn, queue: d.queue}
	}
	if len(g.w.msgs) > 0 && g.r.IntN(5) != 0 {
		// Mostly a recent one: older ones are acked, retained away, deleted.
		n := len(g.w.msgs)
		return g.w.msgs[max(n-1-g.r.IntN(16), 0)]
	}
	return msgRef{partitionID: g.partitionID(), txn: g.txn(), queue: g.queue()}
}

// deadLetter is a dead letter the node listed, or now and then an id of
// none (well formed: 40 hex digits).
func (g *gen) deadLetter() deadLetter {
	if len(g.w.deadLetters) > 0 && g.r.IntN(5) != 0 {
		return pick(g.r, g.w.deadLetters)
	}
	var b [20]byte
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	m := g.msg()
	return deadLetter{id: hex.EncodeToString(b[:]), partitionID: m.partitionID, txn: m.txn, queue: g.queue()}
}

func (g *gen) traceName() string {
	if len(g.w.traceNames) > 0 && g.r.IntN(3) != 0 {
		return pick(g.r, g.w.traceNames)
	}
	return pick(g.r, traceNameList)
}

// page is an optional limit and offset.
func (g *gen) page(q [][2]string, maxLimit int) [][2]string {
	if g.r.IntN(2) == 0 {
		q = append(q, [2]string{"limit", strconv.Itoa(1 + g.r.IntN(maxLimit))})
	}
	if g.r.IntN(4) == 0 {
		q = append(q, [2]string{"offset", strconv.Itoa(g.r.IntN(5))})
	}
	return q
}

// destination is a replay's optional body: none, {}, or another queue and
// partition (or, on the retry route, the group).
func (g *gen) destination(b *base, retry bool, group string) {
	switch g.r.IntN(5) {
	case 0, 1:
		b.noBody = true
	case 2:
		b.body = &obj{}
	case 3:
		x := o("queue", pick(g.r, []string{"fz.ret", "fz.b", "orders"}))
		if g.r.IntN(2) == 0 {
			x.set("partition", g.part())
		}
		b.body = x
	default:
		if retry && group != "" {
			b.body = o("consumerGroup", group)
		} else {
			b.noBody = true
		}
	}
}

func (g *gen) iso() string {
	t := g.start.Add(time.Duration(g.r.IntN(7200)-3600) * time.Second)
	return t.UTC().Format(pick(g.r, []string{time.RFC3339, time.RFC3339Nano, "2006-01-02T15:04:05.000Z"}))
}

func (g *gen) payload() any {
	switch g.r.IntN(8) {
	case 0:
		return nil
	case 1:
		return "text"
	case 2:
		return []any{1, 2, 3}
	case 3:
		return o("blob", strings.Repeat("x", 1+g.r.IntN(8000)))
	}
	return o("orderId", g.r.IntN(1000), "note", pick(g.r, []string{"a", "ü", "🙂"}))
}

func (g *gen) pushItem() *obj {
	q, p := g.queue(), g.part()
	it := o("queue", q, "payload", g.payload())
	if p != "Default" || g.r.IntN(2) == 0 {
		it.set("partition", p)
	}
	if g.r.IntN(8) != 0 {
		it.set("transactionId", g.txn())
	}
	if g.r.IntN(4) == 0 {
		it.set("traceId", g.uuid())
	}
	return it
}

func (g *gen) pushItems() []any {
	n := 1 + g.r.IntN(4)
	items := make([]any, n)
	for i := range items {
		items[i] = g.pushItem()
	}
	return items
}

func (g *gen) ackItem(l lease, txn string) *obj {
	a := o("transactionId", txn, "partitionId", l.partitionID)
	if g.r.IntN(5) != 0 {
		a.set("leaseId", l.id)
	}
	if l.group != "" {
		a.set("consumerGroup", l.group)
	} else if g.r.IntN(3) == 0 {
		a.set("consumerGroup", nil)
	}
	st := pick(g.r, []string{"completed", "completed", "completed", "success", "failed", "retry", "dlq", "acked"})
	a.set("status", st)
	if st == "failed" || g.r.IntN(4) == 0 {
		a.set("error", pick(g.r, []any{nil, "boom", "ü-error"}))
	}
	return a
}

func (g *gen) kvOp(inTxn bool) *obj {
	ns, key := pick(g.r, kvNS), pick(g.r, kvKeys)
	expiry := func(x *obj) *obj {
		if g.r.IntN(3) == 0 {
			return x.set("forever", true)
		}
		return x.set("ttlSeconds", 1+g.r.IntN(3600))
	}
	value := func() any { return pick(g.r, []any{nil, 1, "v", o("chargeId", "ch_1"), []any{true}}) }
	ops := []string{"get", "getMany", "put", "putIfAbsent", "delete", "incr", "cas", "check"}
	if !inTxn {
		ops = append(ops, "getPrefix")
	}
	switch op := pick(g.r, ops); op {
	case "get":
		return o("op", op, "ns", ns, "key", key)
	case "getMany":
		return o("op", op, "ns", ns, "keys", []any{key, pick(g.r, kvKeys)})
	case "getPrefix":
		x := o("op", op, "ns", ns, "prefix", string([]rune(key)[:1]))
		if g.r.IntN(2) == 0 {
			x.set("limit", 1+g.r.IntN(20))
		}
		return x
	case "put", "cas":
		x := expiry(o("op", op, "ns", ns, "key", key, "value", value()))
		if v, ok := g.w.kvVersions[ns+"/"+key]; ok && (op == "cas" || g.r.IntN(2) == 0) {
			x.set("expect", v)
		} else if op == "cas" {
			x.set("expect", g.r.IntN(3))
		}
		if g.r.IntN(4) == 0 {
			x.set("required", true)
		}
		return x
	case "putIfAbsent":
		return expiry(o("op", op, "ns", ns, "key", key, "value", value(), "required", g.r.IntN(2) == 0))
	case "delete":
		return o("op", op, "ns", ns, "key", key)
	case "incr":
		x := expiry(o("op", op, "ns", ns, "key", "ctr-"+key, "delta", g.r.IntN(10)-3))
		if g.r.IntN(3) == 0 {
			x.set("min", -5).set("max", 50)
		}
		return x
	}
	return o("op", "check", "ns", ns, "key", key, "expect", g.w.kvVersions[ns+"/"+key])
}

func (g *gen) timerOp() *obj {
	q, k := "fz.t"+pick(g.r, []string{"", "", "2"}), pick(g.r, timerKeys)
	if g.r.IntN(4) == 0 {
		x := o("op", "cancel", "queue", q, "timerKey", k)
		if g.r.IntN(2) == 0 {
			x.set("txn", g.txn())
		}
		return x
	}
	x := o("op", pick(g.r, []string{"schedule", "reschedule"}), "queue", q, "timerKey", k,
		"delayMs", pick(g.r, []any{0, 10, 500, 2000, 60000, -5, 1.5}), "txn", g.txn(),
		"payload", base64.StdEncoding.EncodeToString(encode(g.payload())))
	if g.r.IntN(3) == 0 {
		x.set("partition", g.part())
	}
	return x
}

func (g *gen) configure() *obj {
	q := g.queue()
	opts := &obj{}
	all := []struct {
		name string
		val  func() any
	}{
		{"leaseTime", func() any { return pick(g.r, []int{1, 2, 5, 30, 300}) }},
		{"retryLimit", func() any { return g.r.IntN(4) }},
		{"retryDelay", func() any { return pick(g.r, []int{0, 100, 1000}) }},
		{"retryDelayMax", func() any { return pick(g.r, []int{1000, 5000}) }},
		{"retryBackoff", func() any { return g.r.IntN(2) == 0 }},
		{"maxSize", func() any { return g.r.IntN(100) }},
		{"delayedProcessing", func() any { return pick(g.r, []int{0, 0, 1}) }},
		{"windowBuffer", func() any { return pick(g.r, []int{0, 0, 1}) }},
		{"priority", func() any { return g.r.IntN(10) - 2 }},
		{"ttl", func() any { return 3600 }},
		{"retentionEnabled", func() any { return g.r.IntN(2) == 0 }},
		{"retentionSeconds", func() any { return pick(g.r, []int{0, 5, 60}) }},
		{"completedRetentionSeconds", func() any { return pick(g.r, []int{0, 3, 60}) }},
		{"maxWaitTimeSeconds", func() any { return pick(g.r, []int{0, 0, 4}) }},
		{"deadLetterQueue", func() any { return g.r.IntN(2) == 0 }},
		{"dlqAfterMaxRetries", func() any { return g.r.IntN(2) == 0 }},
		{"encryptionEnabled", func() any { return q == "fz.enc" }},
		{"dedupWindowSeconds", func() any { return pick(g.r, []int{0, 5, 3600}) }},
	}
	for _, op := range all {
		if g.r.IntN(2) == 0 {
			opts.set(op.name, op.val())
		}
	}
	x := o("queue", q, "options", opts)
	if g.r.IntN(2) == 0 {
		x.set("namespace", pick(g.r, []any{nil, "fz", "billing"})).set("task", pick(g.r, []any{nil, "invoice"}))
	}
	return x
}

func (g *gen) popQuery(wildcard bool) [][2]string {
	q := [][2]string{{"batch", strconv.Itoa(1 + g.r.IntN(10))}}
	if g.r.IntN(2) == 0 {
		q = append(q, [2]string{"wait", "true"}, [2]string{"timeout", strconv.Itoa(g.r.IntN(300))})
	}
	if grp := g.group(); grp != "" {
		q = append(q, [2]string{"consumerGroup", grp})
		switch g.r.IntN(4) {
		case 0, 1:
			q = append(q, [2]string{"subscriptionMode", pick(g.r, []string{"all", "new", "from_beginning"})})
		case 2:
			q = append(q, [2]string{"subscriptionFrom", pick(g.r, []string{"now", g.iso()})})
		}
	}
	if wildcard && g.r.IntN(3) == 0 {
		q = append(q, [2]string{"partitions", strconv.Itoa(1 + g.r.IntN(4))})
	}
	if g.r.IntN(8) == 0 {
		q = append(q, [2]string{"autoAck", "true"})
	}
	if g.r.IntN(8) == 0 {
		q = append(q, [2]string{"leaseSeconds", strconv.Itoa(1 + g.r.IntN(30))})
	}
	return q
}

// shapes are the spec's request of each route pattern.
var shapes = map[string]func(g *gen) base{
	"GET /health":             func(g *gen) base { return base{} },
	"GET /metrics":            func(g *gen) base { return base{} },
	"GET /metrics/prometheus": func(g *gen) base { return base{} },
	"POST /api/v1/configure":  func(g *gen) base { return base{body: g.configure()} },
	"POST /api/v1/push":       func(g *gen) base { return base{body: o("items", g.pushItems())} },
	"GET /api/v1/pop/queue/{queue}": func(g *gen) base {
		return base{params: [][2]string{{"queue", g.queue()}}, query: g.popQuery(true)}
	},
	"GET /api/v1/pop/queue/{queue}/partition/{partition}": func(g *gen) base {
		return base{params: [][2]string{{"queue", g.queue()}, {"partition", g.part()}}, query: g.popQuery(false)}
	},
	"GET /api/v1/pop": func(g *gen) base {
		q := append(g.popQuery(true), [2]string{"namespace", pick(g.r, []string{"fz", "billing", "orders"})})
		if g.r.IntN(2) == 0 {
			q = append(q, [2]string{"task", pick(g.r, []string{"a", "invoice", ""})})
		}
		return base{query: q}
	},
	"POST /api/v1/ack": func(g *gen) base {
		l := g.lease()
		return base{body: g.ackItem(l, pick(g.r, l.txns))}
	},
	"POST /api/v1/ack/batch": func(g *gen) base {
		l := g.lease()
		var acks []any
		for _, t := range l.txns {
			a := g.ackItem(l, t)
			acks = append(acks, a)
		}
		x := o("acknowledgments", acks)
		if l.group != "" {
			x.set("consumerGroup", l.group)
		}
		return base{body: x}
	},
	"POST /api/v1/transaction": func(g *gen) base {
		var ops []any
		l := g.lease()
		if g.r.IntN(3) != 0 {
			for _, t := range l.txns[:1+g.r.IntN(len(l.txns))] {
				a := g.ackItem(l, t)
				a.keys, a.vals = append([]string{"type"}, a.keys...), append([]any{"ack"}, a.vals...)
				ops = append(ops, a)
			}
		}
		if g.r.IntN(2) == 0 {
			if g.r.IntN(2) == 0 {
				ops = append(ops, o("type", "push", "items", g.pushItems()))
			} else {
				it := g.pushItem()
				it.keys, it.vals = append([]string{"type"}, it.keys...), append([]any{"push"}, it.vals...)
				ops = append(ops, it)
			}
		}
		x := o("operations", ops)
		if g.r.IntN(3) == 0 {
			x.set("requiredLeases", []any{l.id})
		}
		if g.r.IntN(2) == 0 || len(ops) == 0 {
			x.set("kv", []any{g.kvOp(true)})
		}
		if g.r.IntN(4) == 0 {
			x.set("timers", []any{g.timerOp()})
		}
		if g.r.IntN(5) == 0 {
			// Where a group reads a partition (addendum §4.2).
			p := o("queue", g.queue(), "consumerGroup", pick(g.r, []string{"g1", "g2"}), "offset", pick(g.r, []any{0, 1, 5, nil}))
			if g.r.IntN(2) == 0 {
				p.set("partition", g.part())
			}
			x.set("positions", []any{p})
		}
		return base{body: x}
	},
	"POST /api/v1/lease/{leaseId}/extend": func(g *gen) base {
		b := base{params: [][2]string{{"leaseId", g.lease().id}}, body: o("seconds", 1+g.r.IntN(120))}
		if g.r.IntN(3) == 0 {
			b.body = &obj{}
		}
		return b
	},
	"GET /api/v1/resources/queues": func(g *gen) base { return base{} },
	"GET /api/v1/resources/queues/{queue}": func(g *gen) base {
		return base{params: [][2]string{{"queue", g.queue()}}}
	},
	"GET /api/v1/resources/queues/{queue}/depth": func(g *gen) base {
		b := base{params: [][2]string{{"queue", g.queue()}}}
		if g.r.IntN(2) == 0 {
			b.query = [][2]string{{"group", pick(g.r, []string{"g1", "ui", "__QUEUE_MODE__", ""})}}
		}
		return b
	},
	"DELETE /api/v1/resources/queues/{queue}": func(g *gen) base {
		return base{params: [][2]string{{"queue", g.queue()}}}
	},
	"GET /api/v1/dlq": func(g *gen) base {
		var q [][2]string
		if g.r.IntN(2) == 0 {
			q = append(q, [2]string{"queue", g.queue()})
		}
		if g.r.IntN(3) == 0 {
			q = append(q, [2]string{"consumerGroup", "g1"}, [2]string{"partition", g.part()})
		}
		if g.r.IntN(3) == 0 {
			q = append(q, [2]string{"from", g.iso()}, [2]string{"to", g.iso()})
		}
		return base{query: append(q, [2]string{"limit", strconv.Itoa(g.r.IntN(200))}, [2]string{"offset", strconv.Itoa(g.r.IntN(5))})}
	},
	"GET /api/v1/messages": func(g *gen) base {
		var q [][2]string
		if g.r.IntN(3) != 0 {
			q = append(q, [2]string{"queue", g.queue()})
			if g.r.IntN(3) == 0 {
				q = append(q, [2]string{"partition", g.part()})
			}
		}
		if g.r.IntN(5) == 0 {
			q = append(q, [2]string{pick(g.r, []string{"ns", "namespace"}), pick(g.r, []string{"fz", "billing"})})
			if g.r.IntN(2) == 0 {
				q = append(q, [2]string{"task", "invoice"})
			}
		}
		if g.r.IntN(2) == 0 {
			q = append(q, [2]string{"status", pick(g.r, []string{"pending", "processing", "completed", "dead_letter"})})
		}
		switch g.r.IntN(4) {
		case 0:
			q = append(q, [2]string{"from", g.start.Add(-2 * time.Hour).UTC().Format(time.RFC3339)})
		case 1:
			q = append(q, [2]string{"from", g.start.Add(-time.Hour).UTC().Format(time.RFC3339)},
				[2]string{"to", g.start.Add(time.Hour).UTC().Format(time.RFC3339Nano)})
		}
		return base{query: g.page(q, 1000)}
	},
	"GET /api/v1/messages/{partitionId}/{transactionId}": func(g *gen) base {
		m := g.msg()
		return base{params: [][2]string{{"partitionId", m.partitionID}, {"transactionId", m.txn}}}
	},
	"DELETE /api/v1/messages/{partitionId}/{transactionId}": func(g *gen) base {
		m := g.msg()
		return base{params: [][2]string{{"partitionId", m.partitionID}, {"transactionId", m.txn}}, noBody: true}
	},
	"POST /api/v1/messages/{partitionId}/{transactionId}/retry": func(g *gen) base {
		d := g.deadLetter()
		if g.r.IntN(4) == 0 {
			m := g.msg()
			d.partitionID, d.txn = m.partitionID, m.txn
		}
		b := base{params: [][2]string{{"partitionId", d.partitionID}, {"transactionId", d.txn}}}
		if d.group != "" && g.r.IntN(2) == 0 {
			b.query = [][2]string{{"consumerGroup", d.group}}
		}
		g.destination(&b, true, d.group)
		return b
	},
	"POST /api/v1/dlq/{id}/replay": func(g *gen) base {
		b := base{params: [][2]string{{"id", g.deadLetter().id}}}
		g.destination(&b, false, "")
		return b
	},
	"DELETE /api/v1/dlq": func(g *gen) base {
		d := g.deadLetter()
		if g.r.IntN(3) == 0 {
			d.queue = g.queue()
		}
		q := [][2]string{{"queue", d.queue}}
		if d.group != "" && g.r.IntN(2) == 0 {
			q = append(q, [2]string{"consumerGroup", d.group})
		}
		return base{query: q, noBody: true}
	},
	"POST /api/v1/locks": func(g *gen) base {
		// One operation per lock in a call (addendum §4.3).
		names := slices.Clone(lockNames)
		g.r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		var ops []any
		for _, n := range names[:1+g.r.IntN(3)] {
			ops = append(ops, g.lockOp(n))
		}
		if g.r.IntN(6) == 0 {
			return base{body: ops} // a bare array is accepted too
		}
		return base{body: o("operations", ops)}
	},
	"POST /api/v1/traces": func(g *gen) base {
		m := g.msg()
		x := o("transactionId", m.txn, "partitionId", m.partitionID)
		switch g.r.IntN(4) {
		case 0:
			x.set("traceNames", g.traceName())
		case 1, 2:
			names := []any{g.traceName()}
			if g.r.IntN(2) == 0 {
				names = append(names, g.traceName())
			}
			x.set("traceNames", names)
		}
		x.set("eventType", pick(g.r, []string{"info", "error", "step", "processing"}))
		x.set("data", pick(g.r, []any{o("text", "charged", "amount", g.r.IntN(100)), o("step", g.r.IntN(5)), "plain", nil, []any{1, "two"}}))
		if g.r.IntN(3) == 0 {
			x.set("consumerGroup", pick(g.r, []string{"g1", "g2", "__QUEUE_MODE__"}))
		}
		if g.r.IntN(3) == 0 {
			x.set("workerId", pick(g.r, []string{"w1", "worker-ü"}))
		}
		return base{body: x}
	},
	"GET /api/v1/traces/names": func(g *gen) base { return base{query: g.page(nil, 100)} },
	"GET /api/v1/traces/by-name/{name}": func(g *gen) base {
		return base{params: [][2]string{{"name", g.traceName()}}, query: g.page(nil, 200)}
	},
	"GET /api/v1/traces/{partitionId}/{transactionId}": func(g *gen) base {
		m := g.msg()
		return base{params: [][2]string{{"partitionId", m.partitionID}, {"transactionId", m.txn}}}
	},
	"POST /api/v1/kv": func(g *gen) base {
		var ops []any
		seen := map[string]bool{}
		for range 1 + g.r.IntN(4) {
			op := g.kvOp(false)
			// One write per key in a call (addendum §4.10).
			k := fmt.Sprint(member(op, "ns"), "/", member(op, "key"))
			if name := member(op, "op"); name != "get" && name != "getMany" && name != "getPrefix" && name != "check" {
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			ops = append(ops, op)
		}
		if g.r.IntN(6) == 0 {
			return base{body: ops} // a bare array is accepted too
		}
		return base{body: o("operations", ops)}
	},
	"GET /api/v1/kv/{ns}/{key...}": func(g *gen) base {
		return base{params: [][2]string{{"ns", pick(g.r, kvNS)}, {"key", pick(g.r, kvKeys)}}}
	},
	"PUT /api/v1/kv/{ns}/{key...}": func(g *gen) base {
		ns, key := pick(g.r, kvNS), pick(g.r, kvKeys)
		x := o("value", pick(g.r, []any{1, "v", o("a", []any{1, 2})}))
		if g.r.IntN(3) == 0 {
			x.set("forever", true)
		} else {
			x.set("ttlSeconds", 1+g.r.IntN(600))
		}
		if v, ok := g.w.kvVersions[ns+"/"+key]; ok && g.r.IntN(2) == 0 {
			x.set("expect", v)
		}
		return base{params: [][2]string{{"ns", ns}, {"key", key}}, body: x}
	},
	"DELETE /api/v1/kv/{ns}/{key...}": func(g *gen) base {
		b := base{params: [][2]string{{"ns", pick(g.r, kvNS)}, {"key", pick(g.r, kvKeys)}}, noBody: true}
		if g.r.IntN(3) == 0 {
			b.body, b.noBody = o("expect", g.r.IntN(3), "required", g.r.IntN(2) == 0), false
		}
		return b
	},
	"POST /api/v1/timers": func(g *gen) base {
		var ops []any
		seen := map[string]bool{}
		for range 1 + g.r.IntN(3) {
			op := g.timerOp()
			// One op per (queue, timerKey) in a call (addendum §1.2).
			if k := fmt.Sprint(member(op, "queue"), "/", member(op, "timerKey")); !seen[k] {
				seen[k] = true
				ops = append(ops, op)
			}
		}
		return base{body: o("operations", ops)}
	},
	"GET /api/v1/timers/{queue}": func(g *gen) base {
		b := base{params: [][2]string{{"queue", "fz.t"}}}
		switch g.r.IntN(3) {
		case 0:
			b.query = [][2]string{{"mode", "count"}, {"prefix", "t"}}
		case 1:
			b.query = [][2]string{{"after", "t0"}, {"limit", strconv.Itoa(1 + g.r.IntN(10))}}
		}
		return b
	},
	"GET /api/v1/timers/{queue}/{timerKey...}": func(g *gen) base {
		return base{params: [][2]string{{"queue", "fz.t"}, {"timerKey", pick(g.r, timerKeys)}}}
	},
	"DELETE /api/v1/timers/{queue}/{timerKey...}": func(g *gen) base {
		b := base{params: [][2]string{{"queue", "fz.t"}, {"timerKey", pick(g.r, timerKeys)}}, noBody: true}
		if g.r.IntN(2) == 0 {
			b.query = [][2]string{{"txn", g.txn()}}
		}
		return b
	},
	"GET /api/v1/system/cluster": func(g *gen) base { return base{} },
	"DELETE /api/v1/system/cluster/nodes/{id}": func(g *gen) base {
		return base{params: [][2]string{{"id", pick(g.r, []string{"n9", "ghost", "fz2"})}}, noBody: true}
	},
	"GET /api/v1/consumer-groups": func(g *gen) base { return base{} },
	"GET /api/v1/consumer-groups/lagging": func(g *gen) base {
		return base{query: [][2]string{{"minLagSeconds", strconv.Itoa(g.r.IntN(100))}}}
	},
	"GET /api/v1/consumer-groups/{group}": func(g *gen) base {
		return base{params: [][2]string{{"group", pick(g.r, []string{"g1", "g2", "__QUEUE_MODE__"})}}}
	},
	"DELETE /api/v1/consumer-groups/{group}": func(g *gen) base {
		return base{params: [][2]string{{"group", pick(g.r, []string{"g1", "g2"})}},
			query: [][2]string{{"deleteMetadata", pick(g.r, []string{"true", "false"})}}, noBody: true}
	},
	"DELETE /api/v1/consumer-groups/{group}/queues/{queue}": func(g *gen) base {
		return base{params: [][2]string{{"group", pick(g.r, []string{"g1", "g2"})}, {"queue", g.queue()}}, noBody: true}
	},
	"POST /api/v1/consumer-groups/{group}/subscription": func(g *gen) base {
		return base{params: [][2]string{{"group", pick(g.r, []string{"g1", "g2"})}}, body: o("subscriptionTimestamp", g.iso())}
	},
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek": func(g *gen) base {
		b := base{params: [][2]string{{"group", pick(g.r, []string{"g1", "g2", "__QUEUE_MODE__"})}, {"queue", g.queue()}}}
		if g.r.IntN(2) == 0 {
			b.body = o("toEnd", true)
		} else {
			b.body = o("timestamp", g.iso())
		}
		return b
	},
	"POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek": func(g *gen) base {
		return base{params: [][2]string{{"group", pick(g.r, []string{"g1", "g2"})}, {"queue", g.queue()}, {"partition", g.part()}}, noBody: true}
	},
	"POST /api/v1/stats/refresh":         func(g *gen) base { return base{noBody: true} },
	"GET /api/v1/system/maintenance":     func(g *gen) base { return base{} },
	"POST /api/v1/system/maintenance":    func(g *gen) base { return base{body: o("enabled", g.r.IntN(3) == 0)} },
	"GET /api/v1/system/maintenance/pop": func(g *gen) base { return base{} },
	"POST /api/v1/system/maintenance/pop": func(g *gen) base {
		return base{body: o("enabled", g.r.IntN(3) == 0)}
	},
	"GET /api/v1/system/state-hash": func(g *gen) base { return base{} },
	"GET /api/v1/system/audit": func(g *gen) base {
		return base{query: [][2]string{{"limit", strconv.Itoa(1 + g.r.IntN(50))}}}
	},
	"GET /api/v1/system/backup": func(g *gen) base { return base{} },
	"POST /api/v1/system/restore": func(g *gen) base {
		// Never the backup as it was: cut short, a byte changed, or noise.
		if b := g.w.backup; len(b) > 64 {
			c := append([]byte(nil), b...)
			switch g.r.IntN(3) {
			case 0:
				c = c[:g.r.IntN(len(c)-1)+1]
			case 1:
				c[g.r.IntN(len(c))] ^= byte(1 + g.r.IntN(255))
			default:
				c = append(c[:32], c[40:]...)
			}
			return base{rawBod: c}
		}
		return base{rawBod: []byte("QNBACKUP\x00\x01garbage")}
	},
	"GET /api/v1/system/kv-timers": func(g *gen) base { return base{} },
	"POST /api/v1/system/kv-timers": func(g *gen) base {
		x := &obj{}
		for _, k := range []string{"kv", "timersSchedule", "timersFire"} {
			if g.r.IntN(2) == 0 {
				x.set(k, g.r.IntN(3) != 0)
			}
		}
		if len(x.keys) == 0 {
			x.set("kv", true)
		}
		return base{body: x}
	},
	// Status and analytics (spec §4.12): reads with filters and ranges.
	"GET /api/v1/status":        func(g *gen) base { return base{query: g.statusQuery(false)} },
	"GET /api/v1/status/queues": func(g *gen) base { return base{query: g.statusQuery(true)} },
	"GET /api/v1/status/queues/{queue}": func(g *gen) base {
		b := base{params: [][2]string{{"queue", g.queue()}}}
		if g.r.IntN(2) == 0 {
			b.query = [][2]string{{"includePartitions", pick(g.r, []string{"true", "false", "1", "x"})}}
		}
		return b
	},
	"GET /api/v1/status/queues/{queue}/messages": func(g *gen) base {
		q := g.statusQuery(true)
		if g.r.IntN(2) == 0 {
			q = append(q, [2]string{"status", pick(g.r, []string{"pending", "processing", "completed", "dead_letter", "x"})})
		}
		return base{params: [][2]string{{"queue", g.queue()}}, query: q}
	},
	"GET /api/v1/status/analytics": func(g *gen) base {
		return base{query: append(g.statusQuery(false), [2]string{"interval", pick(g.r, []string{"minute", "hour", "day", "week", ""})})}
	},
	"GET /api/v1/status/buffers":                  func(g *gen) base { return base{} },
	"GET /api/v1/analytics/queue-lag":             func(g *gen) base { return base{query: g.statusQuery(false)} },
	"GET /api/v1/analytics/queue-ops":             func(g *gen) base { return base{query: g.statusQuery(false)} },
	"GET /api/v1/analytics/retention":             func(g *gen) base { return base{query: g.statusQuery(false)} },
	"GET /api/v1/analytics/system-metrics":        func(g *gen) base { return base{} },
	"GET /api/v1/analytics/worker-metrics":        func(g *gen) base { return base{query: g.statusQuery(false)} },
	"GET /api/v1/analytics/queue-parked-replicas": func(g *gen) base { return base{query: g.statusQuery(false)} },
	"GET /api/v1/analytics/postgres-stats":        func(g *gen) base { return base{} },
}

// statusQuery is the filters of the status and analytics views: a queue,
// namespace or task, a time range, and with page the list's limit and
// offset.
func (g *gen) statusQuery(page bool) [][2]string {
	var q [][2]string
	switch g.r.IntN(4) {
	case 0:
		q = append(q, [2]string{"queue", g.queue()})
	case 1:
		q = append(q, [2]string{"namespace", pick(g.r, []string{"fz", "billing", ""})})
	case 2:
		q = append(q, [2]string{"task", pick(g.r, []string{"a", "invoice"})})
	}
	if g.r.IntN(2) == 0 {
		q = append(q, [2]string{"from", g.iso()}, [2]string{"to", g.iso()})
	}
	if page && g.r.IntN(2) == 0 {
		q = append(q, [2]string{"limit", strconv.Itoa(g.r.IntN(200) - 5)}, [2]string{"offset", strconv.Itoa(g.r.IntN(5))})
	}
	return q
}

// keyedRoutes take an Idempotency-Key.
var keyedRoutes = map[string]bool{"POST /api/v1/push": true, "POST /api/v1/kv": true, "POST /api/v1/timers": true,
	"POST /api/v1/transaction": true, "POST /api/v1/locks": true}

// togglePatterns are the operator's switches: a change is undone a few
// requests later, so that the run does not spend itself in maintenance.
var togglePatterns = map[string]bool{"POST /api/v1/system/maintenance": true, "POST /api/v1/system/maintenance/pop": true,
	"POST /api/v1/system/kv-timers": true}

// writeRoute reports whether a route pattern (or a request that matched no
// route) may change state: every method but GET, HEAD and OPTIONS, and the
// pops, which take leases.
func writeRoute(method, pattern string) bool {
	if strings.HasPrefix(pattern, "GET /api/v1/pop") {
		return true
	}
	return method != "GET" && method != "HEAD" && method != "OPTIONS"
}

// build writes a base out as the request of pattern.
func build(pattern string, b base) *req {
	method, path, _ := strings.Cut(pattern, " ")
	r := &req{Method: method, Pattern: pattern}
	r.Target = fillPath(path, b.params, false) + encodeQuery(b.query, false)
	switch {
	case b.rawBod != nil:
		r.Body = b.rawBod
	case b.body != nil:
		r.Body = encode(b.body)
	case method == "POST" || method == "PUT":
		if !b.noBody {
			r.Body = []byte("{}")
		}
	}
	if r.Body != nil {
		r.Header = append(r.Header, []string{"Content-Type", "application/json"})
	}
	return r
}

// fillPath puts the parameters in the pattern's path. raw leaves a value
// unescaped (bytes as they are on the request line).
func fillPath(path string, params [][2]string, raw bool) string {
	for _, p := range params {
		for _, form := range []string{"{" + p[0] + "...}", "{" + p[0] + "}"} {
			if !strings.Contains(path, form) {
				continue
			}
			v := p[1]
			if !raw {
				if strings.HasSuffix(form, "...}") {
					segs := strings.Split(v, "/")
					for i, s := range segs {
						segs[i] = url.PathEscape(s)
					}
					v = strings.Join(segs, "/")
				} else {
					v = url.PathEscape(v)
				}
			}
			path = strings.Replace(path, form, v, 1)
			break
		}
	}
	return path
}

func encodeQuery(q [][2]string, raw bool) string {
	if len(q) == 0 {
		return ""
	}
	var b strings.Builder
	for i, kv := range q {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		if raw {
			b.WriteString(kv[0] + "=" + kv[1])
		} else {
			b.WriteString(url.QueryEscape(kv[0]) + "=" + url.QueryEscape(kv[1]))
		}
	}
	return b.String()
}

// Mutations of a whole request.

var (
	methods     = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "get", "FOO", "M-SEARCH"}
	queryNames  = []string{"batch", "wait", "timeout", "consumerGroup", "partitions", "autoAck", "leaseSeconds", "subscriptionMode", "subscriptionFrom", "conflation", "limit", "offset", "after", "mode", "prefix", "minLagSeconds", "deleteMetadata", "consistency", "txn", "queue", "namespace", "task", "from", "to", "before", "partition", "status", "ns", "group"}
	queryValues = []string{"-1", "0", "1", "true", "false", "TRUE", "yes", "", "1e99", "99999999999999999999", "9223372036854775807", "-9223372036854775808", "0x10", " 1", "1.5", "now", "stale", "linearizable", "count", "list", "__QUEUE_MODE__", "pending", "dead_letter", "2026-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "2026-13-45T99:99:99Z", "garbage", "ü", "%00", "\u0000"}
	rawQueries  = []string{"?", "?&&==&", "?a=%zz", "?%", "?batch=%ff%fe", "?wait=true&timeout=", "?=1", "?a;b=c", "?timeout=100&timeout=-5&wait=true&wait=false"}
)

// mutateRequest changes the request in one way: its body (as a tree or as
// bytes), query, path, method, Idempotency-Key or framing.
func (g *gen) mutateRequest(r *req, b base, maxBody int) {
	r2 := g.r
	hasJSON := b.body != nil
	for tries := 0; tries < 4; tries++ {
		switch k := r2.IntN(100); {
		case k < 35 && hasJSON:
			v, what := mutateTree(r2, b.body)
			r.Body = encode(v)
			r.Mutation = append(r.Mutation, what...)
		case k < 52:
			body := r.Body
			if body == nil {
				body = []byte("{}")
			}
			var what string
			r.Body, what = mutateText(r2, body, maxBody)
			r.Mutation = append(r.Mutation, what)
		case k < 64:
			r.Target = strings.SplitN(r.Target, "?", 2)[0] + g.mutateQuery(b.query)
			r.Mutation = append(r.Mutation, "query")
		case k < 76:
			var what string
			r.Target, what = g.mutatePath(r.Pattern, b, r.Target)
			r.Mutation = append(r.Mutation, what)
		case k < 84:
			r.Method = pick(r2, methods)
			r.Mutation = append(r.Mutation, "method "+r.Method)
		case k < 94:
			if !keyedRoutes[r.Pattern] {
				continue
			}
			r.Mutation = append(r.Mutation, g.idemKey(r))
		default:
			if r.Body == nil {
				continue
			}
			switch r2.IntN(3) {
			case 0:
				r.Chunked = true
				r.Mutation = append(r.Mutation, "chunked")
			case 1:
				r.Header = dropHeader(r.Header, "Content-Type")
				r.Header = append(r.Header, []string{"Content-Type", pick(r2, []string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-16", "multipart/form-data; boundary=x"})})
				r.Mutation = append(r.Mutation, "content type")
			default:
				r.Header = dropHeader(r.Header, "Content-Type")
				r.Mutation = append(r.Mutation, "no content type")
			}
		}
		if r2.IntN(3) != 0 {
			break
		}
	}
	// A body far past the node's limit proves nothing more than one just
	// past it (413), and costs the run its time.
	if len(r.Body) > maxBody+8<<10 {
		n := maxBody + 1 + r2.IntN(4096)
		r.Body = r.Body[:n:n]
		r.Mutation = append(r.Mutation, "cut to "+strconv.Itoa(len(r.Body))+" bytes")
	}
}

func dropHeader(h [][]string, name string) [][]string {
	var out [][]string
	for _, kv := range h {
		if !strings.EqualFold(kv[0], name) {
			out = append(out, kv)
		}
	}
	return out
}

func (g *gen) mutateQuery(q [][2]string) string {
	r := g.r
	if r.IntN(5) == 0 {
		return pick(r, rawQueries)
	}
	out := append([][2]string(nil), q...)
	for range 1 + r.IntN(3) {
		name := pick(r, queryNames)
		if len(out) > 0 && r.IntN(2) == 0 {
			name = out[r.IntN(len(out))][0]
		}
		out = append(out, [2]string{name, pick(r, queryValues)})
	}
	if r.IntN(10) == 0 {
		out = append(out, [2]string{"pad", strings.Repeat("q", 5000)})
	}
	return encodeQuery(out, false)
}

func (g *gen) mutatePath(pattern string, b base, target string) (string, string) {
	r := g.r
	_, path, _ := strings.Cut(pattern, " ")
	query := ""
	if i := strings.IndexByte(target, '?'); i >= 0 {
		query = target[i:]
	}
	switch k := r.IntN(10); {
	case k < 5 && len(b.params) > 0:
		params := append([][2]string(nil), b.params...)
		j := r.IntN(len(params))
		v := pick(r, append(oddStrings, strings.Repeat("p", 600), strings.Repeat("ü", 300), "."))
		rawV := r.IntN(4) == 0
		if rawV {
			v = pick(r, []string{"%zz", "%", "a%2", "%00", "%2e%2e", "ü", "a%2Fb", "%ff", "..", "~", "a;b", "%20"})
		}
		if params[j][0] == "id" && v == g.w.nodeID {
			v = "not-" + v
		}
		params[j][1] = v
		return fillPath(path, params, rawV) + query, "path parameter " + params[j][0] + "=" + strconv.QuoteToASCII(v)
	case k < 7:
		return strings.SplitN(target, "?", 2)[0] + pick(r, []string{"/", "/x", "//", "/..", "/%2e", "/ü"}) + query, "path suffix"
	case k < 8:
		return strings.Replace(target, "/api/v1/", pick(r, []string{"/API/v1/", "/api/v2/", "/api//v1/", "/api/v1/../v1/", "/api/./v1/"}), 1), "path prefix"
	}
	words := []string{"api", "v1", "queues", "kv", "timers", "system", "pop", "queue", "x", "..", "%00", "ü", "", "streams", "messages", "traces", "status", "analytics", "locks"}
	var p strings.Builder
	for range 1 + r.IntN(5) {
		p.WriteString("/" + pick(r, words))
	}
	return p.String() + query, "random path"
}

// idemKey gives a request an Idempotency-Key: a new one, one used before
// (with this body or another), or one that is not a key (too long, not
// printable, empty).
func (g *gen) idemKey(r *req) string {
	var k string
	switch g.r.IntN(8) {
	case 0, 1, 2:
		g.seq++
		k = fmt.Sprintf("fz-key-%d-%d", g.r.Uint32(), g.seq)
	case 3, 4:
		if len(g.w.keys) == 0 {
			return "no key yet"
		}
		k = pick(g.r, g.w.keys)
	case 5:
		k = strings.Repeat("k", 256+g.r.IntN(100))
	case 6:
		k = pick(g.r, []string{"k\x80ey", "ü", "k\xff"})
	default:
		k = pick(g.r, []string{"", " ", "a key", "\t"})
	}
	r.Header = append(r.Header, []string{"Idempotency-Key", k})
	if validKey(k) {
		g.w.keys = keepLast(append(g.w.keys, k), 20)
	}
	return "Idempotency-Key " + strconv.QuoteToASCII(k)
}

// validKey reports whether the node takes k (as the header arrives, trimmed)
// as an Idempotency-Key (package idempotency's rule).
func validKey(k string) bool {
	k = strings.Trim(k, " \t")
	if k == "" || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

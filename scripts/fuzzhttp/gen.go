package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
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
	partitionIDs  []string          // recent partition ids
	txns          []string          // recent transaction ids
	msgs          []msgRef          // recent messages (pushes, pops, the message, DLQ and trace views)
	deadLetters   []deadLetter      // dead letters the node listed (a replay or purge drops them)
	traceNames    []string          // trace names recorded or listed
	permits       map[string]permit // lock name → the permit an acquire or renew answered
	leases        []lease           // recent leases (newest last)
	kvVersions    map[string]int64  // "ns/key" → the version a write answered
	backup        []byte            // a backup the node served
	keys          []string          // recent Idempotency-Keys
	nodeID        string            // never the id of a voter removal
	streamQueries []string          // stream query ids a registration answered
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

// streamQuery is a registered stream query's id, now and then any UUID.
func (g *gen) streamQuery() string {
	if len(g.w.streamQueries) > 0 && g.r.IntN(5) != 0 {
		return pick(g.r, g.w.streamQueries)
	}
	return g.uuid()
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

package main

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The request shapes of every route: a valid request of the spec's shape,
// which the mutators then damage.

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
	// Streams (spec §4.16): the query ids are ones the fuzzer learned from a
	// registration, or any UUID (a cycle of no query is 200 success:false).
	"POST /streams/v1/queries": func(g *gen) base {
		x := o("name", pick(g.r, []string{"fzq", "fzq2", "counts"}), "source_queue", g.queue(), "config_hash", pick(g.r, []string{"h1", "h2"}))
		if g.r.IntN(2) == 0 {
			x.set("sink_queue", g.queue())
		}
		if g.r.IntN(3) == 0 {
			x.set("reset", true)
		}
		return base{body: x}
	},
	"POST /streams/v1/cycle": func(g *gen) base {
		l := g.lease()
		ops := []any{o("type", "upsert", "key", "w\x1f1", "value", o("acc", g.r.IntN(9), "windowEnd", g.r.IntN(5000))),
			o("type", "delete", "key", pick(g.r, []string{"w\x1f1", "x"}))}
		x := o("query_id", g.streamQuery(), "partition_id", l.partitionID, "consumer_group", l.group,
			"state_ops", ops[:g.r.IntN(3)], "push_items", []any{o("queue", g.queue(), "partition", g.part(), "payload", o("n", 1))},
			"release_lease", g.r.IntN(2) == 0)
		if len(l.txns) > 0 && g.r.IntN(3) != 0 {
			x.set("ack", o("transactionId", pick(g.r, l.txns), "leaseId", l.id, "status", "completed", "count", len(l.txns)))
		} else {
			x.set("ack", nil)
		}
		return base{body: x}
	},
	"POST /streams/v1/state/get": func(g *gen) base {
		x := o("query_id", g.streamQuery(), "partition_id", g.partitionID(), "keys", nil)
		if g.r.IntN(2) == 0 {
			x.set("key_prefix", "w")
			x.set("ripe_at_or_before", g.r.IntN(6000))
		}
		return base{body: x}
	},
	"GET /streams/v1/queries": func(g *gen) base { return base{} },
	"DELETE /streams/v1/queries/{name}": func(g *gen) base {
		return base{params: [][2]string{{"name", pick(g.r, []string{"fzq", "fzq2", "nope"})}}}
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
	"GET /api/v1/system/tenants":    func(g *gen) base { return base{} },
	"POST /api/v1/system/tenants/{tenant}/pin": func(g *gen) base {
		return base{params: [][2]string{{"tenant", pick(g.r, []string{"acme", "team-7", "Bad Name", "default"})}},
			body: o("group", pick(g.r, []any{0, 1, -1, "x"}))}
	},
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

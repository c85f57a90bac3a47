package workload

import (
	"testing"

	"github.com/queen-node/queen-node/jepsen/history"
)

// Queue histories: ids a, b in partition P (offsets 1, 2), two groups.

func qPush(call, ret int64, st history.Status, items ...qPushItem) hop {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.Txn)
	}
	var out any
	if st == history.OK {
		out = items
	}
	return hop{client: 1, kind: "push", call: call, ret: ret, status: st, in: qPushIn{IDs: ids, Partition: "P"}, out: out}
}

func qItem(txn, msgID string, offset uint64) qPushItem {
	return qPushItem{Status: "queued", MessageID: msgID, Offset: offset, Partition: "P", Txn: txn}
}

func qPop(group string, call, ret int64, msgs ...qMsg) hop {
	return hop{client: 2, kind: "pop", call: call, ret: ret, in: map[string]string{"group": group}, out: qPopOut{Messages: msgs}}
}

func qM(txn, msgID string) qMsg {
	return qMsg{ID: msgID, TransactionID: txn, PartitionID: "P", Partition: "P", LeaseID: "L", Data: []byte(`{"id":"` + txn + `"}`)}
}

// qDamaged is qM served with data other than what was pushed.
func qDamaged(txn, msgID, data string) qMsg {
	m := qM(txn, msgID)
	m.Data = []byte(data)
	return m
}

func qAck(group string, call, ret int64, status string, success bool, ids ...string) hop {
	var outs []qAckOut
	for range ids {
		outs = append(outs, qAckOut{Success: success})
	}
	return hop{client: 3, kind: "ack", call: call, ret: ret, in: qAckIn{Group: group, IDs: ids, Status: status}, out: outs}
}

// both delivers and acks a and b in order to both groups, from t on.
func both(t int64) []hop {
	var hs []hop
	for _, g := range []string{"g1", "g2"} {
		hs = append(hs, qPop(g, t, t+5, qM("a", "ma"), qM("b", "mb")),
			qAck(g, t+6, t+8, "completed", true, "a"), qAck(g, t+9, t+10, "completed", true, "b"))
		t += 20
	}
	return hs
}

func TestQueueChecker(t *testing.T) {
	pushAB := qPush(0, 10, history.OK, qItem("a", "ma", 1), qItem("b", "mb", 2))
	cases := []struct {
		name string
		ops  []hop
		dlq  map[string]map[string]bool
		want want
	}{
		{name: "valid, with an unknown push never delivered",
			ops:  append([]hop{pushAB, qPush(11, 12, history.Unknown, qItem("c", "", 0))}, both(20)...),
			want: want{ok: true}},
		{name: "an unknown push delivered is fine too",
			ops: append([]hop{pushAB, qPush(11, 12, history.Unknown, qItem("c", "", 0)),
				qPop("g1", 100, 110, qM("c", "mc"))}, both(20)...),
			want: want{ok: true}},
		{name: "data other than the payload pushed",
			ops: append(append([]hop{pushAB}, both(20)...),
				qPop("g1", 200, 210, qDamaged("a", "ma", `{"id":"c"}`))),
			want: want{violations: []string{`group g1 was served a with data {"id":"c"}, not the payload pushed`,
				"group g1 got a again"}}},
		{name: "lost acknowledged push",
			ops: []hop{pushAB, qPop("g1", 20, 25, qM("a", "ma"), qM("b", "mb")),
				qPop("g2", 20, 25, qM("a", "ma"))},
			want: want{lost: 1, violations: []string{"group g2 never received acknowledged push b"}}},
		{name: "a dead-lettered push is not lost",
			ops: []hop{pushAB, qPop("g1", 20, 25, qM("a", "ma"), qM("b", "mb")),
				qPop("g2", 20, 25, qM("a", "ma"))},
			dlq:  map[string]map[string]bool{"g2": {"b": true}},
			want: want{ok: true}},
		{name: "delivery after an ack",
			ops: append(append([]hop{pushAB}, both(20)...),
				qPop("g1", 200, 210, qM("a", "ma"))),
			want: want{violations: []string{"group g1 got a again"}}},
		{name: "redelivery before the ack is fine",
			ops:  append([]hop{pushAB, qPop("g1", 11, 12, qM("a", "ma"))}, both(20)...),
			want: want{ok: true}},
		{name: "out-of-order first deliveries",
			ops: []hop{pushAB,
				qPop("g1", 20, 25, qM("b", "mb")), qPop("g1", 30, 35, qM("a", "ma")),
				qPop("g2", 20, 25, qM("a", "ma"), qM("b", "mb"))},
			want: want{violations: []string{"group g1, partition P: offset 2 first delivered before offset 1"}}},
		{name: "concurrent first deliveries are not out of order",
			ops: []hop{pushAB,
				qPop("g1", 20, 40, qM("b", "mb")), qPop("g1", 30, 35, qM("a", "ma")),
				qPop("g2", 20, 25, qM("a", "ma"), qM("b", "mb"))},
			want: want{ok: true}},
		{name: "one id delivered as two message ids",
			ops:  append([]hop{pushAB, qPop("g1", 100, 110, qM("a", "ma-2"))}, both(20)...),
			want: want{duplicated: 1, violations: []string{"a was delivered as 2 different messages"}}},
		{name: "one id answered with two message ids",
			ops:  append([]hop{pushAB, qPush(11, 12, history.OK, qItem("a", "ma-2", 3))}, both(20)...),
			want: want{duplicated: 1, violations: []string{"push of a answered two message ids"}}},
		{name: "failed more often than the retry limit allows",
			ops: append([]hop{pushAB,
				qAck("g1", 11, 12, "failed", true, "a"), qAck("g1", 13, 14, "failed", true, "a"),
				qAck("g1", 15, 16, "failed", true, "a"), qAck("g1", 17, 18, "failed", true, "a"),
				qAck("g1", 19, 19, "failed", true, "a")}, both(20)...),
			want: want{violations: []string{"a failed 5 times, retryLimit is 3"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dlq := tc.dlq
			if dlq == nil {
				dlq = map[string]map[string]bool{}
			}
			tc.want.check(t, newQueue().check(mustOps(t, tc.ops), dlq))
		})
	}
}

func TestLedgerChecker(t *testing.T) {
	cases := []struct {
		name    string
		pushed  []string
		maybe   []string // pushes of unknown outcome
		charges map[string][]string
		want    want
	}{
		{name: "each order charged once", pushed: []string{"o1", "o2"},
			charges: map[string][]string{"o1": {"c1"}, "o2": {"c2"}}, want: want{ok: true}},
		{name: "an order never charged", pushed: []string{"o1", "o2"},
			charges: map[string][]string{"o1": {"c1"}},
			want:    want{lost: 1, violations: []string{"order o2 was never charged"}}},
		{name: "an order charged twice", pushed: []string{"o1"},
			charges: map[string][]string{"o1": {"c1", "c2"}},
			want:    want{duplicated: 1, violations: []string{"order o1 was charged 2 times"}}},
		{name: "a charge for an order never pushed", pushed: []string{"o1"},
			charges: map[string][]string{"o1": {"c1"}, "o9": {"c9"}},
			want:    want{violations: []string{"a charge for o9, which was never pushed"}}},
		{name: "an order whose push was unknown may be charged once", pushed: []string{"o1"}, maybe: []string{"o2", "o3"},
			charges: map[string][]string{"o1": {"c1"}, "o2": {"c2"}}, want: want{ok: true}},
		{name: "an order whose push was unknown charged twice", pushed: []string{"o1"}, maybe: []string{"o2"},
			charges: map[string][]string{"o1": {"c1"}, "o2": {"c2", "c3"}},
			want:    want{duplicated: 1, violations: []string{"order o2 (its push had an unknown outcome) was charged 2 times"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pushed := map[string]bool{}
			for _, o := range tc.pushed {
				pushed[o] = true
			}
			maybe := map[string]bool{}
			for _, o := range tc.maybe {
				maybe[o] = true
			}
			tc.want.check(t, checkLedger(pushed, maybe, tc.charges, 1))
		})
	}
}

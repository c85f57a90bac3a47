package workload

import (
	"fmt"
	"testing"
	"time"

	"github.com/queen-node/queen-node/jepsen/history"
)

// KV histories on one key unless said otherwise.

func sp(s string) *string { return &s }

func kvGet(client int, call, ret int64, value string, version uint64) hop {
	out := kvOut{}
	if value != "" {
		out = kvOut{Found: true, Value: sp(value), Version: version}
	}
	return hop{client: client, kind: kvKind, call: call, ret: ret, in: kvIn{Key: "k", Op: "get"}, out: out}
}

// kvWrite is an applied write (st OK) or one of unknown or failed outcome.
func kvWrite(client int, call, ret int64, st history.Status, op, value string, expect, version uint64) hop {
	h := hop{client: client, kind: kvKind, call: call, ret: ret, status: st,
		in: kvIn{Key: "k", Op: op, Value: value, Expect: expect}}
	if st == history.OK {
		h.out = kvOut{Applied: true, Value: sp(value), Version: version}
	}
	return h
}

// kvRefused is a write refused with the current value and version.
func kvRefused(client int, call, ret int64, op, value string, expect uint64, reason, cur string, version uint64) hop {
	out := kvOut{Reason: reason, Version: version}
	if cur != "" {
		out.Value = sp(cur)
	}
	return hop{client: client, kind: kvKind, call: call, ret: ret, in: kvIn{Key: "k", Op: op, Value: value, Expect: expect}, out: out}
}

const ok, unknown, failed = history.OK, history.Unknown, history.Fail

func TestKVChecker(t *testing.T) {
	yes, no := want{ok: true, linearizable: boolp(true)}, want{linearizable: boolp(false), violations: []string{"not linearizable"}}
	cases := []struct {
		name string
		ops  []hop
		want want
	}{
		{name: "sequential put, get, cas, get", want: yes, ops: []hop{
			kvGet(1, 0, 1, "", 0),
			kvWrite(1, 2, 3, ok, "put", "a", 0, 5),
			kvGet(2, 4, 5, "a", 5),
			kvWrite(2, 6, 7, ok, "cas", "b", 5, 9),
			kvGet(1, 8, 9, "b", 9)}},
		{name: "a stale read after a completed write", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(1, 20, 30, ok, "put", "b", 0, 8),
			kvGet(2, 40, 50, "a", 5)}},
		{name: "a read concurrent with the write may see either", want: yes, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(1, 20, 30, ok, "put", "b", 0, 8),
			kvGet(2, 25, 50, "a", 5),
			kvGet(3, 26, 27, "b", 8)}},
		{name: "two reads disagree on the order of two writes", want: no, ops: []hop{
			kvWrite(1, 0, 100, ok, "put", "a", 0, 5),
			kvWrite(2, 0, 100, ok, "put", "b", 0, 8),
			kvGet(3, 10, 20, "b", 8),
			kvGet(3, 30, 40, "a", 5)}},
		{name: "a read sees a version other than the write's", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvGet(2, 20, 30, "a", 6)}},
		{name: "versions must increase", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(1, 20, 30, ok, "put", "b", 0, 3)}},
		{name: "putIfAbsent applied on an existing key", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(1, 20, 30, ok, "putIfAbsent", "b", 0, 8)}},
		{name: "putIfAbsent refused shows the winner", want: yes, ops: []hop{
			kvWrite(1, 0, 10, ok, "putIfAbsent", "a", 0, 5),
			kvRefused(2, 20, 30, "putIfAbsent", "b", 0, "exists", "a", 5)}},
		{name: "cas applied against a stale version", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(1, 20, 30, ok, "put", "b", 0, 8),
			kvWrite(2, 40, 50, ok, "cas", "c", 5, 11)}},
		{name: "cas refused although the version matched", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvRefused(2, 20, 30, "cas", "c", 5, "version", "a", 5)}},
		{name: "cas on a missing key is refused absent", want: yes, ops: []hop{
			kvRefused(2, 0, 1, "cas", "c", 5, "absent", "", 0),
			kvWrite(1, 2, 3, ok, "put", "a", 0, 5)}},
		{name: "an unknown write that never happened", want: yes, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, unknown, "put", "x", 0, 0),
			kvGet(3, 40, 50, "a", 5),
			kvGet(3, 60, 70, "a", 5)}},
		{name: "an unknown write that happened late", want: yes, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, unknown, "put", "x", 0, 0),
			kvGet(3, 40, 50, "a", 5),
			kvGet(3, 60, 70, "x", 9),
			kvWrite(1, 80, 90, ok, "cas", "b", 9, 12)}},
		{name: "an unknown write seen, then unseen", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, unknown, "put", "x", 0, 0),
			kvGet(3, 40, 50, "x", 9),
			kvGet(3, 60, 70, "a", 5)}},
		{name: "after an unknown write the version is learnt from a refusal", want: yes, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, unknown, "put", "x", 0, 0),
			kvRefused(1, 40, 50, "cas", "b", 5, "version", "x", 9),
			kvWrite(1, 60, 70, ok, "cas", "c", 9, 12)}},
		{name: "an unknown write cannot mint an older version", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, unknown, "put", "x", 0, 0),
			kvGet(3, 40, 50, "x", 4)}},
		{name: "an unknown cas applies only from its expected version", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, unknown, "cas", "x", 4, 0),
			kvGet(3, 40, 50, "x", 9)}},
		{name: "an unknown cas that applied", want: yes, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, unknown, "cas", "x", 5, 0),
			kvGet(3, 40, 50, "x", 9)}},
		{name: "an unknown putIfAbsent on an existing key cannot apply", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, unknown, "putIfAbsent", "x", 0, 0),
			kvGet(3, 40, 50, "x", 9)}},
		{name: "a failed write is dropped, so seeing it is illegal", want: no, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			kvWrite(2, 20, 30, failed, "put", "x", 0, 0),
			kvGet(3, 40, 50, "x", 9)}},
		{name: "failed and unknown reads are dropped", want: yes, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			{client: 2, kind: kvKind, call: 20, ret: 30, status: failed, in: kvIn{Key: "k", Op: "get"}},
			{client: 2, kind: kvKind, call: 40, ret: 50, status: unknown, in: kvIn{Key: "k", Op: "get"}},
			kvGet(3, 60, 70, "a", 5)}},
		{name: "other kinds are ignored", want: yes, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			{client: 2, kind: "push", call: 20, ret: 30, in: map[string]string{"key": "k"}}}},
		{name: "a malformed answer is a violation", want: want{linearizable: boolp(true), violations: []string{"malformed"}}, ops: []hop{
			kvWrite(1, 0, 10, ok, "put", "a", 0, 5),
			{client: 2, kind: kvKind, call: 20, ret: 30, status: unknown, in: kvIn{Key: "k", Op: "get"}, err: kvMalformed + "0 results"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := checkKV(mustOps(t, tc.ops), 10*time.Second)
			tc.want.check(t, res)
			if tc.want.linearizable != nil && !*tc.want.linearizable && len(res.Files["kv.html"]) == 0 {
				t.Errorf("no visualization for an illegal history")
			}
		})
	}
}

// TestKVCheckerPartitionsByKey: a stale read on one key fails the whole
// history even when the other keys are fine.
func TestKVCheckerPartitionsByKey(t *testing.T) {
	var hs []hop
	for i, key := range []string{"k0", "k1", "k2"} {
		base := int64(i * 100)
		w1 := kvWrite(1, base, base+10, ok, "put", "a"+key, 0, uint64(base+5))
		w1.in = kvIn{Key: key, Op: "put", Value: "a" + key}
		g := kvGet(2, base+20, base+30, "a"+key, uint64(base+5))
		g.in = kvIn{Key: key, Op: "get"}
		hs = append(hs, w1, g)
	}
	want{ok: true, linearizable: boolp(true)}.check(t, checkKV(mustOps(t, hs), 10*time.Second))
	stale := kvGet(3, 500, 510, "", 0) // k1 exists by now
	stale.in = kvIn{Key: "k1", Op: "get"}
	want{linearizable: boolp(false)}.check(t, checkKV(mustOps(t, append(hs, stale)), 10*time.Second))
}

// TestKVCheckerTimeoutIsUnknown: when porcupine gives up the verdict is
// neither linearizable nor not, and the result is not OK.
func TestKVCheckerTimeoutIsUnknown(t *testing.T) {
	// Many concurrent writes of increasing versions that reads pin in a
	// contradictory order: porcupine must search a long time to say no.
	var hs []hop
	for i := 0; i < 40; i++ {
		hs = append(hs, kvWrite(i, 0, 1000, unknown, "put", fmt.Sprint("v", i), 0, 0))
	}
	for i := 0; i < 40; i++ {
		g := kvGet(100+i, int64(10+i), int64(10+i), fmt.Sprint("v", i), 0)
		g.out = kvOut{Found: true, Value: sp(fmt.Sprint("v", i)), Version: uint64(1000 - i)}
		hs = append(hs, g)
	}
	res := checkKV(mustOps(t, hs), time.Millisecond)
	if res.Linearizable != nil {
		t.Skipf("porcupine answered %v within 1 ms; the timeout path was not exercised", *res.Linearizable)
	}
	want{violations: []string{"UNKNOWN"}}.check(t, res)
}

package request

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
)

func ptr[T any](v T) *T { return &v }

// wantErr fails t unless err is an *Error of the kind with text in its
// message or detail ("" = any text).
func wantErr(t *testing.T, name string, err error, kind Kind, text string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: error %v (%T), want an *Error", name, err, err)
	}
	if e.Kind != kind {
		t.Fatalf("%s: kind %v, want %v (%v)", name, e.Kind, kind, e)
	}
	if text != "" && !strings.Contains(e.Msg+" "+e.Reason+" "+e.Detail, text) {
		t.Fatalf("%s: %q / %q / %q does not say %q", name, e.Msg, e.Reason, e.Detail, text)
	}
}

func TestPush(t *testing.T) {
	bad := []struct {
		name string
		in   PushItem
		text string
	}{
		{"NUL in queue", PushItem{Queue: "a\x00b"}, "NUL"},
		{"bad UTF-8 partition", PushItem{Queue: "q", Partition: "\xff"}, "UTF-8"},
		{"long transaction id", PushItem{Queue: "q", TransactionID: strings.Repeat("t", MaxTxnIDBytes+1)}, "TransactionId is too long"},
		{"trace id not a UUID", PushItem{Queue: "q", TraceID: ptr("nope")}, "TraceId must be a UUID"},
		{"empty trace id", PushItem{Queue: "q", TraceID: ptr("")}, "TraceId must be a UUID"},
	}
	for _, tc := range bad {
		_, err := Push([]PushItem{{Queue: "ok"}, tc.in})
		wantErr(t, tc.name, err, Invalid, tc.text)
	}
	items, err := Push([]PushItem{
		{Queue: "q"},
		{Queue: "q", Partition: "p", TransactionID: "t-1", TraceID: ptr("019dc9b7-cb4f-7c1a-9b21-7e8a5c3a40e1"), Payload: []byte(`{"a":1}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if it := items[0]; it.Partition != "Default" || string(it.Payload) != "null" || len(it.MessageId) != 16 || it.TransactionId == "" {
		t.Fatalf("defaults and minted ids: %v", it)
	}
	if it := items[1]; it.Partition != "p" || it.TransactionId != "t-1" || it.TraceId == "" || string(it.Payload) != `{"a":1}` {
		t.Fatalf("given fields: %v", it)
	}
	if string(items[0].MessageId) == string(items[1].MessageId) {
		t.Fatal("two items got one message id")
	}
}

func TestPop(t *testing.T) {
	r := New(Options{})
	cmd, wait, match, _ := r.Pop(Pop{Queue: "q", Batch: -5, Partitions: 1 << 40, Wait: time.Hour, ConsumerGroup: command.QueueModeGroup})
	if !match || cmd.Batch != 1 || cmd.Partitions != MaxPopPartitions || wait != MaxPopWait || cmd.ConsumerGroup != "" {
		t.Fatalf("clamps: %v wait %v match %v", cmd, wait, match)
	}
	cmd, _, _, _ = r.Pop(Pop{Queue: "q", Partition: "p", HasPartition: true, Partitions: 5, LeaseSeconds: 1 << 50})
	if !cmd.HasPartition || cmd.Partitions != 1 || cmd.LeaseSeconds != MaxSeconds {
		t.Fatalf("partition route: %v", cmd)
	}
	if _, _, match, _ := r.Pop(Pop{Queue: "q", ConsumerGroup: "a\x00b"}); match {
		t.Fatal("an unkeyable group matched")
	}
	on, off := true, false
	for _, c := range []struct {
		name string
		in   Pop
	}{
		{"queue mode", Pop{Queue: "q", Conflation: &on}},
		{"__QUEUE_MODE__", Pop{Queue: "q", ConsumerGroup: command.QueueModeGroup, Conflation: &on}},
		{"autoAck", Pop{Queue: "q", ConsumerGroup: "g", AutoAck: true, Conflation: &on}},
		{"a namespace pop", Pop{Namespace: "n", ConsumerGroup: "g", Conflation: &on}},
	} {
		_, _, _, err := r.Pop(c.in)
		wantErr(t, "conflation with "+c.name, err, Invalid, "conflation")
	}
	if cmd, _, _, err := r.Pop(Pop{Queue: "q", ConsumerGroup: "g", Conflation: &on}); err != nil || !cmd.HasConflation || !cmd.Conflation {
		t.Fatalf("conflation on a group: %v %v", cmd, err)
	}
	if cmd, _, _, err := r.Pop(Pop{Queue: "q", AutoAck: true, Conflation: &off}); err != nil || !cmd.HasConflation || cmd.Conflation {
		t.Fatalf("conflation=false is only a flag: %v %v", cmd, err)
	}
	subs := []struct {
		opts       Options
		mode, from string
		want       command.Pop_Subscription
	}{
		{Options{}, "", "", command.Pop_NEW},
		{Options{DefaultSubscriptionMode: "all"}, "", "", command.Pop_DEFAULT_ALL},
		{Options{}, "new-only", "", command.Pop_NEW},
		{Options{}, "from_beginning", "", command.Pop_DEFAULT_ALL},
		{Options{DefaultSubscriptionMode: "all"}, "", "now", command.Pop_NEW},
		{Options{}, "all", "2026-01-02T03:04:05Z", command.Pop_FROM},
		{Options{}, "all", "not a time", command.Pop_DEFAULT_ALL},
	}
	for _, tc := range subs {
		cmd, _, _, _ := New(tc.opts).Pop(Pop{Queue: "q", ConsumerGroup: "g", SubscriptionMode: tc.mode, SubscriptionFrom: tc.from})
		if cmd.Subscription != tc.want {
			t.Errorf("mode %q from %q (default %q): %v, want %v", tc.mode, tc.from, tc.opts.DefaultSubscriptionMode, cmd.Subscription, tc.want)
		}
	}
}

func TestAcks(t *testing.T) {
	pid := "0193a8d0-0000-7000-8000-000000000000"
	_, err := AckOne(Ack{PartitionID: pid})
	wantErr(t, "no transaction id", err, Invalid, "transactionId is required")
	_, err = AckOne(Ack{TransactionID: "t"})
	wantErr(t, "no partition id", err, Invalid, "partitionId is required")
	_, err = AckBatch("", []Ack{{TransactionID: "t"}})
	wantErr(t, "batch item without partition id", err, Invalid, "Each acknowledgment must have a valid partitionId")
	_, err = AckBatch("g\x00", nil)
	wantErr(t, "batch group", err, Invalid, "consumerGroup")

	acks, err := AckBatch("g", []Ack{
		{TransactionID: "a", PartitionID: pid, ConsumerGroup: "ignored"},
		{TransactionID: "b", PartitionID: pid, Status: ptr("bogus")},
		{TransactionID: "c", PartitionID: "not-a-uuid", Status: ptr("false-ish")},
		{TransactionID: "d", PartitionID: pid, Status: ptr("ok"), Error: ptr("why")},
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := acks.Command().GetAck().Items
	if len(sent) != 2 || sent[0].ConsumerGroup != "g" || sent[1].TransactionId != "d" || !sent[1].HasError || sent[1].Status != command.AckStatus_COMPLETED {
		t.Fatalf("sent: %v", sent)
	}
	res := acks.Results(&command.AckResult{Items: []*command.AckItemResult{{TransactionId: "a", Success: true}, {TransactionId: "d", Success: true}}})
	if len(res) != 4 || !res[0].Success || res[1].Error != "invalid status" || res[2].Error != "invalid status" || !res[3].Success {
		t.Fatalf("results in request order: %v", res)
	}
	only, _ := AckOne(Ack{TransactionID: "x", PartitionID: pid, Status: ptr("")})
	if only.Command() != nil || only.Results(nil)[0].Error != "invalid status" {
		t.Fatal("an ack of an unknown status reached the node")
	}
	for word, want := range map[string]command.AckStatus{"completed": command.AckStatus_COMPLETED, "success": command.AckStatus_COMPLETED,
		"acked": command.AckStatus_COMPLETED, "failed": command.AckStatus_FAILED, "retry": command.AckStatus_RETRY, "dlq": command.AckStatus_DLQ} {
		a, _ := AckOne(Ack{TransactionID: "x", PartitionID: pid, Status: ptr(word)})
		if got := a.Command().GetAck().Items[0].Status; got != want {
			t.Errorf("status %q: %v, want %v", word, got, want)
		}
	}
}

func TestTransaction(t *testing.T) {
	Transaction := New(Options{}).Transaction
	_, err := Transaction(Txn{NoOperations: true})
	wantErr(t, "no operations", err, Invalid, "operations array required")
	_, err = Transaction(Txn{})
	wantErr(t, "empty operations", err, Invalid, "cannot be empty")
	_, err = Transaction(Txn{KV: []KVOp{{Op: "getPrefix", Ns: "n", Prefix: "p"}}})
	wantErr(t, "getPrefix in a transaction", err, Invalid, "getPrefix is not allowed")
	// An unknown type is a verdict, but only once everything else is valid.
	_, err = Transaction(Txn{Ops: []TxnOp{{Unknown: "nope"}, {Push: []PushItem{{Queue: "a\x00"}}}}})
	wantErr(t, "a bad push behind an unknown type", err, Invalid, "NUL")
	_, err = Transaction(Txn{Ops: []TxnOp{{Unknown: "nope"}, {Unknown: "second"}}})
	var u *UnknownOpType
	if !errors.As(err, &u) || u.Type != "nope" {
		t.Fatalf("unknown op type: %v", err)
	}
	pid := "0193a8d0-0000-7000-8000-000000000000"
	txn, err := Transaction(Txn{
		Ops: []TxnOp{{Ack: &Ack{TransactionID: "t", PartitionID: pid, Status: ptr("weird")}},
			{Push: []PushItem{{Queue: "q"}, {Queue: "q2"}}}},
		KV:     []KVOp{{Op: "putIfAbsent", Ns: "m", Key: "k", HasValue: true, Value: []byte("1"), HasTTL: true, TTL: 60, Required: true}},
		Timers: []TimerOp{{Op: "schedule", Queue: "q", TimerKey: "k", HasDelay: true, DelayMs: 1e12, Txn: "x", Payload: []byte("{}")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(txn.Ops) != 3 || txn.Ops[0].GetAck().Status != command.AckStatus_COMPLETED || len(txn.Kv) != 1 || len(txn.Timers) != 1 || len(txn.TransactionId) != 16 {
		t.Fatalf("transaction: %v", txn)
	}
}

// The 2.x lease rule (addendum §4.5): an ack without its own leaseId
// inherits one only when requiredLeases and the other acks name exactly one.
func TestTransactionLeaseInheritance(t *testing.T) {
	rules := New(Options{})
	pid := "0193a8d0-0000-7000-8000-000000000000"
	acks := func(ids ...string) []TxnOp {
		var ops []TxnOp
		for i, id := range ids {
			ops = append(ops, TxnOp{Ack: &Ack{TransactionID: fmt.Sprint("t", i), PartitionID: pid, LeaseID: id}})
		}
		return ops
	}
	leasesOf := func(txn *command.Transaction) []string {
		var out []string
		for _, op := range txn.Ops {
			out = append(out, op.GetAck().LeaseId)
		}
		return out
	}
	for _, c := range []struct {
		name     string
		ops      []TxnOp
		required []string
		want     []string
	}{
		{"one required lease", acks("", ""), []string{"L1"}, []string{"L1", "L1"}},
		{"the same lease twice", acks("", ""), []string{"L1", "L1"}, []string{"L1", "L1"}},
		{"one ack names it", acks("L1", ""), nil, []string{"L1", "L1"}},
		{"required and an ack agree", acks("L1", ""), []string{"L1"}, []string{"L1", "L1"}},
		{"two required leases: unfenced", acks("", ""), []string{"L1", "L2"}, []string{"", ""}},
		{"an ack names another: unfenced", acks("L2", ""), []string{"L1"}, []string{"L2", ""}},
		{"no evidence at all", acks("", ""), nil, []string{"", ""}},
	} {
		txn, err := rules.Transaction(Txn{Ops: c.ops, RequiredLeases: c.required})
		if err != nil {
			t.Fatal(c.name, err)
		}
		if got := leasesOf(txn); !slices.Equal(got, c.want) || len(txn.RequiredLeases) != 0 {
			t.Errorf("%s: acks carry %q (required %q), want %q", c.name, got, txn.RequiredLeases, c.want)
		}
	}
}

// Positions (addendum §4.2), and the limits a transaction answers as
// verdicts (addendum §4.5) where other routes answer 413 or 400.
func TestTransactionPositionsAndVerdicts(t *testing.T) {
	rules := New(Options{})
	pos := func(mod func(*Position)) Txn {
		p := Position{Queue: "q", ConsumerGroup: "g", Offset: 7}
		mod(&p)
		return Txn{Positions: []Position{p}}
	}
	txn, err := rules.Transaction(pos(func(p *Position) { p.Metadata = []byte(`{"a":1}`) }))
	if err != nil {
		t.Fatal(err)
	}
	if p := txn.Positions[0]; p.Partition != "Default" || p.Offset != 7 || p.Forget || string(p.Metadata) != `{"a":1}` {
		t.Fatalf("position: %v", p)
	}
	if txn, err = rules.Transaction(pos(func(p *Position) { p.Forget = true })); err != nil || !txn.Positions[0].Forget {
		t.Fatalf("forget: %v %v", txn, err)
	}
	for _, c := range []struct {
		name string
		in   Txn
		text string
	}{
		{"no queue", pos(func(p *Position) { p.Queue = "" }), "queue is required"},
		{"no group", pos(func(p *Position) { p.ConsumerGroup = "" }), "consumerGroup is required"},
		{"empty partition", pos(func(p *Position) { p.HasPartition = true }), "partition must not be empty"},
		{"negative offset", pos(func(p *Position) { p.Offset = -1 }), "offset must be"},
		{"too many", Txn{Positions: make([]Position, MaxPositionsPerCall+1)}, "at most 16384 positions"},
	} {
		_, err := rules.Transaction(c.in)
		wantErr(t, c.name, err, Invalid, c.text)
	}
	verdict := func(name string, in Txn, want command.Reason) {
		t.Helper()
		_, err := rules.Transaction(in)
		var v *TxnRefused
		if !errors.As(err, &v) || v.Result.Reason != want || v.Result.Success {
			t.Errorf("%s: %v, want the verdict %s", name, err, want.Text())
		}
	}
	long := strings.Repeat("q", MaxNameBytes+1)
	verdict("metadata too large", pos(func(p *Position) { p.Metadata = make([]byte, MaxPositionMetadata+1) }), command.Reason_TOO_LARGE)
	verdict("a position's queue too long", pos(func(p *Position) { p.Queue = long }), command.Reason_NAME_TOO_LONG)
	verdict("a push's queue too long", Txn{Ops: []TxnOp{{Push: []PushItem{{Queue: long}}}}}, command.Reason_NAME_TOO_LONG)
	verdict("a KV key too large", Txn{KV: []KVOp{{Op: "get", Ns: "n", Key: strings.Repeat("k", MaxKVKeyBytes+1)}}}, command.Reason_KV_KEY_TOO_LARGE)
	// Outside a transaction the same name is a 413 name_too_long.
	_, err = Push([]PushItem{{Queue: long}})
	if e := FromError(err); e.Kind != TooLarge || e.Code != "name_too_long" || e.Kind.HTTPStatus() != 413 {
		t.Fatalf("a long queue name on push: %+v", e)
	}
}

func TestKV(t *testing.T) {
	put := func(mod func(*KVOp)) KVOp {
		op := KVOp{Op: "put", Ns: "ns", Key: "k", HasValue: true, Value: []byte("1"), Forever: true}
		mod(&op)
		return op
	}
	bad := []struct {
		name   string
		op     KVOp
		kind   Kind
		reason string
	}{
		{"unknown op", put(func(o *KVOp) { o.Op = "pop" }), Invalid, "kv_bad_op"},
		{"namespace", put(func(o *KVOp) { o.Ns = "Upper" }), Invalid, "kv_bad_namespace"},
		{"empty key", put(func(o *KVOp) { o.Key = "" }), Invalid, "kv_bad_key"},
		{"long key", put(func(o *KVOp) { o.Key = strings.Repeat("k", MaxKVKeyBytes+1) }), Invalid, "kv_bad_key"},
		{"no value", put(func(o *KVOp) { o.HasValue = false }), Invalid, "kv_bad_value"},
		{"large value", put(func(o *KVOp) { o.Value = make([]byte, MaxKVValueBytes+1) }), TooLarge, "kv_value_too_large"},
		{"no expiry", put(func(o *KVOp) { o.Forever = false }), Invalid, "kv_expiry_not_specified"},
		{"two expiries", put(func(o *KVOp) { o.HasTTL, o.TTL = true, 5 }), Invalid, "kv_expiry_not_specified"},
		{"ttl zero", put(func(o *KVOp) { o.Forever, o.HasTTL = false, true }), Invalid, "kv_expiry_not_specified"},
		{"ttl huge", put(func(o *KVOp) { o.Forever, o.HasTTL, o.TTL = false, true, MaxSeconds+1 }), Invalid, "kv_bad_ttl"},
		{"negative expect", put(func(o *KVOp) { o.HasExpect, o.Expect = true, -1 }), Invalid, "kv_bad_expect"},
		{"putIfAbsent expect", put(func(o *KVOp) { o.Op, o.HasExpect, o.Expect = "putIfAbsent", true, 3 }), Invalid, "kv_bad_expect"},
		{"cas without expect", put(func(o *KVOp) { o.Op = "cas" }), Invalid, "kv_bad_expect"},
		{"check without expect", KVOp{Op: "check", Ns: "ns", Key: "k"}, Invalid, "kv_bad_expect"},
		{"getMany no keys", KVOp{Op: "getMany", Ns: "ns"}, Invalid, "kv_bad_key"},
		{"getMany empty key", KVOp{Op: "getMany", Ns: "ns", Keys: []string{"a", ""}}, Invalid, "kv_bad_key"},
		{"getMany too many", KVOp{Op: "getMany", Ns: "ns", Keys: make([]string, MaxKVKeysPerOp+1)}, Invalid, "kv_too_many_keys"},
		{"getPrefix no prefix", KVOp{Op: "getPrefix", Ns: "ns"}, Invalid, "kv_prefix_required"},
	}
	for _, tc := range bad {
		_, err := KVBatch([]KVOp{tc.op})
		wantErr(t, tc.name, err, tc.kind, tc.reason)
	}
	_, err := KVBatch(nil)
	wantErr(t, "no ops", err, Invalid, "kv_bad_request")
	_, err = KVBatch(make([]KVOp, MaxKVOpsPerCall+1))
	wantErr(t, "too many ops", err, Invalid, "kv_too_many_ops")
	_, err = KVBatch([]KVOp{put(func(*KVOp) {}), put(func(o *KVOp) { o.Op = "delete" })})
	wantErr(t, "two writes of one key", err, Invalid, "kv_duplicate_key_in_call")

	ops, err := KVBatch([]KVOp{
		{Op: "get", Ns: "ns", Key: "k"},
		{Op: "incr", Ns: "ns", Key: "n", HasTTL: true, TTL: 10, HasMin: true, Min: -1},
		{Op: "getPrefix", Ns: "ns", Prefix: "p", Limit: 1 << 40},
		put(func(o *KVOp) { o.Key, o.Value = "null", nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ops[1].Delta != 1 || !ops[1].HasMin || ops[1].TtlSeconds != 10 || ops[2].Limit != MaxPrefixLimit || string(ops[3].Value) != "null" {
		t.Fatalf("ops: %v", ops)
	}
	if HasKVWrites(ops[:1]) || !HasKVWrites(ops) {
		t.Fatal("HasKVWrites")
	}
	for name, k := range kvKinds {
		if KVOpName(k) != name {
			t.Errorf("KVOpName(%v) = %q, want %q", k, KVOpName(k), name)
		}
	}
}

func TestTimers(t *testing.T) {
	sched := func(mod func(*TimerOp)) TimerOp {
		op := TimerOp{Op: "schedule", Queue: "q", TimerKey: "k", HasDelay: true, DelayMs: 10, Txn: "t", Payload: []byte(`{"a":1}`)}
		mod(&op)
		return op
	}
	bad := []struct {
		name   string
		op     TimerOp
		kind   Kind
		reason string
	}{
		{"server-owned field", sched(func(o *TimerOp) { o.Fields = []string{"op", "messageId"} }), Invalid, "timers_server_owned_field"},
		{"underscore field", sched(func(o *TimerOp) { o.Fields = []string{"_x"} }), Invalid, "timers_server_owned_field"},
		{"bad op", sched(func(o *TimerOp) { o.Op = "fire" }), Invalid, "timers_bad_op"},
		{"no queue", sched(func(o *TimerOp) { o.Queue = "" }), Invalid, "timers_bad_queue"},
		{"no key", sched(func(o *TimerOp) { o.TimerKey = "" }), Invalid, "timers_bad_key"},
		{"empty partition", sched(func(o *TimerOp) { o.HasPartition = true }), Invalid, "timers_bad_partition"},
		{"no delay", sched(func(o *TimerOp) { o.HasDelay = false }), Invalid, "timers_delay_required"},
		{"beyond horizon", sched(func(o *TimerOp) { o.DelayMs = MaxTimerHorizonMs + 1 }), Refused, "timer_horizon_exceeded"},
		{"no txn", sched(func(o *TimerOp) { o.Txn = "" }), Invalid, "timers_bad_txn"},
		{"payload not zstd", sched(func(o *TimerOp) { o.PayloadZstd = true }), Invalid, "timers_bad_payload"},
		{"payload too large", sched(func(o *TimerOp) { o.Payload = make([]byte, MaxTimerPayload+1) }), TooLarge, "payload_too_large"},
	}
	for _, tc := range bad {
		_, err := TimerBatch([]TimerOp{tc.op})
		wantErr(t, tc.name, err, tc.kind, tc.reason)
	}
	_, err := TimerBatch(nil)
	wantErr(t, "no ops", err, Invalid, "timers_bad_request")
	_, err = TimerBatch([]TimerOp{sched(func(*TimerOp) {}), {Op: "cancel", Queue: "q", TimerKey: "k"}})
	wantErr(t, "one key twice", err, Invalid, "appears twice")
	// The transaction array has none of the standalone limits.
	if _, err := TimerOps([]TimerOp{sched(func(o *TimerOp) { o.DelayMs = MaxTimerHorizonMs + 1 })}, false); err != nil {
		t.Fatalf("horizon in a transaction: %v", err)
	}
	ops, err := TimerBatch([]TimerOp{sched(func(o *TimerOp) { o.Payload = []byte{0xff, 0x00} }), {Op: "cancel", Queue: "q", TimerKey: "other", Txn: "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(ops[0].Payload) != `{"_raw_b64":"/wA="}` || ops[0].DelayUs != 10000 || len(ops[0].MessageId) != 16 || ops[1].Txn != "echo" {
		t.Fatalf("ops: %v", ops)
	}
	for _, p := range []string{"", "a\x00", strings.Repeat("p", MaxTimerCountPrefix+1)} {
		wantErr(t, fmt.Sprintf("count prefix %q", p), TimerCountPrefix(p), Invalid, "timers_count_prefix")
	}
	if TimerListLimit(0) != DefaultTimerList || TimerListLimit(1<<40) != MaxTimerListLimit {
		t.Fatal("list limit")
	}
	_, err = TimerCancel("q", "", "")
	wantErr(t, "cancel without key", err, Invalid, "timers_bad_request")
}

func TestConfigureAndLease(t *testing.T) {
	opts := func(name string, v int64) *command.QueueOptions {
		o := &command.QueueOptions{}
		SetOption(o, name, v)
		return o
	}
	_, err := ConfigureQueue(Configure{Queue: "q", Options: opts("leaseTime", -1)})
	wantErr(t, "negative", err, Invalid, "options.leaseTime must not be negative")
	_, err = ConfigureQueue(Configure{Queue: "q", Options: opts("ttl", MaxSeconds+1)})
	wantErr(t, "too large", err, Invalid, "options.ttl is too large")
	if _, err := ConfigureQueue(Configure{Queue: "q", Options: opts("retryDelay", MaxSeconds*1000)}); err != nil {
		t.Fatalf("retryDelay is in ms: %v", err)
	}
	cfg, err := ConfigureQueue(Configure{Queue: "q", Namespace: ptr("ns"), Options: opts("priority", -5)})
	if err != nil || cfg.Options.GetPriority() != -5 || !cfg.HasNamespace || cfg.HasTask {
		t.Fatalf("priority may be negative: %v %v", cfg, err)
	}
	if isBool, ok := OptionKind("encryptionEnabled"); !ok || !isBool {
		t.Fatal("OptionKind(encryptionEnabled)")
	}
	if _, ok := OptionKind("noSuchOption"); ok {
		t.Fatal("an unknown option is known")
	}
	if ext, err := ExtendLease("l", 0, false); err != nil || ext.Seconds != DefaultExtendSeconds {
		t.Fatalf("default extension: %v %v", ext, err)
	}
	for _, s := range []int64{0, -1, MaxExtendSeconds + 1} {
		_, err := ExtendLease("l", s, true)
		wantErr(t, fmt.Sprint("extend by ", s), err, Invalid, "seconds must be an integer")
	}
	_, err = SetSwitches(nil, nil, nil)
	wantErr(t, "no switch", err, Invalid, "name at least one")
}

// Every failure has one status on each wire: the engine's errors by the
// table, the rest as they are or internal.
func TestFromError(t *testing.T) {
	cases := []struct {
		err        error
		http       int
		grpc       codes.Code
		code       string
		retryAfter int
	}{
		{fmt.Errorf("x: %w", cluster.ErrNoLeader), 503, codes.Unavailable, "no_leader", 1},
		{cluster.ErrNotLeader, 503, codes.Unavailable, "retry", 1},
		{cluster.ErrOutcomeUnknown, 503, codes.Unavailable, "outcome_unknown", 1},
		{cluster.ErrTimeout, 503, codes.Unavailable, "timeout", 1},
		{cluster.ErrShutdown, 503, codes.Unavailable, "shutting_down", 1},
		{cluster.ErrUnknownServer, 404, codes.NotFound, "unknown_server", 0},
		{cluster.ErrInternal, 500, codes.Internal, "internal", 0},
		{idempotency.ErrInFlight, 409, codes.AlreadyExists, "idempotency_key_in_flight", 0},
		{idempotency.ErrKeyReused, 422, codes.FailedPrecondition, "idempotency_key_reused", 0},
		{idempotency.ErrKeyTooLong, 400, codes.InvalidArgument, "", 0},
		{errors.New("boom"), 500, codes.Internal, "internal", 0},
		{Bad("x"), 400, codes.InvalidArgument, "", 0},
	}
	for _, tc := range cases {
		e := FromError(tc.err)
		if e.Kind.HTTPStatus() != tc.http || e.Kind.GRPCCode() != tc.grpc || e.Code != tc.code || e.RetryAfter != tc.retryAfter {
			t.Errorf("%v: %d %v %q retry %d, want %d %v %q retry %d", tc.err, e.Kind.HTTPStatus(), e.Kind.GRPCCode(), e.Code,
				e.RetryAfter, tc.http, tc.grpc, tc.code, tc.retryAfter)
		}
	}
	if !errors.Is(FromError(cluster.ErrShutdown), cluster.ErrShutdown) {
		t.Error("the engine error is not kept")
	}
}

// A stored refusal answers a retry exactly as the first answer.
func TestRefusalRoundTrip(t *testing.T) {
	for _, e := range []*Error{Bad("items array is required"), KVBad("kv_bad_key", "op at index 0: key"),
		{Kind: TooLarge, Msg: "kv_value_too_large", Reason: "kv_value_too_large", Detail: "d"}, {Kind: Refused, Msg: "timer_horizon_exceeded"}} {
		if !e.Storable() {
			t.Fatalf("%v is not storable", e)
		}
		back := FromRefusal(e.Refusal())
		if back.Kind != e.Kind || back.Msg != e.Msg || back.Reason != e.Reason || back.Detail != e.Detail {
			t.Fatalf("%+v came back as %+v", e, back)
		}
	}
	if FromError(cluster.ErrNoLeader).Storable() || (&Error{Kind: RateLimited}).Storable() {
		t.Fatal("a retryable failure is storable")
	}
}

// The kill switches answer 503 on their own routes and 403 inside a
// transaction (verdicts.go says why).
func TestSwitchVerdicts(t *testing.T) {
	kv := KVVerdict(&command.KVBatchResult{Reason: command.Reason_KV_DISABLED})
	tm := TimersVerdict(&command.TimerBatchResult{Reason: command.Reason_TIMERS_DISABLED})
	txkv := TxnVerdict(&command.TxnResult{Reason: command.Reason_KV_DISABLED})
	txtm := TxnVerdict(&command.TxnResult{Reason: command.Reason_TIMERS_DISABLED})
	if kv.Kind.HTTPStatus() != http.StatusServiceUnavailable || kv.RetryAfter == 0 || tm.Kind.HTTPStatus() != http.StatusServiceUnavailable {
		t.Fatalf("routes: %v %v", kv, tm)
	}
	if txkv.Kind.HTTPStatus() != http.StatusForbidden || txtm.Kind.HTTPStatus() != http.StatusForbidden || txkv.Code != "kv_disabled" {
		t.Fatalf("transaction: %v %v", txkv, txtm)
	}
	if TxnVerdict(&command.TxnResult{Reason: command.Reason_REJECTED_ACK}) != nil || KVVerdict(&command.KVBatchResult{Ok: true}) != nil {
		t.Fatal("a value verdict became an error")
	}
}

func TestKVReadRate(t *testing.T) {
	r := New(Options{KVReadRate: 1})
	var refused *Error
	for i := 0; i < 5 && refused == nil; i++ {
		if err := r.AllowKVRead(); err != nil {
			refused = FromError(err)
		}
	}
	if refused == nil || refused.Kind != RateLimited || refused.RetryAfter == 0 {
		t.Fatalf("rate: %v", refused)
	}
	unlimited := New(Options{KVReadRate: -1})
	for i := 0; i < 1000; i++ {
		if err := unlimited.AllowKVRead(); err != nil {
			t.Fatal(err)
		}
	}
}

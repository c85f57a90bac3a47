package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/backup"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/msgstore"
	"github.com/queen-node/queen-node/store"
)

// popCall is one recorded Backend.Pop.
type popCall struct {
	In   *command.Pop
	Wait time.Duration
}

// fakeBackend is a Backend that records every Apply, Pop and Read and
// answers with canned results. Left alone it synthesises a plausible
// success for every command (one result per item, in order), so that a
// 5xx can only come from the handler itself. Reads run against a real,
// empty state, so read-only KV calls and the path GET route work.
type fakeBackend struct {
	mu      sync.Mutex
	applies []*command.Command
	pops    []popCall
	reads   []cluster.ReadLevel

	// ApplyFn, when set, answers Apply instead of the default synthesis.
	ApplyFn func(cmd *command.Command) (proto.Message, error)
	// PopFn, when set, answers Pop; the default is an empty result (204).
	PopFn func(in *command.Pop, wait time.Duration) (*command.PopResult, error)
	// ReadErr, when set, is returned by Read without running fn.
	ReadErr error

	state *fsm.FSM
	now   int64
}

var fakePartitionID = uuid.MustParse("0198a6b2-7c1e-7d4a-9e3f-2b1c0d9e8f7a")

// newFakeBackend builds a fake over an empty state in tb's temp dir.
func newFakeBackend(tb testing.TB) *fakeBackend {
	tb.Helper()
	dir := tb.TempDir()
	db, err := store.Open(filepath.Join(dir, "fsm.db"), fsm.Buckets,
		store.Options{NoSync: true, InitialMmapSize: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	msgs, err := msgstore.Open(filepath.Join(dir, "messages"), msgstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close(); msgs.Close() })
	state, err := fsm.New(db, msgs, fsm.Options{Logger: discardLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	return &fakeBackend{state: state, now: time.Date(2026, 4, 26, 10, 59, 28, 0, time.UTC).UnixMicro()}
}

// reset forgets every recorded call and canned answer.
func (f *fakeBackend) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applies, f.pops, f.reads = nil, nil, nil
	f.ApplyFn, f.PopFn, f.ReadErr = nil, nil, nil
}

func (f *fakeBackend) Applies() []*command.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*command.Command(nil), f.applies...)
}

func (f *fakeBackend) Pops() []popCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]popCall(nil), f.pops...)
}

func (f *fakeBackend) Reads() []cluster.ReadLevel {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cluster.ReadLevel(nil), f.reads...)
}

func (f *fakeBackend) Apply(ctx context.Context, cmd *command.Command) (proto.Message, error) {
	f.mu.Lock()
	f.applies = append(f.applies, proto.Clone(cmd).(*command.Command))
	fn := f.ApplyFn
	f.mu.Unlock()
	if fn != nil {
		return fn(cmd)
	}
	return f.defaultApply(cmd), nil
}

func (f *fakeBackend) Pop(ctx context.Context, in *command.Pop, wait time.Duration) (*command.PopResult, error) {
	f.mu.Lock()
	f.pops = append(f.pops, popCall{In: proto.Clone(in).(*command.Pop), Wait: wait})
	fn := f.PopFn
	f.mu.Unlock()
	if fn != nil {
		return fn(in, wait)
	}
	return &command.PopResult{Queue: in.Queue, ConsumerGroup: in.ConsumerGroup}, nil
}

func (f *fakeBackend) Read(ctx context.Context, level cluster.ReadLevel, fn func(*fsm.Reader) error) error {
	f.mu.Lock()
	f.reads = append(f.reads, level)
	err := f.ReadErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.state.Read(fn)
}

func (f *fakeBackend) Query(ctx context.Context, level cluster.ReadLevel, q *command.Query) (*command.QueryResult, error) {
	var res *command.QueryResult
	err := f.Read(ctx, level, func(rd *fsm.Reader) error {
		var err error
		res, err = rd.Answer(q, f.now)
		return err
	})
	return res, err
}

func (f *fakeBackend) Now() int64 { return f.now }
func (f *fakeBackend) Backup(context.Context, io.Writer, string) (backup.Header, error) {
	return backup.Header{}, errors.New("no backups here")
}

func (f *fakeBackend) Restore(context.Context, io.Reader) (backup.Header, uint64, error) {
	return backup.Header{}, 0, errors.New("no restores here")
}

func (f *fakeBackend) PartitionQueue(context.Context, []byte) (string, bool) { return "", false }

func (f *fakeBackend) LeaseQueues(context.Context, string) ([]string, bool) { return nil, false }

func (f *fakeBackend) DrainPushBuffer(context.Context, time.Duration) uint64 { return 0 }

func (f *fakeBackend) StateHash() (uint64, string, error) { return 0, "", nil }

func (f *fakeBackend) Load() cluster.LoadStatus { return cluster.LoadStatus{MaxInflight: 1} }

func (f *fakeBackend) Status() cluster.RaftStatus {
	return cluster.RaftStatus{Role: "leader", LeaderID: "fake", Term: 1}
}
func (f *fakeBackend) ID() string                   { return "fake" }
func (f *fakeBackend) Cluster() cluster.ClusterView { return cluster.ClusterView{} }
func (f *fakeBackend) RemoveServer(ctx context.Context, id, actor string) error {
	return cluster.ErrUnknownServer
}
func (f *fakeBackend) Ready() bool                                         { return true }
func (f *fakeBackend) Tenants() []string                                   { return []string{"default"} }
func (f *fakeBackend) StatusOf(context.Context) cluster.RaftStatus         { return f.Status() }
func (f *fakeBackend) GroupFor(context.Context) int                        { return 0 }
func (f *fakeBackend) Placements() []cluster.Placement                     { return nil }
func (f *fakeBackend) StateHashIn(context.Context) (uint64, string, error) { return f.StateHash() }
func (f *fakeBackend) GroupsStatus() []cluster.GroupStatus {
	return []cluster.GroupStatus{{Role: "leader", Leader: "fake"}}
}

// defaultApply answers every command the way a healthy node would when
// everything succeeds.
func (f *fakeBackend) defaultApply(cmd *command.Command) proto.Message {
	switch b := cmd.Body.(type) {
	case *command.Command_Push:
		res := &command.PushResult{}
		for _, it := range b.Push.Items {
			res.Items = append(res.Items, fakePushResult(it))
		}
		return res
	case *command.Command_Ack:
		res := &command.AckResult{}
		for _, it := range b.Ack.Items {
			res.Items = append(res.Items, &command.AckItemResult{Success: true, TransactionId: it.TransactionId,
				Queue: "orders", Partition: "Default", LeaseReleased: true})
		}
		return res
	case *command.Command_Transaction:
		res := &command.TxnResult{Success: true, TransactionId: b.Transaction.TransactionId, FailedIndex: -1}
		for _, op := range b.Transaction.Ops {
			switch o := op.Op.(type) {
			case *command.TxnOp_Ack:
				res.Results = append(res.Results, &command.TxnItemResult{Type: command.TxnItemResult_ACK, Success: true, TransactionId: o.Ack.TransactionId})
			case *command.TxnOp_Push:
				pr := fakePushResult(o.Push)
				res.Results = append(res.Results, &command.TxnItemResult{Type: command.TxnItemResult_PUSH, Success: true,
					TransactionId: pr.TransactionId, MessageId: pr.MessageId, PartitionId: pr.PartitionId, Queue: pr.Queue, Offset: 1})
			}
		}
		for _, op := range b.Transaction.Kv {
			res.Results = append(res.Results, &command.TxnItemResult{Type: command.TxnItemResult_KV, Success: true, Kv: f.fakeKVResult(op)})
		}
		return res
	case *command.Command_Kv:
		res := &command.KVBatchResult{Ok: true, FailedIndex: -1}
		for _, op := range b.Kv.Ops {
			res.Results = append(res.Results, f.fakeKVResult(op))
		}
		return res
	case *command.Command_Configure:
		c := b.Configure
		return &command.ConfigureResult{QueueId: fakePartitionID[:], PartitionId: fakePartitionID[:],
			Queue: c.Queue, Namespace: c.Namespace, Task: c.Task, Options: &command.QueueOptions{LeaseTime: proto.Int64(300), RetryLimit: proto.Int64(3)}}
	case *command.Command_ExtendLease:
		return &command.ExtendResult{Success: true, ExpiresUs: f.now + b.ExtendLease.Seconds*1e6}
	case *command.Command_DeleteQueue:
		return &command.DeleteQueueResult{}
	case *command.Command_Timers:
		res := &command.TimerBatchResult{}
		for i, op := range b.Timers.Ops {
			r := &command.TimerResult{Ok: true, Status: command.TimerResult_SCHEDULED, Queue: op.Queue, TimerKey: op.TimerKey,
				Txn: op.Txn, MessageId: op.MessageId, DeliverAtUs: f.now + op.DelayUs, OpIndex: uint32(i)}
			if op.Kind == command.TimerOp_CANCEL {
				r.Ok, r.Status = false, command.TimerResult_ABSENT
			}
			res.Results = append(res.Results, r)
		}
		return res
	case *command.Command_Locks:
		res := &command.LocksResult{}
		for _, op := range b.Locks.Ops {
			res.Results = append(res.Results, &command.LockResult{Kind: op.Kind, Name: op.Name, Ok: true, Slot: op.Slot, Token: 7,
				Owner: op.Owner, SinceUs: f.now, ExpiresUs: f.now + op.TtlSeconds*1e6, AtUs: f.now})
		}
		return res
	}
	return &command.Response{}
}

func fakePushResult(it *command.PushItem) *command.PushItemResult {
	return &command.PushItemResult{Status: command.PushItemResult_QUEUED, TransactionId: it.TransactionId,
		MessageId: it.MessageId, PartitionId: fakePartitionID[:], Queue: it.Queue, TraceId: it.TraceId, Offset: 1}
}

// fakeKVResult answers a KV op as if the key did not exist and every write
// applied; a write echoes the value it stored.
func (f *fakeBackend) fakeKVResult(op *command.KVOp) *command.KVResult {
	r := &command.KVResult{Kind: op.Kind, Key: op.Key}
	switch op.Kind {
	case command.KVOp_GET, command.KVOp_GET_MANY, command.KVOp_GET_PREFIX:
		if op.Kind == command.KVOp_GET_MANY {
			r.Missing = op.Keys
		}
		return r
	case command.KVOp_DELETE, command.KVOp_CHECK:
		r.Applied, r.Reason = op.Kind == command.KVOp_CHECK, command.KVResult_ABSENT
		return r
	case command.KVOp_INCR:
		r.Applied, r.HasValue, r.Value, r.Version = true, true, []byte("1"), 7
	default:
		v := op.Value
		if v == nil {
			v = []byte("null")
		}
		r.Applied, r.HasValue, r.Value, r.Version = true, true, v, 7
	}
	if !op.Forever {
		r.ExpiresUs = f.now + 1e6
	}
	r.UpdatedUs = f.now
	return r
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestAPI builds the real handler over fb. maxBody 0 keeps the default.
func newTestAPI(fb *fakeBackend, maxBody int64) *API {
	return New(Config{Backend: fb, Logger: discardLogger(), MaxBodyBytes: maxBody,
		Registry: prometheus.NewRegistry(), RequestTimeout: 2 * time.Second, Version: "test"})
}

// serve sends one request through h.
func serve(h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// errorEnvelope checks that rec carries the spec's error envelope (§1.1):
// a JSON object with a string "error". It returns the decoded object.
func errorEnvelope(t testing.TB, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("error body is not a JSON object: %v; body %q", err, rec.Body.String())
	}
	e, ok := body["error"].(string)
	if !ok || e == "" {
		t.Fatalf(`error body has no non-empty string "error": %s`, rec.Body.String())
	}
	return body
}

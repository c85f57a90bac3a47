package httpapi

import (
	"context"
	"encoding/json"
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

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/store"
)

// popCall is one recorded Backend.Pop.
type popCall struct {
	In   *fsmpb.Pop
	Wait time.Duration
}

// fakeBackend is a Backend that records every Apply, Pop and Read and
// answers with canned results. Left alone it synthesises a plausible
// success for every command (one result per item, in order), so that a
// 5xx can only come from the handler itself. Reads run against a real,
// empty state, so read-only KV calls and the path GET route work.
type fakeBackend struct {
	mu      sync.Mutex
	applies []*fsmpb.Command
	pops    []popCall
	reads   []cluster.ReadLevel

	// ApplyFn, when set, answers Apply instead of the default synthesis.
	ApplyFn func(cmd *fsmpb.Command) (proto.Message, error)
	// PopFn, when set, answers Pop; the default is an empty result (204).
	PopFn func(in *fsmpb.Pop, wait time.Duration) (*fsmpb.PopResult, error)
	// ReadErr, when set, is returned by Read without running fn.
	ReadErr error

	state *fsm.FSM
	now   int64
}

var fakePartitionID = uuid.MustParse("0198a6b2-7c1e-7d4a-9e3f-2b1c0d9e8f7a")

// newFakeBackend builds a fake over an empty state in tb's temp dir.
func newFakeBackend(tb testing.TB) *fakeBackend {
	tb.Helper()
	db, err := store.Open(filepath.Join(tb.TempDir(), "fsm.db"), fsm.Buckets,
		store.Options{NoSync: true, InitialMmapSize: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	state, err := fsm.New(db, fsm.Options{Logger: discardLogger()})
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

func (f *fakeBackend) Applies() []*fsmpb.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fsmpb.Command(nil), f.applies...)
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

func (f *fakeBackend) Apply(ctx context.Context, cmd *fsmpb.Command) (proto.Message, error) {
	f.mu.Lock()
	f.applies = append(f.applies, proto.Clone(cmd).(*fsmpb.Command))
	fn := f.ApplyFn
	f.mu.Unlock()
	if fn != nil {
		return fn(cmd)
	}
	return f.defaultApply(cmd), nil
}

func (f *fakeBackend) Pop(ctx context.Context, in *fsmpb.Pop, wait time.Duration) (*fsmpb.PopResult, error) {
	f.mu.Lock()
	f.pops = append(f.pops, popCall{In: proto.Clone(in).(*fsmpb.Pop), Wait: wait})
	fn := f.PopFn
	f.mu.Unlock()
	if fn != nil {
		return fn(in, wait)
	}
	return &fsmpb.PopResult{Queue: in.Queue, ConsumerGroup: in.ConsumerGroup}, nil
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

func (f *fakeBackend) Now() int64 { return f.now }
func (f *fakeBackend) Status() cluster.RaftStatus {
	return cluster.RaftStatus{Role: "leader", LeaderID: "fake", Term: 1}
}
func (f *fakeBackend) ID() string                   { return "fake" }
func (f *fakeBackend) Cluster() cluster.ClusterView { return cluster.ClusterView{} }
func (f *fakeBackend) RemoveServer(ctx context.Context, id string) error {
	return cluster.ErrUnknownServer
}
func (f *fakeBackend) Ready() bool { return true }

// defaultApply answers every command the way a healthy node would when
// everything succeeds.
func (f *fakeBackend) defaultApply(cmd *fsmpb.Command) proto.Message {
	switch b := cmd.Body.(type) {
	case *fsmpb.Command_Push:
		res := &fsmpb.PushResult{}
		for _, it := range b.Push.Items {
			res.Items = append(res.Items, fakePushResult(it))
		}
		return res
	case *fsmpb.Command_Ack:
		res := &fsmpb.AckResult{}
		for _, it := range b.Ack.Items {
			res.Items = append(res.Items, &fsmpb.AckItemResult{Success: true, TransactionId: it.TransactionId,
				Queue: "orders", Partition: "Default", LeaseReleased: true})
		}
		return res
	case *fsmpb.Command_Transaction:
		res := &fsmpb.TxnResult{Success: true, TransactionId: b.Transaction.TransactionId, FailedIndex: -1}
		for _, op := range b.Transaction.Ops {
			switch o := op.Op.(type) {
			case *fsmpb.TxnOp_Ack:
				res.Results = append(res.Results, &fsmpb.TxnItemResult{Type: "ack", Success: true, TransactionId: o.Ack.TransactionId})
			case *fsmpb.TxnOp_Push:
				pr := fakePushResult(o.Push)
				res.Results = append(res.Results, &fsmpb.TxnItemResult{Type: "push", Success: true,
					TransactionId: pr.TransactionId, MessageId: pr.MessageId, PartitionId: pr.PartitionId, Queue: pr.Queue, Offset: 1})
			}
		}
		for _, op := range b.Transaction.Kv {
			res.Results = append(res.Results, &fsmpb.TxnItemResult{Type: "kv", Success: true, Kv: f.fakeKVResult(op)})
		}
		return res
	case *fsmpb.Command_Kv:
		res := &fsmpb.KVBatchResult{Ok: true, FailedIndex: -1}
		for _, op := range b.Kv.Ops {
			res.Results = append(res.Results, f.fakeKVResult(op))
		}
		return res
	case *fsmpb.Command_Configure:
		c := b.Configure
		return &fsmpb.ConfigureResult{QueueId: fakePartitionID[:], PartitionId: fakePartitionID[:],
			Queue: c.Queue, Namespace: c.Namespace, Task: c.Task, Options: &fsmpb.QueueOptionsOut{LeaseTime: 300, RetryLimit: 3}}
	case *fsmpb.Command_ExtendLease:
		return &fsmpb.ExtendResult{Success: true, ExpiresUs: f.now + b.ExtendLease.Seconds*1e6}
	case *fsmpb.Command_DeleteQueue:
		return &fsmpb.DeleteQueueResult{}
	}
	return &fsmpb.Response{}
}

func fakePushResult(it *fsmpb.PushItem) *fsmpb.PushItemResult {
	return &fsmpb.PushItemResult{Status: fsmpb.PushItemResult_QUEUED, TransactionId: it.TransactionId,
		MessageId: it.MessageId, PartitionId: fakePartitionID[:], Queue: it.Queue, TraceId: it.TraceId, Offset: 1}
}

// fakeKVResult answers a KV op as if the key did not exist and every write
// applied; a write echoes the value it stored.
func (f *fakeBackend) fakeKVResult(op *fsmpb.KVOp) *fsmpb.KVResult {
	r := &fsmpb.KVResult{Op: kvstore.OpName(op.Kind), Key: op.Key}
	switch op.Kind {
	case fsmpb.KVOp_GET, fsmpb.KVOp_GET_MANY, fsmpb.KVOp_GET_PREFIX:
		if op.Kind == fsmpb.KVOp_GET_MANY {
			r.Missing = op.Keys
		}
		return r
	case fsmpb.KVOp_DELETE, fsmpb.KVOp_CHECK:
		r.Applied, r.Reason = op.Kind == fsmpb.KVOp_CHECK, "absent"
		return r
	case fsmpb.KVOp_INCR:
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

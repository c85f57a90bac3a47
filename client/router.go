package queen

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

// Leader routing: every write of a queen-node cluster is made by its Raft
// leader, and a node that is not the leader forwards what it receives
// there, which costs the follower a hop and the leader a second request.
// The client learns the leader's address from the nodes it was given
// (GET /health's leaderHttp, the Leader RPC's leader_grpc) and sends every
// call there; when the leader cannot be reached, or is not known, the call
// goes to the nodes it was given, in turn, and the leader is asked again.

// leaderRefresh is how often the client asks again who leads while the
// leader it knows answers (a leadership transfer leaves the old leader
// forwarding, so calls still succeed, only a hop longer).
const leaderRefresh = 10 * time.Second

// router is a transport over the given nodes and the leader they name.
type router struct {
	nodes []transport
	// dial makes a transport to a leader's address as /health or the
	// Leader RPC names it ("host:port").
	dial func(addr string) (transport, error)

	mu      sync.Mutex // nil dial: no leader routing, the nodes in turn
	leader  transport  // nil: not known
	addr    string     // the leader's address
	asked   time.Time  // when the nodes were last asked
	asking  bool
	next    int                  // the node the next call goes to while no leader is known
	dialled map[string]transport // leaders' transports by address (closed with the router)
}

func newRouter(nodes []transport, dial func(string) (transport, error)) *router {
	return &router{nodes: nodes, dial: dial, dialled: map[string]transport{}}
}

// pick is the transport of the next call: the leader when known, else the
// given nodes in turn (and the leader is looked for in the background).
func (r *router) pick() transport {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dial != nil && !r.asking && (r.leader == nil || time.Since(r.asked) > leaderRefresh) {
		r.asking, r.asked = true, time.Now()
		go r.ask()
	}
	if r.leader != nil {
		return r.leader
	}
	t := r.nodes[r.next%len(r.nodes)]
	r.next++
	return t
}

// ask asks the given nodes, in order, who leads, and routes to it.
func (r *router) ask() {
	defer func() {
		r.mu.Lock()
		r.asking = false
		r.mu.Unlock()
	}()
	for _, n := range r.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		addr, err := n.leaderAddr(ctx)
		cancel()
		if err != nil || addr == "" {
			continue
		}
		r.mu.Lock()
		t, ok := r.dialled[addr]
		r.mu.Unlock()
		if !ok {
			if t, err = r.dial(addr); err != nil {
				continue
			}
			r.mu.Lock()
			if old, raced := r.dialled[addr]; raced {
				t.close()
				t = old
			} else {
				r.dialled[addr] = t
			}
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.leader, r.addr = t, addr
		r.mu.Unlock()
		return
	}
}

// failed forgets the leader after a call to it got no answer, so that the
// next calls go to the given nodes until the leader is known again.
func (r *router) failed(t transport, err error) {
	if err == nil || Code(err) != codes.Unavailable {
		return
	}
	r.mu.Lock()
	if r.leader == t {
		r.leader, r.asked = nil, time.Time{}
	}
	r.mu.Unlock()
}

func routed[T any](r *router, f func(t transport) (T, error)) (T, error) {
	t := r.pick()
	v, err := f(t)
	r.failed(t, err)
	return v, err
}

func (r *router) push(ctx context.Context, items []pushItem) ([]PushResult, error) {
	return routed(r, func(t transport) ([]PushResult, error) { return t.push(ctx, items) })
}

func (r *router) pop(ctx context.Context, queue string, o PopOptions) ([]*Message, error) {
	return routed(r, func(t transport) ([]*Message, error) { return t.pop(ctx, queue, o) })
}

func (r *router) ack(ctx context.Context, group string, item ackItem) ([]AckResult, error) {
	return routed(r, func(t transport) ([]AckResult, error) { return t.ack(ctx, group, item) })
}

func (r *router) ackBatch(ctx context.Context, group string, items []ackItem) ([]AckResult, error) {
	return routed(r, func(t transport) ([]AckResult, error) { return t.ackBatch(ctx, group, items) })
}

func (r *router) extend(ctx context.Context, leaseID string, seconds int64) (extendResult, error) {
	return routed(r, func(t transport) (extendResult, error) { return t.extend(ctx, leaseID, seconds) })
}

func (r *router) transaction(ctx context.Context, req *txnRequest) (*TxResult, error) {
	return routed(r, func(t transport) (*TxResult, error) { return t.transaction(ctx, req) })
}

func (r *router) kv(ctx context.Context, ops []kvOp) (*kvResponse, error) {
	return routed(r, func(t transport) (*kvResponse, error) { return t.kv(ctx, ops) })
}

func (r *router) configure(ctx context.Context, queue string, o *queueOptions) error {
	_, err := routed(r, func(t transport) (struct{}, error) { return struct{}{}, t.configure(ctx, queue, o) })
	return err
}

func (r *router) deleteQueue(ctx context.Context, queue string) error {
	_, err := routed(r, func(t transport) (struct{}, error) { return struct{}{}, t.deleteQueue(ctx, queue) })
	return err
}

func (r *router) queueStats(ctx context.Context, queue string) (*QueueStats, error) {
	return routed(r, func(t transport) (*QueueStats, error) { return t.queueStats(ctx, queue) })
}

func (r *router) timers(ctx context.Context, ops []timerOp) ([]TimerResult, error) {
	return routed(r, func(t transport) ([]TimerResult, error) { return t.timers(ctx, ops) })
}

func (r *router) cancelTimer(ctx context.Context, queue, key, txn string) (*TimerResult, error) {
	return routed(r, func(t transport) (*TimerResult, error) { return t.cancelTimer(ctx, queue, key, txn) })
}

func (r *router) getTimer(ctx context.Context, queue, key string) (*Timer, error) {
	return routed(r, func(t transport) (*Timer, error) { return t.getTimer(ctx, queue, key) })
}

func (r *router) listTimers(ctx context.Context, queue, after string, limit int) (*TimerPage, error) {
	return routed(r, func(t transport) (*TimerPage, error) { return t.listTimers(ctx, queue, after, limit) })
}

func (r *router) countTimers(ctx context.Context, queue, prefix string) (int, error) {
	return routed(r, func(t transport) (int, error) { return t.countTimers(ctx, queue, prefix) })
}

func (r *router) locks(ctx context.Context, ops []lockOp) ([]Lock, error) {
	return routed(r, func(t transport) ([]Lock, error) { return t.locks(ctx, ops) })
}

func (r *router) listGroups(ctx context.Context, group string) ([]GroupQueue, error) {
	return routed(r, func(t transport) ([]GroupQueue, error) { return t.listGroups(ctx, group) })
}

func (r *router) seekGroup(ctx context.Context, group, queue, partition string, at time.Time) (*SeekResult, error) {
	return routed(r, func(t transport) (*SeekResult, error) { return t.seekGroup(ctx, group, queue, partition, at) })
}

func (r *router) deleteGroup(ctx context.Context, group, queue string, keepMetadata bool) (*DeleteGroupResult, error) {
	return routed(r, func(t transport) (*DeleteGroupResult, error) { return t.deleteGroup(ctx, group, queue, keepMetadata) })
}

func (r *router) listDeadLetters(ctx context.Context, f DLQFilter) (*DeadLetterPage, error) {
	return routed(r, func(t transport) (*DeadLetterPage, error) { return t.listDeadLetters(ctx, f) })
}

func (r *router) replayDeadLetter(ctx context.Context, dlqID string) (*Replay, error) {
	return routed(r, func(t transport) (*Replay, error) { return t.replayDeadLetter(ctx, dlqID) })
}

func (r *router) purgeDeadLetters(ctx context.Context, queue, group string) (int, error) {
	return routed(r, func(t transport) (int, error) { return t.purgeDeadLetters(ctx, queue, group) })
}

func (r *router) getMessage(ctx context.Context, partitionID, transactionID string) (*MessageInfo, error) {
	return routed(r, func(t transport) (*MessageInfo, error) { return t.getMessage(ctx, partitionID, transactionID) })
}

func (r *router) traces(ctx context.Context, partitionID, transactionID string) ([]Trace, error) {
	return routed(r, func(t transport) ([]Trace, error) { return t.traces(ctx, partitionID, transactionID) })
}

func (r *router) health(ctx context.Context) (*Health, error) {
	return routed(r, func(t transport) (*Health, error) { return t.health(ctx) })
}

func (r *router) leaderAddr(ctx context.Context) (string, error) {
	return routed(r, func(t transport) (string, error) { return t.leaderAddr(ctx) })
}

func (r *router) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	closed := map[transport]bool{}
	for _, t := range append(append([]transport{}, r.nodes...), values(r.dialled)...) {
		if closed[t] {
			continue // a leader that is one of the given nodes
		}
		closed[t] = true
		if err := t.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func values(m map[string]transport) []transport {
	out := make([]transport, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	return out
}

// leaderAddr is the address /health names as the leader's HTTP API.
func (t *httpTransport) leaderAddr(ctx context.Context) (string, error) {
	type leader struct {
		LeaderHTTP *string `json:"leaderHttp"`
	}
	var h struct {
		Raft   leader  `json:"raft"`
		Tenant *leader `json:"tenant"` // the leader of the client's tenant's group (--raft-groups)
	}
	if err := t.call(ctx, http.MethodGet, "/health", nil, &h); err != nil {
		return "", err // 503: the node knows no leader, or is far behind
	}
	l := h.Raft.LeaderHTTP
	if h.Tenant != nil {
		l = h.Tenant.LeaderHTTP
	}
	if l == nil {
		return "", nil
	}
	return strings.TrimPrefix(strings.TrimPrefix(*l, "http://"), "https://"), nil
}

// leaderAddr is the address the Leader RPC names as the leader's gRPC API.
func (t *grpcTransport) leaderAddr(ctx context.Context) (string, error) {
	res, err := t.c.Leader(ctx, &pb.LeaderRequest{})
	if err != nil {
		return "", wrap(ctx, err)
	}
	return res.LeaderGrpc, nil
}

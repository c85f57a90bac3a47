package fsm

import (
	"fmt"
	"reflect"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/streams"
)

// A QueryKind is everything the node knows about one kind of read query
// (the reads a follower forwards to the leader as values): its name, what
// a caller needs to run it, what it reads, and its answer. Like a Kind,
// every field is required.
type QueryKind struct {
	Name string
	// Access is what a caller needs to run the query.
	Access Access
	// Reads calls touch for every queue and namespace the query reads.
	Reads func(q *command.Query, touch func(Touch))
	// Answer reads the query's result from one view at time now.
	Answer func(rd *Reader, q *command.Query, now int64) *command.QueryResult
}

var queryKinds = map[reflect.Type]*QueryKind{}

func registerQuery(body any, k QueryKind) {
	key := reflect.TypeOf(body)
	if _, dup := queryKinds[key]; dup {
		panic("fsm: query kind registered twice: " + key.String())
	}
	if k.Name == "" || k.Access.Level == auth.Public || k.Reads == nil || k.Answer == nil {
		panic(fmt.Sprintf("fsm: query kind %s (%s) lacks a fact", k.Name, key))
	}
	queryKinds[key] = &k
}

// QueryKindOf is q's kind, or nil for a body this node does not know.
func QueryKindOf(q *command.Query) *QueryKind {
	if q == nil || q.Body == nil {
		return nil
	}
	return queryKinds[reflect.TypeOf(q.Body)]
}

func init() {
	readOnly := Access{Level: auth.ReadOnly}
	registerQuery(&command.Query_Kv{}, QueryKind{Name: "kv", Access: readOnly,
		Reads: func(q *command.Query, touch func(Touch)) {
			for _, op := range q.GetKv().Ops {
				touch(Namespace(op.Ns))
			}
		},
		Answer: func(rd *Reader, q *command.Query, now int64) *command.QueryResult {
			return &command.QueryResult{Body: &command.QueryResult_Kv{Kv: rd.KVReads(q.GetKv().Ops, now)}}
		}})
	registerQuery(&command.Query_Timer{}, QueryKind{Name: "timer", Access: readOnly,
		Reads: func(q *command.Query, touch func(Touch)) { touch(Queue(q.GetTimer().Queue)) },
		Answer: func(rd *Reader, q *command.Query, _ int64) *command.QueryResult {
			t := q.GetTimer()
			return &command.QueryResult{Body: &command.QueryResult_Timer{Timer: &command.TimerGetResult{
				Timer: rd.Timer(t.Queue, t.TimerKey)}}}
		}})
	registerQuery(&command.Query_Timers{}, QueryKind{Name: "timers", Access: readOnly,
		Reads: func(q *command.Query, touch func(Touch)) { touch(Queue(q.GetTimers().Queue)) },
		Answer: func(rd *Reader, q *command.Query, _ int64) *command.QueryResult {
			t := q.GetTimers()
			rows, truncated := rd.Timers(t.Queue, t.After, int(t.Limit))
			return &command.QueryResult{Body: &command.QueryResult_Timers{Timers: &command.TimerListResult{
				Timers: rows, Truncated: truncated}}}
		}})
	registerQuery(&command.Query_TimerCount{}, QueryKind{Name: "timer_count", Access: readOnly,
		Reads: func(q *command.Query, touch func(Touch)) { touch(Queue(q.GetTimerCount().Queue)) },
		Answer: func(rd *Reader, q *command.Query, _ int64) *command.QueryResult {
			t := q.GetTimerCount()
			return &command.QueryResult{Body: &command.QueryResult_TimerCount{TimerCount: &command.TimerCountResult{
				Count: uint64(rd.TimerCount(t.Queue, t.Prefix))}}}
		}})
	registerQuery(&command.Query_StreamState{}, QueryKind{Name: "stream_state", Access: readOnly,
		// the query's source as the front end read it; Answer checks it
		Reads: func(q *command.Query, touch func(Touch)) { touch(Queue(q.GetStreamState().SourceQueue)) },
		Answer: func(rd *Reader, q *command.Query, _ int64) *command.QueryResult {
			in := q.GetStreamState()
			out := &command.StreamStateGetResult{}
			if sq := streams.Query(rd.r, in.QueryId); sq != nil && sq.SourceQueue == in.SourceQueue {
				out.Found, out.Rows = true, streams.Rows(rd.r, sq, in)
			}
			return &command.QueryResult{Body: &command.QueryResult_StreamState{StreamState: out}}
		}})
	registerQuery(&command.Query_StreamQueries{}, QueryKind{Name: "stream_queries", Access: Access{Level: auth.Admin},
		Reads: func(_ *command.Query, touch func(Touch)) { touch(EveryQueue()) },
		Answer: func(rd *Reader, _ *command.Query, _ int64) *command.QueryResult {
			return &command.QueryResult{Body: &command.QueryResult_StreamQueries{StreamQueries: &command.StreamQueryListResult{
				Queries: streams.Queries(rd.r)}}}
		}})
}

// Answer runs a query at time now: the one place each query is read.
func (rd *Reader) Answer(q *command.Query, now int64) (*command.QueryResult, error) {
	k := QueryKindOf(q)
	if k == nil { // only a node of a newer version asks what this one does not know
		return nil, fmt.Errorf("fsm: unknown query %T", q.Body)
	}
	return k.Answer(rd, q, now), nil
}

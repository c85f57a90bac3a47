package fsm

import (
	"sort"
	"sync"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/queue"
)

// Flows are the per-minute counts behind the dashboard's rates (spec
// §4.12): messages pushed, popped, consumed, failed and dead-lettered, and
// what retention removed, by queue. The replicated state says where every
// cursor is, not when it moved, so these come from the entries as this
// node applies them: each entry counts in the minute of its own time (the
// time every replica applies it with), so two replicas that applied the
// same entries hold the same counts. They live in memory only: a node
// counts the entries it applied since it started (or installed a
// snapshot), which Since tells, and keeps FlowHorizonUs of them, or less
// when more than MaxFlowMinutes queue-minutes would be kept.
type Flows struct {
	mu      sync.Mutex
	by      map[flowKey]map[int64]*FlowCounts // (tenant, queue) → minute (µs) → counts
	entries int                               // queue-minutes held
	newest  int64                             // the newest minute counted
	since   int64                             // counts cover entries after this time (µs); 0 = every entry
	// staged: the apply goroutine's counts of the batch under way,
	// published once it is committed.
	staged []stagedFlow
}

type stagedFlow struct {
	minute int64
	key    flowKey
	c      FlowCounts
}

// flowKey names a queue of a tenant (its tenant.Key).
type flowKey struct{ tenant, queue string }

// FlowHorizonUs is how far back a node keeps its counts: one day.
const FlowHorizonUs = 24 * 3600 * 1e6

// MaxFlowMinutes bounds the queue-minutes a node keeps (some 30 MB): with
// very many active queues the oldest minutes go before the day is over.
const MaxFlowMinutes = 200_000

const minuteUs = 60 * 1e6

// FlowCounts are one queue's counts over a span of time.
type FlowCounts struct {
	Pushed       uint64 `json:"pushed"`
	Popped       uint64 `json:"popped"`
	Pops         uint64 `json:"pops"`
	Consumed     uint64 `json:"consumed"`
	Failed       uint64 `json:"failed"`
	DeadLettered uint64 `json:"deadLettered"`
	Conflated    uint64 `json:"conflated"` // retired undelivered by conflated deliveries (addendum §8)
	LagSumUs     int64  `json:"-"`
	LagMaxUs     int64  `json:"-"`
	// What retention removed (queue.RetainCount): retentionSeconds,
	// completedRetentionSeconds, maxWaitTimeSeconds (evicted), dead
	// letters past the retention, empty partitions; Retains counts the
	// retention steps that removed something from the queue.
	Retention          uint64 `json:"retention"`
	Completed          uint64 `json:"completed"`
	Evicted            uint64 `json:"evicted"`
	DeadLettersExpired uint64 `json:"deadLettersExpired"`
	PartitionsRemoved  uint64 `json:"partitionsRemoved"`
	Retains            uint64 `json:"retains"`
}

// Add adds o to c.
func (c *FlowCounts) Add(o FlowCounts) {
	c.Pushed += o.Pushed
	c.Popped += o.Popped
	c.Pops += o.Pops
	c.Consumed += o.Consumed
	c.Failed += o.Failed
	c.DeadLettered += o.DeadLettered
	c.Conflated += o.Conflated
	c.LagSumUs += o.LagSumUs
	c.LagMaxUs = max(c.LagMaxUs, o.LagMaxUs)
	c.Retention += o.Retention
	c.Completed += o.Completed
	c.Evicted += o.Evicted
	c.DeadLettersExpired += o.DeadLettersExpired
	c.PartitionsRemoved += o.PartitionsRemoved
	c.Retains += o.Retains
}

func newFlows(since int64) *Flows {
	return &Flows{by: map[flowKey]map[int64]*FlowCounts{}, since: since}
}

// stage notes what one kept command did (the apply goroutine only).
func (fl *Flows) stage(tenantKey string, now int64, flows map[string]*queue.Flow, res any) {
	minute := now - now%minuteUs
	names := make([]string, 0, len(flows))
	for q := range flows {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, q := range names {
		f := flows[q]
		fl.staged = append(fl.staged, stagedFlow{minute: minute, key: flowKey{tenantKey, q}, c: FlowCounts{
			Pushed: f.Pushed, Popped: f.Popped, Pops: f.Pops, Consumed: f.Consumed, Failed: f.Failed,
			DeadLettered: f.DeadLettered, Conflated: f.Conflated, LagSumUs: f.LagSumUs, LagMaxUs: f.LagMaxUs,
		}})
	}
	if rr, ok := res.(*command.RetainResult); ok {
		for _, c := range rr.Queues {
			fl.staged = append(fl.staged, stagedFlow{minute: minute, key: flowKey{tenantKey, c.Queue}, c: FlowCounts{
				Retention: c.Retention, Completed: c.Completed, Evicted: c.Evicted,
				DeadLettersExpired: c.DeadLetters, PartitionsRemoved: c.Partitions, Retains: 1,
			}})
		}
	}
}

// publish makes the staged counts of a committed batch visible.
func (fl *Flows) publish() {
	if len(fl.staged) == 0 {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.staged {
		m := fl.by[s.key]
		if m == nil {
			m = map[int64]*FlowCounts{}
			fl.by[s.key] = m
		}
		c := m[s.minute]
		if c == nil {
			c = &FlowCounts{}
			m[s.minute] = c
			fl.entries++
		}
		c.Add(s.c)
		if s.minute > fl.newest {
			fl.newest = s.minute
			fl.prune(fl.newest - FlowHorizonUs)
		}
	}
	for fl.entries > MaxFlowMinutes {
		fl.prune(fl.oldest() + minuteUs)
	}
	fl.staged = fl.staged[:0]
}

// prune drops the minutes before cut (mu held).
func (fl *Flows) prune(cut int64) {
	for q, m := range fl.by {
		for minute := range m {
			if minute < cut {
				delete(m, minute)
				fl.entries--
			}
		}
		if len(m) == 0 {
			delete(fl.by, q)
		}
	}
}

// oldest is the oldest minute held (mu held).
func (fl *Flows) oldest() int64 {
	oldest := fl.newest
	for _, m := range fl.by {
		for minute := range m {
			oldest = min(oldest, minute)
		}
	}
	return oldest
}

// reset forgets every count: the state was replaced by a snapshot whose
// last entry had time since.
func (fl *Flows) reset(since int64) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.by, fl.entries, fl.newest, fl.since, fl.staged = map[flowKey]map[int64]*FlowCounts{}, 0, 0, since, nil
}

// FlowQuery selects counts: entry times in [FromUs, ToUs), summed into
// buckets of BucketUs (a multiple of a minute; 0 = one minute) aligned to
// the Unix epoch, for the queues Queue accepts (nil = all) of the tenant
// Tenant names (a tenant.Key), or of every tenant with AllTenants.
type FlowQuery struct {
	FromUs, ToUs int64
	BucketUs     int64
	Queue        func(name string) bool
	Tenant       string
	AllTenants   bool
}

// FlowBucket is one queue's counts in one bucket.
type FlowBucket struct {
	StartUs int64
	Tenant  string // its tenant.Key
	Queue   string
	FlowCounts
}

// FlowSeries is a query's answer: buckets ordered by start, then queue
// (only buckets that counted something), and since: the counts cover
// entries after that time (µs; 0 = every entry of the log).
type FlowSeries struct {
	Buckets []FlowBucket
	SinceUs int64
}

// Series answers q.
func (fl *Flows) Series(q FlowQuery) FlowSeries {
	if q.BucketUs < minuteUs {
		q.BucketUs = minuteUs
	}
	q.BucketUs -= q.BucketUs % minuteUs
	type key struct {
		start int64
		flowKey
	}
	sums := map[key]*FlowCounts{}
	fl.mu.Lock()
	since := fl.since
	for name, m := range fl.by {
		if (!q.AllTenants && name.tenant != q.Tenant) || (q.Queue != nil && !q.Queue(name.queue)) {
			continue
		}
		for minute, c := range m {
			// a minute counts when it overlaps [from, to)
			if minute+minuteUs <= q.FromUs || minute >= q.ToUs {
				continue
			}
			k := key{minute - minute%q.BucketUs, name}
			s := sums[k]
			if s == nil {
				s = &FlowCounts{}
				sums[k] = s
			}
			s.Add(*c)
		}
	}
	fl.mu.Unlock()
	out := FlowSeries{SinceUs: since, Buckets: make([]FlowBucket, 0, len(sums))}
	for k, c := range sums {
		out.Buckets = append(out.Buckets, FlowBucket{StartUs: k.start, Tenant: k.tenant, Queue: k.queue, FlowCounts: *c})
	}
	sort.Slice(out.Buckets, func(i, j int) bool {
		a, b := out.Buckets[i], out.Buckets[j]
		if a.StartUs != b.StartUs {
			return a.StartUs < b.StartUs
		}
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		return a.Queue < b.Queue
	})
	return out
}

// Flows answers a query of this node's per-minute counts (see Flows).
func (rd *Reader) Flows(q FlowQuery) FlowSeries {
	if rd.flows == nil {
		return FlowSeries{}
	}
	q.Tenant = rd.tenant
	return rd.flows.Series(q)
}

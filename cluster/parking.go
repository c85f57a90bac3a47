package cluster

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
)

// parking holds the long-poll pops that found nothing to deliver, so that a
// change wakes as many of them as it can feed rather than all of them: with
// a thousand consumers parked on one queue, a push wakes one, not a
// thousand, and the CPU a change costs grows with what it delivers.
//
// Parked pops stand in lines, one per popKey: pops of the same key judge
// readiness identically (PopReadiness reads nothing else of the request),
// so one of them, the head, can look for all. The rules:
//   - a change to a queue signals the head of every line watching it;
//   - only the head keeps a timer for time-based readiness (a lease expiry,
//     a retry delay);
//   - a head that finds more than one partition deliverable signals that
//     many more of its line;
//   - a head that leaves (delivered, timed out, cancelled) signals the next.
//
// A signal is sticky (a buffered channel of one), so a change that lands
// while the head is looking is seen when it next parks. Hence, for every
// line, whenever the state holds something its pops could take, its head
// has a signal pending or is looking.
type parking struct {
	mu      sync.Mutex
	lines   map[popKey]*list.List // of *parked, head first
	byQueue map[string]map[popKey]struct{}
	// looks counts the looks at the state by pops with a wait (a test
	// checks that a parked pop looks only when something woke it).
	looks atomic.Int64
}

// popKey is what a pop's readiness depends on. Queue is "" for a
// namespace/task pop, which every change may feed.
type popKey struct {
	tenant                                   string // its tenant.Key
	queue, partition, group, namespace, task string // queue: fsm.QueueKey, as changes name it
	hasPartition                             bool
}

func keyOf(tenantKey string, in *command.Pop) popKey {
	q := in.Queue
	if q != "" {
		q = fsm.QueueKey(tenantKey, q)
	}
	return popKey{tenant: tenantKey, queue: q, partition: in.Partition, group: in.ConsumerGroup,
		namespace: in.Namespace, task: in.Task, hasPartition: in.HasPartition}
}

// parked is one pop in a line.
type parked struct {
	key    popKey
	signal chan struct{}
	elem   *list.Element
}

func newParking() *parking {
	return &parking{lines: make(map[popKey]*list.List), byQueue: make(map[string]map[popKey]struct{})}
}

// join puts a pop at the end of its line. Join before the first look at the
// state, so that a change between the look and the park is not missed.
func (p *parking) join(tenantKey string, in *command.Pop) *parked {
	w := &parked{key: keyOf(tenantKey, in), signal: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines[w.key]
	if l == nil {
		l = list.New()
		p.lines[w.key] = l
		keys := p.byQueue[w.key.queue]
		if keys == nil {
			keys = make(map[popKey]struct{})
			p.byQueue[w.key.queue] = keys
		}
		keys[w.key] = struct{}{}
	}
	w.elem = l.PushBack(w)
	return w
}

// leave takes a pop out of its line; a head that leaves hands the look-out
// to the next in line.
func (p *parking) leave(w *parked) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines[w.key]
	wasHead := l.Front() == w.elem
	l.Remove(w.elem)
	if l.Len() == 0 {
		delete(p.lines, w.key)
		keys := p.byQueue[w.key.queue]
		delete(keys, w.key)
		if len(keys) == 0 {
			delete(p.byQueue, w.key.queue)
		}
		return
	}
	if wasHead {
		l.Front().Value.(*parked).poke()
	}
}

// isHead reports whether w looks out for its line.
func (p *parking) isHead(w *parked) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines[w.key].Front() == w.elem
}

// waiting is how many pops stand in w's line, w included.
func (p *parking) waiting(w *parked) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines[w.key].Len()
}

// count is how many pops stand in all lines.
func (p *parking) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	for _, l := range p.lines {
		total += l.Len()
	}
	return total
}

// ParkedPops is how many long-poll pops stand in this node's lines: once a
// pop counts here, any change it may take wakes it (it joined before its
// first look). Tests wait on it instead of sleeping; /metrics shows it as
// queen_parked_pops.
func (n *Node) ParkedPops() int { return n.parking.count() }

// more signals up to n pops of w's line behind w: what w found deliverable
// beyond what it takes itself.
func (p *parking) more(w *parked, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for e := w.elem.Next(); e != nil && n > 0; e, n = e.Next(), n-1 {
		e.Value.(*parked).poke()
	}
}

// notify signals the head of every line the changed queues may feed; "*"
// (a change of no one queue) signals the head of every line.
func (p *parking) notify(queues map[string]struct{}) {
	if len(queues) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, all := queues["*"]; all {
		for _, l := range p.lines {
			l.Front().Value.(*parked).poke()
		}
		return
	}
	pokeHeads := func(queue string) {
		for k := range p.byQueue[queue] {
			p.lines[k].Front().Value.(*parked).poke()
		}
	}
	for q := range queues {
		pokeHeads(q)
	}
	pokeHeads("") // namespace/task pops span queues
}

// wakeAll signals every parked pop: leadership moved, and each must find
// the new leader itself.
func (p *parking) wakeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		for e := l.Front(); e != nil; e = e.Next() {
			e.Value.(*parked).poke()
		}
	}
}

func (w *parked) poke() {
	select {
	case w.signal <- struct{}{}:
	default: // already signalled
	}
}

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
//   - a pop that finds something and proposes its entry claims: it steps
//     out of the line (the look-out passes to the next, with any signal it
//     held) and counts as in flight until its entry has applied;
//   - a claim is granted only while the deliverable partitions a look
//     found outnumber the line's pops in flight (those will take them);
//     beyond its own, it signals that many more of the line;
//   - a claim refused leaves the line deferred: the next pop in flight
//     to finish signals the head, which looks again;
//   - a head that leaves (delivered, timed out, cancelled) signals the next.
//
// So a change that lands while pops are in flight is looked at at once by
// the head, not when their entries come back (the look-out is never held
// by a pop waiting on its own round trip), and no two pops of a line
// propose for the same partition on one look.
//
// A signal is sticky (a buffered channel of one), so a change that lands
// while the head is looking is seen when it next parks. Hence, for every
// line, whenever the state holds something its pops could take beyond what
// its pops in flight will take, its head has a signal pending or is
// looking.
type parking struct {
	mu      sync.Mutex
	lines   map[popKey]*line
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

// line is the pops of one key: those parked (or looking), head first, and
// how many have claimed and are in flight.
type line struct {
	parked   list.List // of *parked
	inFlight int
	deferred bool // a claim was refused for pops in flight: signal the head when one finishes
}

// parked is one pop of a line.
type parked struct {
	key    popKey
	signal chan struct{}
	elem   *list.Element // nil while in flight
}

func newParking() *parking {
	return &parking{lines: make(map[popKey]*line), byQueue: make(map[string]map[popKey]struct{})}
}

// join puts a pop at the end of its line. Join before the first look at the
// state, so that a change between the look and the park is not missed.
func (p *parking) join(tenantKey string, in *command.Pop) *parked {
	w := &parked{key: keyOf(tenantKey, in), signal: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enqueue(w)
	return w
}

// enqueue puts w at the end of its line, making the line if need be.
func (p *parking) enqueue(w *parked) {
	l := p.lines[w.key]
	if l == nil {
		l = &line{}
		p.lines[w.key] = l
		keys := p.byQueue[w.key.queue]
		if keys == nil {
			keys = make(map[popKey]struct{})
			p.byQueue[w.key.queue] = keys
		}
		keys[w.key] = struct{}{}
	}
	w.elem = l.parked.PushBack(w)
}

// leave takes a parked pop out of its line for good; a head that leaves
// hands the look-out to the next in line. A pop in flight leaves by finish.
func (p *parking) leave(w *parked) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.elem == nil {
		return
	}
	p.stepOut(w)
}

// stepOut takes w out of its line's parked pops, hands the look-out on if
// w was the head, and drops the line once nothing is left of it.
func (p *parking) stepOut(w *parked) {
	l := p.lines[w.key]
	wasHead := l.parked.Front() == w.elem
	l.parked.Remove(w.elem)
	w.elem = nil
	if l.parked.Len() > 0 {
		if wasHead {
			l.parked.Front().Value.(*parked).poke()
		}
		return
	}
	if l.inFlight == 0 {
		p.drop(w.key)
	}
}

// drop forgets an empty line.
func (p *parking) drop(key popKey) {
	delete(p.lines, key)
	keys := p.byQueue[key.queue]
	delete(keys, key)
	if len(keys) == 0 {
		delete(p.byQueue, key.queue)
	}
}

// claim asks for w, having found deliverable partitions (counted up to
// lookLimit), to propose its pop. It is granted while they outnumber the
// line's pops already in flight; then w steps out of its line, in flight
// until finish, and as many more parked pops as there are partitions left
// over are signalled. Refused, the line is deferred and w stays parked.
func (p *parking) claim(w *parked, deliverable int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines[w.key]
	if deliverable <= l.inFlight {
		l.deferred = true
		return false
	}
	l.inFlight++
	left := deliverable - l.inFlight
	wasHead := l.parked.Front() == w.elem
	l.parked.Remove(w.elem)
	w.elem = nil
	if wasHead && l.parked.Len() > 0 {
		select {
		case <-w.signal: // a change w had not looked at yet: the new head looks
			l.parked.Front().Value.(*parked).poke()
		default:
		}
	}
	for e := l.parked.Front(); e != nil && left > 0; e, left = e.Next(), left-1 {
		e.Value.(*parked).poke()
	}
	return true
}

// finish ends w's flight: its entry has applied (or failed). A line
// deferred for pops in flight has its head look again. With again, w
// rejoins the end of its line (its pop took nothing and waits on).
func (p *parking) finish(w *parked, again bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines[w.key]
	l.inFlight--
	if l.deferred && l.parked.Len() > 0 {
		l.deferred = false
		l.parked.Front().Value.(*parked).poke()
	}
	if again {
		p.enqueue(w)
		return
	}
	if l.parked.Len() == 0 && l.inFlight == 0 {
		p.drop(w.key)
	}
}

// isHead reports whether w looks out for its line.
func (p *parking) isHead(w *parked) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return w.elem != nil && p.lines[w.key].parked.Front() == w.elem
}

// lookLimit is how many deliverable partitions a look from w's line should
// count: one for each pop of the line, parked or in flight.
func (p *parking) lookLimit(w *parked) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines[w.key]
	return l.parked.Len() + l.inFlight
}

// count is how many pops stand in all lines.
func (p *parking) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	for _, l := range p.lines {
		total += l.parked.Len()
	}
	return total
}

// ParkedPops is how many long-poll pops stand in this node's lines: once a
// pop counts here, any change it may take wakes it (it joined before its
// first look). Tests wait on it instead of sleeping; /metrics shows it as
// queen_parked_pops.
func (n *Node) ParkedPops() int { return n.parking.count() }

// notify signals the head of every line the changed queues may feed; "*"
// (a change of no one queue) signals the head of every line.
func (p *parking) notify(queues map[string]struct{}) {
	if len(queues) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pokeHead := func(l *line) {
		if head := l.parked.Front(); head != nil {
			head.Value.(*parked).poke()
		}
	}
	if _, all := queues["*"]; all {
		for _, l := range p.lines {
			pokeHead(l)
		}
		return
	}
	pokeHeads := func(queue string) {
		for k := range p.byQueue[queue] {
			pokeHead(p.lines[k])
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
		for e := l.parked.Front(); e != nil; e = e.Next() {
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

package queue

import (
	"bytes"
	"encoding/binary"
	"math"
	"sort"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/traces"
)

// Retention and eviction (spec §5.9). A partition is a log: what retention
// removes is always a prefix, seqs FirstSeq..k-1, and the message store
// gives the space back a whole segment file at a time. Three options move k:
//
//   - retentionSeconds (with retentionEnabled): every message older than N,
//     whatever its state;
//   - completedRetentionSeconds (with retentionEnabled): messages older than
//     N that every group of the queue has consumed in this partition;
//   - maxWaitTimeSeconds (on its own): every group without a live lease
//     skips its unconsumed messages older than N (evicted, never
//     dead-lettered), and then the messages older than N that every group
//     is past go, consumed or evicted.
//
// A group whose cursor was behind what retention removed goes on from the
// oldest message still there; its cursor counts the messages it skipped,
// and a lease on removed messages is released. Dead letters go by failure
// time under the same two retention options. A partition that is empty
// and has had no message for the idle time is removed with its cursors;
// ids are never reused, so a later push to the same name makes a new one.

// retainRules are a queue's retention options as cutoffs at an entry time,
// in µs: a message created before a cutoff is older than its option; 0 =
// the option is off.
type retainRules struct {
	any, completed, wait int64
	dlq                  int64 // dead letters that failed before this go
}

func rulesOf(o *command.QueueOptions, now int64) retainRules {
	cut := func(sec int64) int64 {
		if sec <= 0 {
			return 0
		}
		return now - sec*1e6
	}
	var r retainRules
	if o.GetRetentionEnabled() {
		r.any, r.completed = cut(o.GetRetentionSeconds()), cut(o.GetCompletedRetentionSeconds())
		r.dlq = max(r.any, r.completed)
	}
	r.wait = cut(o.GetMaxWaitTimeSeconds())
	return r
}

func (r retainRules) on() bool { return r.any != 0 || r.completed != 0 || r.wait != 0 }

// segmentSpanUs is how much time one segment file of the queue's
// partitions covers at most: a quarter of its shortest retention, so files
// fall wholly behind it and go (0: no time limit, files roll by size).
func segmentSpanUs(o *command.QueueOptions) int64 {
	var shortest int64
	for _, sec := range []int64{o.GetMaxWaitTimeSeconds(), retentionIf(o, o.GetRetentionSeconds()), retentionIf(o, o.GetCompletedRetentionSeconds())} {
		if sec > 0 && (shortest == 0 || sec < shortest) {
			shortest = sec
		}
	}
	return max(shortest*1e6/4, 0)
}

func retentionIf(o *command.QueueOptions, sec int64) int64 {
	if o.GetRetentionEnabled() {
		return sec
	}
	return 0
}

// Retain applies retention, eviction and partition clean-up to at most
// limit partitions, in key order after the Retain's after key. It returns
// what it removed, per queue, and the key to go on from (nil: done).
func (t *Tx) Retain(in *command.Retain) *command.RetainResult {
	limit := int(in.Limit)
	if limit <= 0 {
		limit = 1000
	}
	res := &command.RetainResult{}
	counts := map[string]*command.RetainCount{}
	count := func(q string) *command.RetainCount {
		c := counts[q]
		if c == nil {
			c = &command.RetainCount{Queue: q}
			counts[q] = c
		}
		return c
	}
	var keys [][]byte
	cur := t.tx.Cursor(bPartitions)
	k, _ := cur.Seek(in.After)
	if k != nil && len(in.After) > 0 && bytes.Equal(k, in.After) {
		k, _ = cur.Next()
	}
	for ; k != nil; k, _ = cur.Next() {
		if len(keys) == limit {
			res.Next = keys[len(keys)-1]
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	lastQueue := ""
	for _, key := range keys {
		qname, pname := splitJoined(key)
		qs, ps := t.queue(qname), t.partition(qname, pname)
		if qs == nil || ps == nil {
			continue
		}
		rules := rulesOf(qs.rec.Options, t.now)
		if qname != lastQueue && rules.dlq != 0 {
			if n := t.expireDeadLetters(qs, rules.dlq, limit); n > 0 {
				count(qname).DeadLetters += n
			}
		}
		lastQueue = qname
		t.pruneGone(ps)
		if rules.on() {
			t.retainPartition(qs, ps, rules, count(qname))
		}
		if t.removeIfIdle(ps, in.PartitionIdleUs) {
			count(qname).Partitions++
		}
	}
	names := make([]string, 0, len(counts))
	for q, c := range counts {
		if c.Retention+c.Completed+c.Evicted+c.ExpiredWith+c.DeadLetters+c.Skipped+c.Partitions > 0 {
			names = append(names, q)
		}
	}
	sort.Strings(names)
	for _, q := range names {
		res.Queues = append(res.Queues, counts[q])
	}
	return res
}

// holder is one group's position in a partition, for retention.
type holder struct {
	group string
	cs    *cursorState
	at    uint64 // every seq <= at is consumed (or skipped) by the group
	held  bool   // a live lease: the group's messages are in flight
}

// holders are the positions of the queue's groups in ps: a group with no
// cursor there yet is where its first pop would start.
func (t *Tx) holders(qs *queueState, ps *partState) []holder {
	var out []holder
	pfx := prefix(qs.rec.Name)
	c := t.tx.Cursor(bGroups)
	for k, _ := c.Seek(pfx); k != nil && hasPrefix(k, pfx); k, _ = c.Next() {
		group := string(k[len(pfx):])
		cs := t.cursor(ps.rec.Id, group)
		at := cs.rec.Consumed
		if cs.fresh && at == 0 {
			at = startConsumed(t.batch, ps.rec, group, t.group(qs.rec.Name, group).rec)
		}
		out = append(out, holder{group: group, cs: cs, at: max(at, ps.rec.FirstSeq-1), held: leases.Live(cs.rec.Lease, t.now)})
	}
	return out
}

// firstNotBefore is the first seq of p created at or after cutoff (NextSeq
// when every message is older). createdAt grows with seq in a partition.
func (t *Tx) firstNotBefore(p *command.PartitionRecord, cutoff int64) uint64 {
	n := int(p.NextSeq - p.FirstSeq)
	i := sort.Search(n, func(i int) bool {
		e, err := t.batch.Entry(p.Id, p.FirstSeq+uint64(i))
		return err != nil || e.CreatedUs >= cutoff
	})
	return p.FirstSeq + uint64(i)
}

func (t *Tx) retainPartition(qs *queueState, ps *partState, r retainRules, c *command.RetainCount) {
	p := ps.rec
	if p.FirstSeq >= p.NextSeq {
		return
	}
	hs := t.holders(qs, ps)
	var waitEnd uint64 // seqs below it are older than maxWaitTimeSeconds
	if r.wait != 0 {
		waitEnd = t.firstNotBefore(p, r.wait)
		for i := range hs {
			h := &hs[i]
			if h.held || h.at >= waitEnd-1 {
				continue
			}
			c.Evicted += waitEnd - 1 - h.at
			t.consumed(qs, h.group, h.at, waitEnd-1)
			h.cs.rec.Consumed, h.cs.rec.RetryCount, h.cs.rec.RetryVisibleUs = waitEnd-1, 0, 0
			h.cs.dirty = true
			h.at = waitEnd - 1
		}
	}
	// minHeld: every seq <= minHeld is behind every group. No group at
	// all: nothing is consumed, except that maxWait evicts for nobody.
	minHeld := p.FirstSeq - 1
	for i, h := range hs {
		if i == 0 || h.at < minHeld {
			minHeld = h.at
		}
	}
	first := p.FirstSeq
	if r.any != 0 {
		first = max(first, t.firstNotBefore(p, r.any))
		c.Retention += first - p.FirstSeq
	}
	if r.completed != 0 {
		k := min(t.firstNotBefore(p, r.completed), minHeld+1)
		if k > first {
			c.Completed += k - first
			first = k
		}
	}
	if r.wait != 0 {
		switch k := min(waitEnd, minHeld+1); {
		case len(hs) == 0 && waitEnd > first: // nobody to wait for: evicted outright
			c.Evicted += waitEnd - first
			c.ExpiredWith += waitEnd - first
			first = waitEnd
		case len(hs) > 0 && k > first:
			c.ExpiredWith += k - first
			first = k
		}
	}
	if first > p.FirstSeq {
		t.removePrefix(qs, ps, first, c)
	}
}

// removePrefix removes seqs FirstSeq..first-1 of ps: cursors behind them
// skip to first-1 (counting what they skip), leases on them are released,
// the queue's pending count drops by what queue mode had not consumed, the
// dedup index forgets them and the message store drops the files that
// hold nothing else once the batch commits.
func (t *Tx) removePrefix(qs *queueState, ps *partState, first uint64, c *command.RetainCount) {
	p := ps.rec
	qm := t.cursor(p.Id, command.QueueModeGroup).rec.Consumed
	if unconsumed := first - 1 - min(max(qm, p.FirstSeq-1), first-1); unconsumed > 0 {
		qs.rec.Pending -= min(qs.rec.Pending, unconsumed)
		qs.dirty = true
	}
	kept := t.keepGone(ps, first)
	var behind []string
	cc := t.tx.Cursor(bCursors)
	for k, _ := cc.Seek(p.Id); k != nil && hasPrefix(k, p.Id); k, _ = cc.Next() {
		behind = append(behind, string(k[len(p.Id):]))
	}
	for _, group := range behind {
		cs := t.cursor(p.Id, group)
		cur := cs.rec
		if at := max(cur.Consumed, p.FirstSeq-1); at < first-1 {
			// Unconsumed messages go: a lease on them goes too (the
			// part of its run the group consumed is no reason: that is
			// what completed retention removes under a live lease).
			if l := cur.Lease; l != nil {
				leases.Remove(t.tx, l.LeaseId, p.Id, group)
				cur.Lease = nil
			}
			skipped := first - 1 - at
			cur.Skipped += skipped
			c.Skipped += skipped
			cur.Consumed, cur.RetryCount, cur.RetryVisibleUs = first-1, 0, 0
			cs.dirty = true
		}
	}
	t.removeTombstonesBelow(ps, first)
	traces.RemoveBefore(t.tx, p.Id, first)
	t.d.dedup.forget(t.batch, p.Id, first)
	t.d.dedup.restoreGone(kept)
	t.batch.DropBefore(p.Id, first)
	p.Count -= min(p.Count, first-p.FirstSeq)
	p.FirstSeq = first
	ps.dirty = true
	t.touch(p.Queue)
}

// removeIfIdle removes ps when it holds no message, none has arrived for
// idleUs and no group holds a live lease on it (idleUs 0: never). Its id
// is never reused; its cursors go with it.
func (t *Tx) removeIfIdle(ps *partState, idleUs int64) bool {
	p := ps.rec
	if idleUs <= 0 || p.FirstSeq < p.NextSeq || max(p.LastCreatedUs, p.CreatedUs) > t.now-idleUs {
		return false
	}
	var groups []string
	cc := t.tx.Cursor(bCursors)
	for k, _ := cc.Seek(p.Id); k != nil && hasPrefix(k, p.Id); k, _ = cc.Next() {
		groups = append(groups, string(k[len(p.Id):]))
	}
	for _, g := range groups {
		if leases.Live(t.cursor(p.Id, g).rec.Lease, t.now) {
			return false
		}
	}
	t.dropLeasesOf(p.Id)
	for _, g := range groups {
		key := pidKey(p.Id, g)
		t.tx.Delete(bCursors, key)
		delete(t.cursors, string(key))
	}
	key := join(p.Queue, p.Name)
	t.tx.Delete(bPartitionIDs, p.Id)
	t.tx.Delete(bPartitions, key)
	delete(t.partIDs, string(p.Id))
	t.cachePartition(string(key), nil)
	t.batch.RemovePartition(p.Id)
	t.d.dedup.drop(p.Id)
	t.deletePrefix(bDedupGone, p.Id, math.MaxInt)
	t.touch(p.Queue)
	return true
}

// expireDeadLetters removes, oldest first and at most limit, the queue's
// dead letters that failed before cutoff.
func (t *Tx) expireDeadLetters(qs *queueState, cutoff int64, limit int) uint64 {
	var keys [][]byte
	c := t.tx.Cursor(bDLQ)
	for k, _ := c.Seek(qs.rec.Id); k != nil && hasPrefix(k, qs.rec.Id) && len(keys) < limit; k, _ = c.Next() {
		tk := k[len(qs.rec.Id):]
		if len(tk) < 8 || int64(binary.BigEndian.Uint64(tk)) >= cutoff {
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		t.dropDeadLetterKey(qs, k)
	}
	return uint64(len(keys))
}

// RetainDue reports whether a Retain pass would find work at now: a queue
// with a retention option whose oldest stored message or dead letter is
// past it, or an empty partition idle for idleUs. It reads, never writes;
// apply decides.
func RetainDue(rd *Reader, now, idleUs int64) bool {
	rules := map[string]retainRules{}
	cur := rd.r.Cursor(bPartitions)
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		p := &command.PartitionRecord{}
		command.MustDecodeRecord(v, p)
		r, seen := rules[p.Queue]
		if !seen {
			if q := rd.Queue(p.Queue); q != nil {
				r = rulesOf(q.Options, now)
				if r.dlq != 0 && q.DlqCount > 0 && oldestDeadLetterBefore(rd, q.Id, r.dlq) {
					return true
				}
			}
			rules[p.Queue] = r
		}
		if p.FirstSeq >= p.NextSeq {
			if idleUs > 0 && max(p.LastCreatedUs, p.CreatedUs) <= now-idleUs {
				return true
			}
			continue
		}
		if !r.on() {
			continue
		}
		e, err := rd.msgs.Entry(p.Id, p.FirstSeq)
		if err == nil && e.CreatedUs < max(r.any, r.completed, r.wait) {
			return true
		}
	}
	return false
}

func oldestDeadLetterBefore(rd *Reader, qid []byte, cutoff int64) bool {
	k, _ := rd.r.Cursor(bDLQ).Seek(qid)
	if k == nil || !hasPrefix(k, qid) || len(k) < len(qid)+8 {
		return false
	}
	return int64(binary.BigEndian.Uint64(k[len(qid):])) < cutoff
}

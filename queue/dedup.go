package queue

import (
	"slices"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/msgstore"
)

// dedupIndex finds, per partition, the messages created within the queue's
// dedup window by their transactionId (addendum §4.6): what push dedup
// needs, and the first place an ack looks. It lives in memory, built from
// the message store's index entries (which keep each record's createdAt and
// transaction hash) the first time apply needs a partition, kept up to date
// by every push and pruned as entries fall out of the window, so it holds
// what the window holds, not the history (messages retention removed
// within the window included, from their records: dedup_gone.go). It is
// derived state: every answer is filtered by the rule itself (created
// within the window of this entry's time) and confirmed against the stored
// record, so what a replica
// happens to hold in memory never changes a verdict.
//
// A random-keyed B+tree of transaction ids in the state file would rewrite
// a page per message at every commit; this costs a 16-byte slot of memory
// per message in the window (21-43 bytes with the table 37-75% full as it
// grows; it halves when pruning leaves it under 1/8 full) and no write.
type dedupIndex struct {
	parts map[string]*dedupPart
}

// dedupPart maps a transaction hash to its seqs. Every seq from `from` to
// the partition's end is in it (and maybe some older ones, about to be
// pruned).
type dedupPart struct {
	pid    string // the partition's id, the key of parts
	seqs   *seqTable
	from   uint64
	fromUs int64 // createdAt of seq from, when known (0 = not read yet)
}

type dedupInsert struct {
	pid  string
	hash uint64
	seq  uint64
}

func newDedupIndex() *dedupIndex { return &dedupIndex{parts: map[string]*dedupPart{}} }

// partFor returns the index of ps for a window of windowUs, building it
// from the store: the seqs created within the window of this entry.
func (t *Tx) partFor(ps *partState, windowUs int64) *dedupPart {
	if p, ok := t.d.dedup.parts[string(ps.rec.Id)]; ok {
		t.prune(ps, p, windowUs)
		return p
	}
	from := t.firstNotBefore(ps.rec, t.now-windowUs)
	p := &dedupPart{seqs: newSeqTable(int(ps.rec.NextSeq - from)), from: from}
	if err := t.batch.EachEntry(ps.rec.Id, from, ps.rec.NextSeq, func(seq uint64, e msgstore.Entry) bool {
		if seq == from {
			p.fromUs = e.CreatedUs
		}
		p.add(e.TxnHash, seq)
		return true
	}); err != nil {
		panic("queue: dedup index of a partition: " + err.Error())
	}
	t.loadGone(ps.rec.Id, p, t.now-windowUs)
	p.pid = string(ps.rec.Id)
	t.d.dedup.parts[p.pid] = p
	return p
}

// pruneChunk bounds the entries one prune reads.
const pruneChunk = 4096

// prune drops the entries that fell out of the window, a chunk at a time,
// at most once per command and partition.
func (t *Tx) prune(ps *partState, p *dedupPart, windowUs int64) {
	cutoff := t.now - windowUs
	if p.from >= ps.rec.NextSeq || (p.fromUs != 0 && p.fromUs >= cutoff) || t.pruned[string(ps.rec.Id)] {
		return
	}
	if t.pruned == nil {
		t.pruned = map[string]bool{}
	}
	t.pruned[string(ps.rec.Id)] = true
	end := min(ps.rec.NextSeq, p.from+pruneChunk)
	p.fromUs = 0
	t.batch.EachEntry(ps.rec.Id, p.from, end, func(seq uint64, e msgstore.Entry) bool {
		if e.CreatedUs >= cutoff {
			p.fromUs = e.CreatedUs
			return false
		}
		p.removeSeq(e.TxnHash, seq)
		p.from = seq + 1
		return true
	})
}

func (p *dedupPart) add(hash, seq uint64) { p.seqs.add(hash, seq) }

// candidates are the seqs stored under hash, oldest first.
func (p *dedupPart) candidates(hash uint64) []uint64 { return p.seqs.candidates(hash) }

func (d *dedupIndex) insert(pid []byte, hash, seq uint64) dedupInsert {
	p := d.parts[string(pid)]
	p.add(hash, seq)
	return dedupInsert{pid: p.pid, hash: hash, seq: seq}
}

// remove takes an insert back (a command refused as a whole).
func (d *dedupIndex) remove(in dedupInsert) {
	if p, ok := d.parts[in.pid]; ok {
		p.removeSeq(in.hash, in.seq)
	}
}

// drop forgets a partition (deleted, or its queue's window changed: it is
// built again for the new window when next needed).
func (d *dedupIndex) drop(pid []byte) { delete(d.parts, string(pid)) }

// forget takes the seqs below first of pid out of the index (retention
// removed them; their files are still there until the batch commits).
func (d *dedupIndex) forget(b *msgstore.Batch, pid []byte, first uint64) {
	p, ok := d.parts[string(pid)]
	if !ok || p.from >= first {
		return
	}
	if err := b.EachEntry(pid, p.from, first, func(seq uint64, e msgstore.Entry) bool { p.removeSeq(e.TxnHash, seq); return true }); err != nil {
		delete(d.parts, string(pid)) // built again from the files on next use
		return
	}
	p.from, p.fromUs = first, 0
}

func (p *dedupPart) removeSeq(hash, seq uint64) { p.seqs.remove(hash, seq) }

// duplicateOf finds the message of ps that makes a push of txn a duplicate
// (addendum §4.6): the newest one with that transactionId created within
// the queue's dedup window, stored or removed by retention since
// (dedup_gone.go), and its messageId. 0: none, or the window is off.
func (t *Tx) duplicateOf(ps *partState, txn string, windowUs int64) (uint64, []byte) {
	if windowUs <= 0 {
		return 0, nil
	}
	cands := t.partFor(ps, windowUs).candidates(msgstore.TxnHash(txn))
	for i := len(cands) - 1; i >= 0; i-- {
		seq := cands[i]
		if seq < ps.rec.FirstSeq {
			g, ok := t.gone(ps.rec.Id, seq)
			if !ok {
				continue
			}
			if g.createdUs < t.now-windowUs {
				return 0, nil // candidates are oldest first: the rest are older still
			}
			if g.txn == txn {
				return seq, g.messageID
			}
			continue
		}
		e, err := t.batch.Entry(ps.rec.Id, seq)
		if err != nil || e.CreatedUs < t.now-windowUs {
			return 0, nil
		}
		if got, err := t.batch.Txn(ps.rec.Id, seq); err == nil && got == txn && !isDeleted(t.tx, ps.rec, seq) {
			var id []byte
			if m, err := t.batch.Message(ps.rec.Id, seq); err == nil {
				id = m.ID
			}
			return seq, id
		}
	}
	return 0, nil
}

// maxRunScan bounds the runs an ack resolution reads entry by entry.
const maxRunScan = 100_000

// resolveTxns finds the messages of ps that each ack item's transactionId
// names, oldest first. An ack names a message it can act on: one in the
// run leased to the item's group (live or not), the group's next message,
// one created within the dedup window, or one in a run the group's lease
// released recently (a retried ack). That is deterministic (the same on
// every replica, whatever the dedup index holds) and bounded: an id is
// never looked up through the whole history.
func (t *Tx) resolveTxns(ps *partState, items []*command.AckItem) [][]uint64 {
	pid := ps.rec.Id
	want := map[uint64]bool{}
	for _, it := range items {
		want[msgstore.TxnHash(it.TransactionId)] = true
	}
	cands := map[uint64]bool{} // seq → found in a run (true) or only in the window index (false)
	scan := func(first, last uint64) {
		lo, hi := max(first, ps.rec.FirstSeq), min(last, ps.rec.NextSeq-1)
		if lo == 0 || lo > hi || hi-lo >= maxRunScan {
			return
		}
		t.batch.EachEntry(pid, lo, hi+1, func(seq uint64, e msgstore.Entry) bool {
			if want[e.TxnHash] {
				cands[seq] = true
			}
			return true
		})
	}
	var recent []*command.LeaseRun
	seen := map[string]bool{}
	for _, it := range items {
		g := ackGroupName(it)
		if seen[g] {
			continue
		}
		seen[g] = true
		cur := t.cursor(pid, g).rec
		next := max(cur.Consumed, ps.rec.FirstSeq-1) + 1
		scan(next, next)
		if l := cur.Lease; l != nil {
			scan(l.FirstSeq, l.LastSeq)
		}
		recent = append(recent, cur.RecentRuns...)
	}
	windowUs := t.window(ps)
	if windowUs > 0 {
		p := t.partFor(ps, windowUs)
		for h := range want {
			for _, s := range p.candidates(h) {
				if s < ps.rec.FirstSeq {
					continue // removed: an ack never resolves to it
				}
				if _, ok := cands[s]; !ok {
					cands[s] = false
				}
			}
		}
	}
	if len(cands) < len(want) { // some id not found yet: the recent runs
		for _, r := range recent {
			scan(r.FirstSeq, r.LastSeq)
		}
	}
	return t.confirm(ps, items, cands, windowUs)
}

// confirm keeps the candidates whose stored record carries an item's
// transactionId (and, for those only the window index proposed, that were
// created within the window), reading the span they cover in one piece
// when it is short.
func (t *Tx) confirm(ps *partState, items []*command.AckItem, cands map[uint64]bool, windowUs int64) [][]uint64 {
	pid := ps.rec.Id
	seqs := make([]uint64, 0, len(cands))
	for s := range cands {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	out := make([][]uint64, len(items))
	if len(seqs) == 0 {
		return out
	}
	lo, hi := seqs[0], seqs[len(seqs)-1]
	var heads []msgstore.Head
	if hi-lo < 4096 {
		heads, _ = t.batch.Heads(pid, lo, hi) // else one by one below
	}
	byTxn := map[string][]uint64{}
	for _, s := range seqs {
		var txn string
		var at int64
		if int(s-lo) < len(heads) {
			txn, at = heads[s-lo].Txn, heads[s-lo].CreatedUs
		} else {
			n, err := t.batch.Txn(pid, s)
			e, eerr := t.batch.Entry(pid, s)
			if err != nil || eerr != nil {
				continue
			}
			txn, at = n, e.CreatedUs
		}
		if !cands[s] && at < t.now-windowUs {
			continue
		}
		byTxn[txn] = append(byTxn[txn], s)
	}
	for i, it := range items {
		out[i] = byTxn[it.TransactionId]
	}
	return out
}

// window is the dedup window of ps's queue.
func (t *Tx) window(ps *partState) int64 {
	if qs := t.queue(ps.rec.Queue); qs != nil {
		return DedupWindowUs(qs.rec.Options)
	}
	return DedupWindowUs(&command.QueueOptions{})
}

func ackGroupName(it *command.AckItem) string {
	if it.ConsumerGroup == "" {
		return command.QueueModeGroup
	}
	return it.ConsumerGroup
}

// PrefetchDedup reads, for each item of a push, the slot of the dedup index
// its lookup will read first, before the first lookup. Finding the slots
// works in cached memory; the reads themselves are then one tight loop of
// independent loads, whose cache misses the processor overlaps, instead of
// one miss waited out per message in Push. It changes nothing.
func (t *Tx) PrefetchDedup(items []*command.PushItem) {
	slots := make([]*seqSlot, 0, len(items))
	for _, it := range items {
		ps := t.partition(it.Queue, it.Partition)
		if ps == nil {
			continue
		}
		if p := t.d.dedup.parts[string(ps.rec.Id)]; p != nil {
			slots = append(slots, p.seqs.slotOf(msgstore.TxnHash(it.TransactionId)))
		}
	}
	var sink uint64
	for _, s := range slots {
		sink += s.seq
	}
	t.prefetched = sink
}

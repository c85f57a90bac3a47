package queue

import (
	"slices"

	"github.com/queen-node/queen-node/msgstore"
)

// dedupIndex finds a partition's message by its transactionId: push dedup
// (spec §5.8) and every ack (acks name messages by transactionId) need it.
// It lives in memory, per partition, built from the message store's index
// entries (which keep each record's transaction hash) the first time apply
// touches the partition, and kept up to date by every push. It is derived
// state: the same log gives the same index on every replica, and a hash
// only ever proposes candidates, which the stored record confirms.
//
// A random-keyed B+tree of transaction ids in the state file would rewrite
// a page per message at every commit; this costs 8-16 bytes of memory per
// stored message and no write at all.
type dedupIndex struct {
	parts map[string]*dedupPart
}

// dedupPart maps a transaction hash to its seq; the rare second seq with
// the same hash goes to more.
type dedupPart struct {
	seqs map[uint64]uint64
	more map[uint64][]uint64
}

type dedupInsert struct {
	pid  string
	hash uint64
	seq  uint64
}

func newDedupIndex() *dedupIndex { return &dedupIndex{parts: map[string]*dedupPart{}} }

// part returns the partition's index, building it from the store.
func (d *dedupIndex) part(b *msgstore.Batch, pid []byte, first, next uint64) *dedupPart {
	if p, ok := d.parts[string(pid)]; ok {
		return p
	}
	p := &dedupPart{seqs: make(map[uint64]uint64, next-first)}
	if err := b.EachEntry(pid, first, next, func(seq uint64, e msgstore.Entry) bool { p.add(e.TxnHash, seq); return true }); err != nil {
		panic("queue: dedup index of a partition: " + err.Error())
	}
	d.parts[string(pid)] = p
	return p
}

func (p *dedupPart) add(hash, seq uint64) {
	if _, taken := p.seqs[hash]; !taken {
		p.seqs[hash] = seq
		return
	}
	if p.more == nil {
		p.more = map[uint64][]uint64{}
	}
	p.more[hash] = append(p.more[hash], seq)
}

// candidates are the seqs stored under hash, oldest first.
func (p *dedupPart) candidates(hash uint64) []uint64 {
	s, ok := p.seqs[hash]
	if !ok {
		return nil
	}
	if more := p.more[hash]; len(more) > 0 {
		return append([]uint64{s}, more...)
	}
	return []uint64{s}
}

func (d *dedupIndex) insert(pid []byte, hash, seq uint64) dedupInsert {
	d.parts[string(pid)].add(hash, seq)
	return dedupInsert{pid: string(pid), hash: hash, seq: seq}
}

// remove takes an insert back (a command refused as a whole).
func (d *dedupIndex) remove(in dedupInsert) {
	p, ok := d.parts[in.pid]
	if !ok {
		return
	}
	if rest := p.more[in.hash]; len(rest) > 0 && rest[len(rest)-1] == in.seq {
		if p.more[in.hash] = rest[:len(rest)-1]; len(p.more[in.hash]) == 0 {
			delete(p.more, in.hash)
		}
		return
	}
	if p.seqs[in.hash] == in.seq {
		delete(p.seqs, in.hash)
	}
}

// drop forgets a partition (deleted).
func (d *dedupIndex) drop(pid []byte) { delete(d.parts, string(pid)) }

// forget takes the seqs from..to-1 of pid out of the index (retention
// removed them; their files are still there until the batch commits). When
// they are most of what the index holds, it is dropped instead and built
// again from what is left the next time it is needed.
func (d *dedupIndex) forget(b *msgstore.Batch, pid []byte, from, to, live uint64) {
	p, ok := d.parts[string(pid)]
	if !ok {
		return
	}
	if to-from >= live {
		delete(d.parts, string(pid))
		return
	}
	if err := b.EachEntry(pid, from, to, func(seq uint64, e msgstore.Entry) bool { p.removeSeq(e.TxnHash, seq); return true }); err != nil {
		delete(d.parts, string(pid)) // rebuilt from the files on next use
	}
}

func (p *dedupPart) removeSeq(hash, seq uint64) {
	more := p.more[hash]
	if p.seqs[hash] == seq {
		if len(more) == 0 {
			delete(p.seqs, hash)
			return
		}
		p.seqs[hash], more = more[0], more[1:]
	} else {
		i := slices.Index(more, seq)
		if i < 0 {
			return
		}
		more = slices.Delete(more, i, i+1)
	}
	if len(more) == 0 {
		delete(p.more, hash)
	} else {
		p.more[hash] = more
	}
}

// duplicateOf finds the message of ps that makes a push of txn a duplicate
// (addendum §4.6): the newest one with that transactionId created within
// the queue's dedup window. 0: none, or the window is off.
func (t *Tx) duplicateOf(ps *partState, txn string, windowUs int64) uint64 {
	p := t.d.dedup.part(t.batch, ps.rec.Id, ps.rec.FirstSeq, ps.rec.NextSeq) // before the push appends: insert needs it
	if windowUs <= 0 {
		return 0
	}
	cands := p.candidates(msgstore.TxnHash(txn))
	for i := len(cands) - 1; i >= 0; i-- {
		seq := cands[i]
		e, err := t.batch.Entry(ps.rec.Id, seq)
		if err != nil || e.CreatedUs < t.now-windowUs {
			return 0 // candidates are oldest first: the rest are older still
		}
		if got, err := t.batch.Txn(ps.rec.Id, seq); err == nil && got == txn {
			return seq
		}
	}
	return 0
}

// lookupMany finds the seqs of the messages of ps that carry each of txns,
// oldest first (none for one that is not there; more than one only where
// the dedup window let the id in again), confirming the hash candidates
// with one read of the span of records they cover when it is short (an ack
// batch names a run of consecutive messages), one read each otherwise.
func (t *Tx) lookupMany(ps *partState, txns []string) [][]uint64 {
	p := t.d.dedup.part(t.batch, ps.rec.Id, ps.rec.FirstSeq, ps.rec.NextSeq)
	out := make([][]uint64, len(txns))
	cands := make([][]uint64, len(txns))
	var lo, hi uint64
	for i, txn := range txns {
		cands[i] = p.candidates(msgstore.TxnHash(txn))
		for _, s := range cands[i] {
			if lo == 0 || s < lo {
				lo = s
			}
			hi = max(hi, s)
		}
	}
	if lo == 0 {
		return out
	}
	var names []string
	if hi-lo < 4096 {
		if ns, err := t.batch.Txns(ps.rec.Id, lo, hi); err == nil {
			names = ns
		}
	}
	for i, txn := range txns {
		for _, s := range cands[i] {
			var got string
			if names != nil {
				got = names[s-lo]
			} else if n, err := t.batch.Txn(ps.rec.Id, s); err == nil {
				got = n
			}
			if got == txn {
				out[i] = append(out[i], s)
			}
		}
	}
	return out
}

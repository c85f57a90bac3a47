package queue

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/queen-node/queen-node/msgstore"
)

// Retention removes a prefix of a partition, but a push of a removed
// message's transactionId within the queue's dedup window is still a
// duplicate: Queen 2.x's dedup index is replicated and bounded by the
// window, not by the messages (addendum §4.6). Without this, a producer
// that retries a push whose answer it lost, after the message was
// consumed and removed by completedRetentionSeconds, appends it again and
// every group gets it a second time (jepsen's queue workload with
// -retention 2s, CI of 2026-12-07).
//
// So removePrefix keeps, for each message it removes that was created
// within the window and is not deleted, its createdAt, messageId and
// transactionId in bDedupGone (pid seq → goneRecord), and the dedup index
// keeps its slot. duplicateOf confirms such a seq against that record
// instead of the message files, and a duplicate push answers its
// messageId and offset. The records leave deterministically: the
// retention pass of the partition drops those out of the window, and
// they go with their partition (removeIfIdle, the graveyard sweep). An
// ack never resolves to a removed message.

type goneRecord struct {
	createdUs int64
	messageID []byte
	txn       string
}

func encodeGone(g goneRecord) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(g.createdUs))
	b = binary.AppendUvarint(b, uint64(len(g.messageID)))
	b = append(b, g.messageID...)
	return append(b, g.txn...)
}

var errBadGone = errors.New("queue: a dedup record of a removed message is malformed")

func decodeGone(b []byte) (goneRecord, error) {
	if len(b) < 9 {
		return goneRecord{}, errBadGone
	}
	g := goneRecord{createdUs: int64(binary.BigEndian.Uint64(b))}
	n, w := binary.Uvarint(b[8:])
	if w <= 0 || uint64(len(b)-8-w) < n {
		return goneRecord{}, errBadGone
	}
	g.messageID = append([]byte(nil), b[8+w:8+w+int(n)]...)
	g.txn = string(b[8+w+int(n):])
	return g, nil
}

// gone is the record of removed seq of pid, if kept.
func (t *Tx) gone(pid []byte, seq uint64) (goneRecord, bool) {
	v := t.tx.Get(bDedupGone, tombKey(pid, seq))
	if v == nil {
		return goneRecord{}, false
	}
	g, err := decodeGone(v)
	return g, err == nil
}

// keepGone records the messages of ps below first that are within the
// dedup window of this entry (before removePrefix removes them) and
// returns their index slots, to put back once the index forgot them.
func (t *Tx) keepGone(ps *partState, first uint64) []dedupInsert {
	windowUs := t.window(ps)
	p := ps.rec
	if windowUs <= 0 || first <= p.FirstSeq {
		return nil
	}
	from := t.firstNotBefore(p, t.now-windowUs)
	if from >= first {
		return nil
	}
	heads, err := t.batch.Heads(p.Id, from, first-1)
	if err != nil {
		return nil // unreadable: the scrubber reports it; nothing to dedup against
	}
	kept := make([]dedupInsert, 0, len(heads))
	for i, h := range heads {
		seq := from + uint64(i)
		if isDeleted(t.tx, p, seq) {
			continue // the window no longer counts a deleted message
		}
		t.tx.Put(bDedupGone, tombKey(p.Id, seq), encodeGone(goneRecord{createdUs: h.CreatedUs, messageID: h.ID, txn: h.Txn}))
		kept = append(kept, dedupInsert{pid: string(p.Id), hash: h.TxnHash, seq: seq})
	}
	return kept
}

// restoreGone puts the slots keepGone returned back into the index, if it
// holds the partition (else partFor loads them when it builds it).
func (d *dedupIndex) restoreGone(kept []dedupInsert) {
	for _, in := range kept {
		if p, ok := d.parts[in.pid]; ok {
			p.add(in.hash, in.seq)
		}
	}
}

// pruneGone drops the records of ps's removed messages created before the
// dedup window of this entry, and their index slots.
func (t *Tx) pruneGone(ps *partState) {
	cutoff := t.now - t.window(ps)
	pid := ps.rec.Id
	var keys [][]byte
	var hashes []uint64
	c := t.tx.Cursor(bDedupGone)
	for k, v := c.Seek(pid); k != nil && bytes.HasPrefix(k, pid); k, v = c.Next() {
		g, err := decodeGone(v)
		if err == nil && g.createdUs >= cutoff {
			break // seqs are in creation order: the rest are within the window
		}
		keys = append(keys, append([]byte(nil), k...))
		hashes = append(hashes, msgstore.TxnHash(g.txn))
	}
	p := t.d.dedup.parts[string(pid)]
	for i, k := range keys {
		t.tx.Delete(bDedupGone, k)
		if p != nil {
			p.removeSeq(hashes[i], binary.BigEndian.Uint64(k[len(k)-8:]))
		}
	}
}

// loadGone adds the kept records of pid created at or after cutoff to p.
func (t *Tx) loadGone(pid []byte, p *dedupPart, cutoff int64) {
	c := t.tx.Cursor(bDedupGone)
	for k, v := c.Seek(pid); k != nil && bytes.HasPrefix(k, pid); k, v = c.Next() {
		if g, err := decodeGone(v); err == nil && g.createdUs >= cutoff {
			p.add(msgstore.TxnHash(g.txn), binary.BigEndian.Uint64(k[len(k)-8:]))
		}
	}
}

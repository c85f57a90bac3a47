package producers

import (
	"encoding/binary"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

var (
	bProducers = store.Bucket("kafka_producers")       // id → ProducerRecord
	bTxnIDs    = store.Bucket("kafka_producer_txnids") // transactional id → id
	bExpiry    = store.Bucket("kafka_producer_expiry") // expires_us id → nil
	bSeqs      = store.Bucket("kafka_producer_seqs")   // id partition id → ProducerSeqRecord
	bMeta      = store.Bucket("kafka_producer_meta")   // "next", "count" → uint64
)

// Buckets are the buckets this package owns.
var Buckets = []store.Bucket{bProducers, bTxnIDs, bExpiry, bSeqs, bMeta}

// KeptBatches is how many batches per producer and partition are kept to
// recognise a retry (Kafka's max.in.flight.requests.per.connection bound).
const KeptBatches = 5

// FirstID is the first producer id handed out.
const FirstID = 1000

// Tx is the staged state transaction of one entry.
type Tx interface {
	store.Reader
	Put(b store.Bucket, key, value []byte)
	Delete(b store.Bucket, key []byte)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func idKey(id int64) []byte { return u64(uint64(id)) }

func expiryKey(us, id int64) []byte {
	return binary.BigEndian.AppendUint64(u64(uint64(us)), uint64(id))
}

func seqKey(id int64, pid []byte) []byte { return append(idKey(id), pid...) }

func counter(r store.Reader, name string) uint64 {
	if v := r.Get(bMeta, []byte(name)); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func setCounter(tx Tx, name string, v uint64) { tx.Put(bMeta, []byte(name), u64(v)) }

// Producer returns a producer's record, or nil.
func Producer(r store.Reader, id int64) *command.ProducerRecord {
	v := r.Get(bProducers, idKey(id))
	if v == nil {
		return nil
	}
	p := &command.ProducerRecord{}
	command.MustDecodeRecord(v, p)
	return p
}

// Count is how many producers are kept.
func Count(r store.Reader) uint64 { return counter(r, "count") }

func put(tx Tx, p *command.ProducerRecord) {
	tx.Put(bProducers, idKey(p.Id), command.MustEncodeRecord(p))
}

// touch moves p's expiry to now+idle when less than half of idle is left
// (so that a busy producer writes its expiry index about twice per idle
// time, not on every batch); it reports whether p changed.
func touch(tx Tx, p *command.ProducerRecord, now, idleUs int64) bool {
	if idleUs <= 0 || p.ExpiresUs-now > idleUs/2 {
		return false
	}
	tx.Delete(bExpiry, expiryKey(p.ExpiresUs, p.Id))
	p.ExpiresUs = now + idleUs
	tx.Put(bExpiry, expiryKey(p.ExpiresUs, p.Id), nil)
	return true
}

// remove deletes a producer and its sequence state.
func remove(tx Tx, p *command.ProducerRecord) {
	tx.Delete(bProducers, idKey(p.Id))
	tx.Delete(bExpiry, expiryKey(p.ExpiresUs, p.Id))
	if p.TransactionalId != "" {
		tx.Delete(bTxnIDs, []byte(p.TransactionalId))
	}
	pfx := idKey(p.Id)
	var keys [][]byte
	c := tx.Cursor(bSeqs)
	for k, _ := c.Seek(pfx); k != nil && len(k) >= 8 && string(k[:8]) == string(pfx); k, _ = c.Next() {
		keys = append(keys, append([]byte(nil), k...))
	}
	for _, k := range keys {
		tx.Delete(bSeqs, k)
	}
	setCounter(tx, "count", counter(tx, "count")-1)
}

// oldest is the producer whose expiry comes first, or nil.
func oldest(tx Tx) *command.ProducerRecord {
	k, _ := tx.Cursor(bExpiry).First()
	if len(k) != 16 {
		return nil
	}
	return Producer(tx, int64(binary.BigEndian.Uint64(k[8:])))
}

// Init hands out a producer id and epoch (InitProducerId): a new id for an
// idempotent producer; for a transactional id the same id with the next
// epoch, which fences every holder of an older one (a new id when the
// epoch would overflow). Past max producers the least recently used go.
func Init(tx Tx, in *command.KafkaInitProducer, now int64) *command.KafkaInitProducerResult {
	res := &command.KafkaInitProducerResult{}
	var p *command.ProducerRecord
	if in.TransactionalId != "" {
		if v := tx.Get(bTxnIDs, []byte(in.TransactionalId)); len(v) == 8 {
			p = Producer(tx, int64(binary.BigEndian.Uint64(v)))
		}
	}
	if p != nil && p.Epoch < math.MaxInt16-1 {
		p.Epoch++
		p.TxnTimeoutMs = in.TxnTimeoutMs
		tx.Delete(bExpiry, expiryKey(p.ExpiresUs, p.Id))
	} else {
		if p != nil {
			remove(tx, p)
		}
		for max := uint64(in.MaxProducers); max > 0 && Count(tx) >= max; res.Evicted++ {
			o := oldest(tx)
			if o == nil {
				break
			}
			remove(tx, o)
		}
		next := max(counter(tx, "next"), FirstID)
		setCounter(tx, "next", next+1)
		setCounter(tx, "count", Count(tx)+1)
		p = &command.ProducerRecord{Id: int64(next), TransactionalId: in.TransactionalId, TxnTimeoutMs: in.TxnTimeoutMs}
		if in.TransactionalId != "" {
			tx.Put(bTxnIDs, []byte(in.TransactionalId), idKey(p.Id))
		}
	}
	p.UsedUs = now
	p.ExpiresUs = now + max(in.IdleUs, 1)
	tx.Put(bExpiry, expiryKey(p.ExpiresUs, p.Id), nil)
	put(tx, p)
	res.ProducerId, res.ProducerEpoch = p.Id, p.Epoch
	return res
}

// Current reports whether (id, epoch) is the producer's current epoch; the
// Kafka error code when it is not (PRODUCER_FENCED for an older epoch of a
// transactional id, UNKNOWN_PRODUCER_ID for an id not kept).
func Current(r store.Reader, id int64, epoch int32) int16 {
	_, code := current(r, id, epoch)
	return code
}

// current is Current with the producer it read.
func current(r store.Reader, id int64, epoch int32) (*command.ProducerRecord, int16) {
	p := Producer(r, id)
	switch {
	case p == nil:
		return nil, kerr.UnknownProducerID.Code
	case epoch < p.Epoch:
		if p.TransactionalId != "" {
			return p, kerr.ProducerFenced.Code
		}
		return p, kerr.InvalidProducerEpoch.Code
	case epoch > p.Epoch:
		return p, kerr.InvalidProducerEpoch.Code
	}
	return p, 0
}

// Verdict is what Check says of a batch.
type Verdict struct {
	Code       int16  // a Kafka error code; 0 = append it (or Duplicate)
	Duplicate  bool   // the batch was appended before, at BaseOffset
	BaseOffset uint64 // the duplicate's first offset

	// What Check read, for Appended in the same transaction (a produce
	// request's batches each pay one read of each, not two).
	checked  bool
	producer *command.ProducerRecord
	seqs     *command.ProducerSeqRecord
}

// Check judges one batch of (id, epoch) for partition pid: its sequence
// must follow the last one appended there, or repeat one of the last five
// (a retry: not appended again, answered with the first offset). A first
// batch of an epoch in a partition starts at 0.
func Check(r store.Reader, id int64, epoch int32, pid []byte, baseSeq, n int32) Verdict {
	p, code := current(r, id, epoch)
	if code != 0 {
		return Verdict{Code: code}
	}
	s := seqs(r, id, pid)
	if s == nil || s.Epoch != epoch || len(s.Batches) == 0 {
		if baseSeq != 0 {
			return Verdict{Code: kerr.OutOfOrderSequenceNumber.Code}
		}
		return Verdict{checked: true, producer: p, seqs: s}
	}
	last := lastSeqOf(baseSeq, n)
	for _, b := range s.Batches {
		if b.FirstSeq == baseSeq && b.LastSeq == last {
			return Verdict{Duplicate: true, BaseOffset: b.BaseOffset}
		}
	}
	if baseSeq == nextSeq(s.Batches[len(s.Batches)-1].LastSeq) {
		return Verdict{checked: true, producer: p, seqs: s}
	}
	first, lastKept := s.Batches[0].FirstSeq, s.Batches[len(s.Batches)-1].LastSeq
	if baseSeq < first && baseSeq >= 0 && (first <= lastKept || baseSeq > lastKept && first-baseSeq < baseSeq-lastKept) {
		// older than the batches kept: appended long ago (Kafka's answer;
		// clients take it as success). When the kept batches wrap past
		// MaxInt32, a sequence just after the last one is a gap, not old.
		return Verdict{Code: kerr.DuplicateSequenceNumber.Code}
	}
	return Verdict{Code: kerr.OutOfOrderSequenceNumber.Code}
}

// Appended records a batch Check let through (v, its verdict in this
// transaction, nothing written between them), appended at baseOffset, and
// keeps the producer for idle past now.
func Appended(tx Tx, v Verdict, id int64, epoch int32, pid []byte, baseSeq, n int32, baseOffset uint64, now, idleUs int64) {
	s, p := v.seqs, v.producer
	if !v.checked {
		s, p = seqs(tx, id, pid), Producer(tx, id)
	}
	if s == nil || s.Epoch != epoch {
		s = &command.ProducerSeqRecord{Epoch: epoch}
	}
	s.Batches = append(s.Batches, &command.ProducerBatch{FirstSeq: baseSeq, LastSeq: lastSeqOf(baseSeq, n), BaseOffset: baseOffset})
	if len(s.Batches) > KeptBatches {
		s.Batches = s.Batches[len(s.Batches)-KeptBatches:]
	}
	tx.Put(bSeqs, seqKey(id, pid), command.MustEncodeRecord(s))
	if p != nil && touch(tx, p, now, idleUs) {
		p.UsedUs = now
		put(tx, p)
	}
}

// Touch keeps a producer for idle past now (a transactional commit).
func Touch(tx Tx, id int64, now, idleUs int64) {
	if p := Producer(tx, id); p != nil && touch(tx, p, now, idleUs) {
		p.UsedUs = now
		put(tx, p)
	}
}

func seqs(r store.Reader, id int64, pid []byte) *command.ProducerSeqRecord {
	v := r.Get(bSeqs, seqKey(id, pid))
	if v == nil {
		return nil
	}
	s := &command.ProducerSeqRecord{}
	command.MustDecodeRecord(v, s)
	return s
}

// Sequences wrap from MaxInt32 to 0, as Kafka's do.
func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

func lastSeqOf(base, n int32) int32 {
	if n <= 0 {
		return base
	}
	l := int64(base) + int64(n) - 1
	if l > math.MaxInt32 {
		l -= math.MaxInt32 + 1
	}
	return int32(l)
}

// SweepDue reports whether a producer's idle time ran out by now.
func SweepDue(r store.Reader, now int64) bool {
	k, _ := r.Cursor(bExpiry).First()
	return len(k) == 16 && int64(binary.BigEndian.Uint64(k)) <= now
}

// Sweep removes at most limit producers idle past now; more reports that
// some are left.
func Sweep(tx Tx, now int64, limit int) (n int, more bool) {
	for {
		k, _ := tx.Cursor(bExpiry).First()
		if len(k) != 16 || int64(binary.BigEndian.Uint64(k)) > now {
			return n, false
		}
		if n == limit {
			return n, true
		}
		if p := Producer(tx, int64(binary.BigEndian.Uint64(k[8:]))); p != nil {
			remove(tx, p)
		} else {
			tx.Delete(bExpiry, append([]byte(nil), k...))
		}
		n++
	}
}

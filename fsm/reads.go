package fsm

import (
	"errors"
	"fmt"

	"github.com/queen-node/queen-node/atrest"
	"github.com/queen-node/queen-node/audit"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/kafkamsg"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/leases"
	"github.com/queen-node/queen-node/producers"
	"github.com/queen-node/queen-node/queue"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/streams"
	"github.com/queen-node/queen-node/timers"
)

// Reader answers the front ends' questions from one consistent view of the
// state: the queue domain's reads (promoted from queue.Reader), the
// timers', KV, the operator switches. Records it returns are copies the
// caller may keep.
type Reader struct {
	*queue.Reader
	timers *timers.Reader
	r      store.Reader // the tenant's view (ScopeOf)
	tenant string       // the tenant.Key whose state it reads
	keys   *atrest.Keyring
	flows  *Flows
}

// The queue domain's read types, as the front ends name them.
type (
	PartitionStats = queue.PartitionStats
	DLQFilter      = queue.DLQFilter
	PopReadiness   = queue.PopReadiness
	Depth          = queue.Depth
	MessageFilter  = queue.MessageFilter
	MessageRow     = queue.MessageRow
	MessagesMode   = queue.MessagesMode
	MessageDetail  = queue.MessageDetail
)

func (f *FSM) reader(r store.Reader, tenantKey string) *Reader {
	r = ScopeOf(tenantKey).Reader(r)
	return &Reader{Reader: f.queue.Reader(r), timers: timers.NewReader(r), r: r, tenant: tenantKey, keys: f.opts.Keys, flows: f.flows}
}

// Tenant is the tenant.Key of the state rd reads.
func (rd *Reader) Tenant() string { return rd.tenant }

// Messages returns the stored messages from..to (inclusive) of a
// partition, in order, their payloads decrypted (spec §5.12: a consumer
// reads plaintext). It stops at the first it cannot find; a payload it
// cannot decrypt (a key this node lacks) is an error, never ciphertext
// handed out.
func (rd *Reader) Messages(pid []byte, from, to uint64) ([]*command.MessageRecord, error) {
	recs, err := rd.Reader.Messages(pid, from, to)
	if err != nil {
		return nil, err
	}
	for _, m := range recs {
		if err := rd.open(&m.Payload); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// DeadLetters lists dead letters as queue.Reader does, their payloads
// decrypted.
func (rd *Reader) DeadLetters(f DLQFilter) ([]*command.DLQRecord, int, error) {
	recs, total := rd.Reader.DeadLetters(f)
	for _, d := range recs {
		if err := rd.open(&d.Payload); err != nil {
			return nil, 0, err
		}
	}
	return recs, total, nil
}

// MessageDetail reads the message (pid, txn) names, as queue.Reader does,
// its payload and its dead letters' payloads decrypted.
func (rd *Reader) MessageDetail(pid []byte, txn string, now int64) (*MessageDetail, error) {
	d := rd.Reader.MessageDetail(pid, txn, now)
	if d == nil {
		return nil, nil
	}
	if err := rd.open(&d.Message.Payload); err != nil {
		return nil, err
	}
	for _, dl := range d.DeadLetters {
		if err := rd.open(&dl.Payload); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// ListMessages lists messages as queue.Reader does, their payloads
// decrypted.
func (rd *Reader) ListMessages(f MessageFilter, now int64) ([]MessageRow, MessagesMode, error) {
	rows, mode := rd.Reader.ListMessages(f, now)
	for _, r := range rows {
		if err := rd.open(&r.Message.Payload); err != nil {
			return nil, mode, err
		}
		for _, dl := range r.DeadLetters {
			if err := rd.open(&dl.Payload); err != nil {
				return nil, mode, err
			}
		}
	}
	return rows, mode, nil
}

// DeadLetterByID returns a dead letter by id, its payload decrypted; nil
// when there is none.
func (rd *Reader) DeadLetterByID(id []byte) (*command.DLQRecord, error) {
	d := rd.Reader.DeadLetterByID(id)
	if d == nil {
		return nil, nil
	}
	return d, rd.open(&d.Payload)
}

// TraceWithMessage is a trace of the by-name view with its message's
// payload (decrypted; nil when the message is gone).
type TraceWithMessage struct {
	*command.TraceRecord
	Payload []byte
}

// TracesByName lists traces by name as queue.Reader does, each with its
// message's payload, decrypted.
func (rd *Reader) TracesByName(name string, visible func(string) bool, offset, limit int) ([]TraceWithMessage, int, error) {
	recs, total := rd.Reader.TracesByName(name, visible, offset, limit)
	out := make([]TraceWithMessage, len(recs))
	for i, t := range recs {
		out[i].TraceRecord = t
		if m := rd.Message(t.PartitionId, t.Seq); m != nil {
			if err := rd.open(&m.Payload); err != nil {
				return nil, 0, err
			}
			out[i].Payload = m.Payload
		}
	}
	return out, total, nil
}

// open makes a stored payload what a Queen consumer reads: decrypted
// (spec §5.12), and a Kafka record's frame as its JSON view (kafkamsg).
func (rd *Reader) open(payload *[]byte) error {
	if err := rd.decrypt(payload); err != nil {
		return err
	}
	view, err := kafkamsg.JSONView(*payload)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	*payload = view
	return nil
}

func (rd *Reader) decrypt(payload *[]byte) error {
	plain, err := rd.keys.Open(*payload)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	*payload = plain
	return nil
}

// StoredMessages returns messages from..to of a partition as Messages
// does, decrypted but as stored otherwise: a Kafka record's frame stays a
// frame (the Kafka listener's fetch), a Queen payload its JSON text.
func (rd *Reader) StoredMessages(pid []byte, from, to uint64) ([]*command.MessageRecord, error) {
	recs, err := rd.Reader.Messages(pid, from, to)
	if err != nil {
		return nil, err
	}
	for _, m := range recs {
		if err := rd.decrypt(&m.Payload); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// ErrUnreadable: a stored payload this node cannot decrypt.
var ErrUnreadable = errors.New("fsm: a stored payload cannot be read on this node")

// KafkaProducers is how many Kafka producer states are kept.
func (rd *Reader) KafkaProducers() uint64 { return producers.Count(rd.r) }

// Meta returns the FSM's bookkeeping record.
func (rd *Reader) Meta() *command.MetaRecord {
	m := &command.MetaRecord{}
	if v := rd.r.Get(bMeta, metaKey); v != nil {
		command.MustDecodeRecord(v, m)
	}
	return m
}

// PopReadiness judges a pop at time now with the same rules apply uses
// (nothing is ready while pops are in maintenance), counting deliverable
// partitions up to limit.
func (rd *Reader) PopReadiness(in *command.Pop, now int64, limit int) PopReadiness {
	if rd.Meta().PopMaintenance {
		return PopReadiness{}
	}
	return rd.Reader.PopReadiness(in, now, limit)
}

// KV answers a KV read at time now.
func (rd *Reader) KV(op *command.KVOp, now int64) *command.KVResult {
	return kvstore.Read(rd.r, op, now)
}

// KVReads answers a call of read-only KV ops at time now from this one
// view, or refuses it (KV_DISABLED) when the operator's switch is off, as
// apply refuses writes.
func (rd *Reader) KVReads(ops []*command.KVOp, now int64) *command.KVBatchResult {
	if rd.Meta().KvDisabled {
		return &command.KVBatchResult{Reason: command.Reason_KV_DISABLED, FailedIndex: -1}
	}
	res := &command.KVBatchResult{Ok: true, FailedIndex: -1, Results: make([]*command.KVResult, 0, len(ops))}
	for _, op := range ops {
		res.Results = append(res.Results, rd.KV(op, now))
	}
	return res
}

// SweepDue reports whether a sweep entry would collect anything at now.
func (rd *Reader) SweepDue(now int64) bool {
	return queue.GraveyardDue(rd.r) || kvstore.HasDue(rd.r, now) || idempotency.Due(rd.r, now) || leases.Due(rd.r, now) || streams.SweepDue(rd.r) || producers.SweepDue(rd.r, now)
}

// StreamQuery is the stream query of id, or nil.
func (rd *Reader) StreamQuery(id []byte) *command.StreamQueryRecord { return streams.Query(rd.r, id) }

// IndexDue reports whether the dead letters' message index may lack
// records stored before it existed (a state that has dead letters and no
// completed backfill).
func (rd *Reader) IndexDue() bool {
	return !rd.Meta().DeadLettersIndexed && queue.HasDeadLetters(rd.r)
}

// RetainDue reports whether a retention pass would remove anything at now
// (idleUs: how long an empty partition may sit before it is removed).
func (rd *Reader) RetainDue(now, idleUs int64) bool { return queue.RetainDue(rd.Reader, now, idleUs) }

// Timer returns a pending timer, or nil.
func (rd *Reader) Timer(queue, key string) *command.TimerRecord { return rd.timers.Timer(queue, key) }

// Timers lists a queue's pending timers in timerKey order after the
// exclusive cursor after, at most limit; truncated says more follow.
func (rd *Reader) Timers(queue, after string, limit int) ([]*command.TimerRecord, bool) {
	return rd.timers.Timers(queue, after, limit)
}

// TimerCount counts a queue's pending timers whose key starts with prefix.
func (rd *Reader) TimerCount(queue, prefix string) int { return rd.timers.TimerCount(queue, prefix) }

// NextTimerDue is the due time of the earliest pending timer (0: none).
func (rd *Reader) NextTimerDue() int64 { return rd.timers.NextDue() }

// Audit lists audit records, newest first, of entries before the index
// before (0 = the newest), at most limit.
func (rd *Reader) Audit(before uint64, limit int) []*command.AuditRecord {
	return audit.List(rd.r, before, limit)
}

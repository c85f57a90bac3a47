package audit

import (
	"encoding/binary"
	"fmt"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/store"
)

// Bucket holds the trail: entry index → AuditRecord.
var Bucket = store.Bucket("audit")

// MaxRecords is how many records are kept; the oldest go first.
const MaxRecords = 10000

// Action names an audited command and says what it did, or "" when the
// command is not audited.
func Action(cmd *command.Command) (action, detail string) {
	switch b := cmd.Body.(type) {
	case *command.Command_DeleteQueue:
		return "delete_queue", fmt.Sprintf("queue=%q", b.DeleteQueue.Queue)
	case *command.Command_DeleteGroup:
		g := b.DeleteGroup
		return "delete_consumer_group", fmt.Sprintf("group=%q queue=%q deleteMetadata=%t", g.Group, g.Queue, g.DeleteMetadata)
	case *command.Command_Seek:
		s := b.Seek
		if s.OnePartition {
			return "seek", fmt.Sprintf("group=%q queue=%q partition=%q toEnd=true", s.Group, s.Queue, s.Partition)
		}
		return "seek", fmt.Sprintf("group=%q queue=%q toEnd=%t timestampUs=%d", s.Group, s.Queue, s.ToEnd, s.TimestampUs)
	case *command.Command_SetSubscription:
		return "set_subscription", fmt.Sprintf("group=%q fromUs=%d", b.SetSubscription.Group, b.SetSubscription.FromUs)
	case *command.Command_SetSwitches:
		s := b.SetSwitches
		return "set_switches", fmt.Sprintf("pushMaintenance=%s popMaintenance=%s kv=%s timersSchedule=%s timersFire=%s",
			opt(s.PushMaintenance), opt(s.PopMaintenance), opt(s.KvEnabled), opt(s.TimersScheduleEnabled), opt(s.TimersFireEnabled))
	case *command.Command_AuditNote:
		return b.AuditNote.Action, b.AuditNote.Detail
	case *command.Command_ReplayDeadLetter:
		r := b.ReplayDeadLetter
		to := "own partition"
		if r.Queue != "" {
			to = fmt.Sprintf("queue=%q partition=%q", r.Queue, r.Partition)
		}
		if len(r.RecordId) > 0 {
			return "dlq_replay", fmt.Sprintf("record=%x sourceQueue=%q to %s", r.RecordId, r.SourceQueue, to)
		}
		return "dlq_replay", fmt.Sprintf("partitionId=%x transactionId=%q group=%q sourceQueue=%q to %s",
			r.PartitionId, r.TransactionId, r.ConsumerGroup, r.SourceQueue, to)
	case *command.Command_PurgeDeadLetters:
		return "dlq_purge", fmt.Sprintf("queue=%q group=%q", b.PurgeDeadLetters.Queue, b.PurgeDeadLetters.ConsumerGroup)
	case *command.Command_DeleteMessage:
		d := b.DeleteMessage
		return "delete_message", fmt.Sprintf("partitionId=%x seq=%d transactionId=%q", d.PartitionId, d.Seq, d.TransactionId)
	}
	return "", ""
}

func opt(b *bool) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprint(*b)
}

func key(index uint64) []byte { return binary.BigEndian.AppendUint64(nil, index) }

// Record writes the record of an audited command applied at index and
// drops the oldest beyond MaxRecords; count is the number of records
// stored (the FSM keeps it in its meta record).
func Record(tx *store.Tx, index uint64, now int64, cmd *command.Command, count *uint64) {
	action, detail := Action(cmd)
	if action == "" {
		return
	}
	tx.Put(Bucket, key(index), command.MustEncodeRecord(&command.AuditRecord{AtUs: now, Actor: cmd.Actor,
		Action: action, Detail: detail, Index: index}))
	*count++
	for *count > MaxRecords {
		k, _ := tx.Cursor(Bucket).First()
		if k == nil {
			*count = 0
			return
		}
		tx.Delete(Bucket, append([]byte(nil), k...))
		*count--
	}
}

// List returns up to limit records, newest first, of entries before the
// index before (0 = from the newest).
func List(r store.Reader, before uint64, limit int) []*command.AuditRecord {
	var out []*command.AuditRecord
	c := r.Cursor(Bucket)
	var k, v []byte
	if before == 0 {
		k, v = c.Last()
	} else {
		k, v = c.Seek(key(before))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for ; k != nil && len(out) < limit; k, v = c.Prev() {
		rec := &command.AuditRecord{}
		command.MustDecodeRecord(v, rec)
		out = append(out, rec)
	}
	return out
}

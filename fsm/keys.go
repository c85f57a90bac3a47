package fsm

import (
	"encoding/binary"

	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/store"
)

// Buckets of the state file. Keys are flat composites; names are joined with
// a 0x00 byte, which the front ends refuse inside names.
var (
	bMeta         = store.Bucket("meta")          // "meta" → MetaRecord
	bQueues       = store.Bucket("queues")        // queue 0 → QueueRecord
	bPartitions   = store.Bucket("partitions")    // queue 0 partition → PartitionRecord
	bPartitionIDs = store.Bucket("partition_ids") // pid → queue 0 partition
	bMessages     = store.Bucket("messages")      // pid seq → MessageRecord
	bDedup        = store.Bucket("dedup")         // pid transactionId → seq messageId
	bCursors      = store.Bucket("cursors")       // pid group → CursorRecord
	bGroups       = store.Bucket("groups")        // queue 0 group → GroupRecord
	bLeaseIndex   = store.Bucket("lease_index")   // leaseId 0 pid group → expires
	bDLQ          = store.Bucket("dlq")           // queueId failed index n → DLQRecord
	bDLQTime      = store.Bucket("dlq_time")      // failed index n → queueId
	bGraveyard    = store.Bucket("graveyard")     // kind id → nil: data of deleted queues to purge
	bTimers       = store.Bucket("timers")        // queue 0 timerKey → TimerRecord
	bTimerDue     = store.Bucket("timer_due")     // due queue 0 timerKey → nil
)

// Buckets lists every bucket, for store.Open.
var Buckets = append([]store.Bucket{bMeta, bQueues, bPartitions, bPartitionIDs, bMessages, bDedup,
	bCursors, bGroups, bLeaseIndex, bDLQ, bDLQTime, bGraveyard, bTimers, bTimerDue,
	kvstore.BucketEntries, kvstore.BucketExpiry}, idempotency.Buckets...)

var metaKey = []byte("meta")

func join(a, b string) []byte {
	k := make([]byte, 0, len(a)+1+len(b))
	k = append(k, a...)
	k = append(k, 0)
	return append(k, b...)
}

func prefix(a string) []byte {
	k := make([]byte, 0, len(a)+1)
	k = append(k, a...)
	return append(k, 0)
}

func splitJoined(k []byte) (string, string) {
	for i, c := range k {
		if c == 0 {
			return string(k[:i]), string(k[i+1:])
		}
	}
	return string(k), ""
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func messageKey(pid []byte, seq uint64) []byte {
	k := make([]byte, 0, len(pid)+8)
	k = append(k, pid...)
	return binary.BigEndian.AppendUint64(k, seq)
}

func seqOfMessageKey(k []byte) uint64 { return binary.BigEndian.Uint64(k[len(k)-8:]) }

func pidKey(pid []byte, s string) []byte {
	k := make([]byte, 0, len(pid)+len(s))
	k = append(k, pid...)
	return append(k, s...)
}

func leaseIndexKey(leaseID string, pid []byte, group string) []byte {
	k := make([]byte, 0, len(leaseID)+1+len(pid)+len(group))
	k = append(k, leaseID...)
	k = append(k, 0)
	k = append(k, pid...)
	return append(k, group...)
}

// timeKey orders records by time then by the entry that wrote them.
func timeKey(us int64, index uint64, n uint32) []byte {
	k := make([]byte, 0, 20)
	k = binary.BigEndian.AppendUint64(k, uint64(us))
	k = binary.BigEndian.AppendUint64(k, index)
	return binary.BigEndian.AppendUint32(k, n)
}

func hasPrefix(k, p []byte) bool {
	return len(k) >= len(p) && string(k[:len(p)]) == string(p)
}

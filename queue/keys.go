package queue

import (
	"encoding/binary"

	"github.com/queen-node/queen-node/store"
)

// Buckets of the state file this package owns. Keys are flat composites;
// names are joined with a 0x00 byte, which the front ends refuse in names.
var (
	bQueues       = store.Bucket("queues")        // queue 0 → QueueRecord
	bPartitions   = store.Bucket("partitions")    // queue 0 partition → PartitionRecord
	bPartitionIDs = store.Bucket("partition_ids") // pid → queue 0 partition
	bCursors      = store.Bucket("cursors")       // pid group → CursorRecord
	bGroups       = store.Bucket("groups")        // queue 0 group → GroupRecord
	bDLQ          = store.Bucket("dlq")           // queueId failedUs index n → DLQRecord
	bDLQTime      = store.Bucket("dlq_time")      // failedUs index n → queueId
	bGraveyard    = store.Bucket("graveyard")     // kind id → nil: data of deleted queues to purge
	bPushBuffer   = store.Bucket("push_buffer")   // index n → BufferedPush: pushes held by push maintenance
	bDeleted      = store.Bucket("deleted_msgs")  // pid seq → deletedUs: tombstones of deleted messages
	bDLQMsg       = store.Bucket("dlq_msg")       // pid txnHash failedUs index n → queueId: dead letters by message
	bDedupGone    = store.Bucket("dedup_gone")    // pid seq → goneRecord: removed messages still within the dedup window
)

// Buckets lists them, for store.Open.
var Buckets = []store.Bucket{bQueues, bPartitions, bPartitionIDs, bCursors, bGroups, bDLQ, bDLQTime, bGraveyard, bPushBuffer, bDeleted, bDLQMsg, bDedupGone}

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

func pidKey(pid []byte, s string) []byte {
	k := make([]byte, 0, len(pid)+len(s))
	k = append(k, pid...)
	return append(k, s...)
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

// Graveyard kinds.
const (
	graveQueue     = 'q'
	gravePartition = 'p'
)

func graveKey(kind byte, id []byte) []byte { return append([]byte{kind}, id...) }

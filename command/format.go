package command

import (
	"errors"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Formats. A node records the formats it writes in its data dir (and the
// state format in the state file's meta record, the log format in every
// entry) and refuses to start on, or apply, a format it does not know,
// naming both versions, rather than misread it.
//
// Bump LogFormat when a command or result is encoded or read differently,
// and StateFormat when a stored record or the state file's layout is.
//
// History:
//   - 1: everything written before formats were recorded (no format field).
//   - 2: the log's vocabulary moved to this package; ack statuses, reasons,
//     timer statuses and KV reasons became enums; an Idempotency-Key
//     stores a command's outcome (or a Refusal) instead of HTTP bytes.
//   - 3 (state): message bodies left the state file for per-partition
//     segment files (msgstore), the dedup index is derived from them, the
//     lease table is indexed by id and by expiry, ids derived from log
//     indexes name the log, and a snapshot is a tar of the state file and
//     the message files.
//   - 3 (log): every entry ends with the CRC-32C of its bytes (Command.crc),
//     checked when it is applied and when a leader reads it to send.
//   - 4 (state): every msgstore index entry carries its record's CRC-32C
//     and its own, checked on every read; index files of format 3 are
//     rewritten with them when the store opens (msgstore.migrateLegacy).
//   - 4 (log): a pop applies the consumer group's conflation policy, stored
//     by the pop that registers the group, instead of the queue's option
//     (addendum §8, corrected); entries of format 3 apply the old rule
//     (fsm.ConflationRuleOf), so a replay and a cluster in mid-upgrade do
//     not diverge: an older node refuses entries of format 4. Streams'
//     commands (package streams) came with it.
//   - 5 (state): every record of the state file ends with the CRC-32C of
//     its bucket, key and value, checked on every read; a file of format 3
//     or 4 gets them when it opens (store/checksum.go).
//   - 5 (log): a command names its tenant (Command.tenant; "" is the
//     default tenant): an older node would apply another tenant's command
//     to the default tenant's state, so it refuses entries of format 5.
//   - 6 (state): the meta record lists the tenants that wrote (tenants),
//     and each tenant but the default keeps its records in buckets of its
//     own (store.Scope); a file of format 5 is the default tenant's alone
//     and opens unchanged.
//   - 6 (log): a Kafka transaction's commit names the term its coordinator
//     staged it in (KafkaTxnGuard.coordinator_term) and applies only from
//     an entry of that term: an older node would apply a commit this code
//     refuses, so it refuses entries of format 6. Entries of format 5 carry
//     no term and apply as they did.
const (
	LogFormat   = 6
	StateFormat = 6
)

// GroupPolicyLogFormat is the first log format whose pops apply the
// group's conflation policy.
const GroupPolicyLogFormat = 4

// The formats before these that this code still reads: a log's entries of
// format 2 (written before entries carried a checksum: read unchecked) and
// of format 3 (popped by the queue's conflation option), and
// a state of format 3 or 4 (migrated when it opens). An older node refuses
// entries and states of the formats above, naming them.
const (
	legacyLogFormat   = 2
	legacyStateFormat = 3 // the oldest; every format from it to StateFormat is read
)

// ReadsLogFormat reports whether this code reads log entries of format v.
func ReadsLogFormat(v uint32) bool { return v >= legacyLogFormat && v <= LogFormat }

// ReadsStateFormat reports whether this code reads (or migrates at open) a
// state of format v.
func ReadsStateFormat(v uint32) bool { return v >= legacyStateFormat && v <= StateFormat }

// FormatError is data written in a format this code does not read.
type FormatError struct {
	What      string // "log entry 12", "state file", "data dir"
	Found     uint32 // 1 when the data predates recorded formats
	Supported uint32
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s is in format %d, and this queen-node reads format %d only: "+
		"run the queen-node version that wrote it, or move the data dir aside and start this one "+
		"on an empty data dir (a member of a cluster then catches up from the other nodes)",
		e.What, e.Found, e.Supported)
}

// Encode is the one way a command becomes a log entry's bytes: it stamps the
// log format this code writes and ends the bytes with their CRC-32C, as
// field crc (a field written last is read like any other).
func Encode(cmd *Command) ([]byte, error) {
	cmd.Format = LogFormat
	cmd.Crc = nil
	// One buffer with room for the trailer: appending it to proto.Marshal's
	// exact-size result would copy every entry once more.
	size := proto.Size(cmd)
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(make([]byte, 0, size+crcTrailer), cmd)
	if err != nil {
		return nil, err
	}
	sum := crc32.Checksum(b, castagnoli)
	b = protowire.AppendTag(b, crcField, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, sum), nil
}

const (
	crcField   = 6
	crcTrailer = 5 // its tag (one byte) and four bytes of checksum
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptEntry: a log entry's bytes are not the bytes its proposer wrote
// (its checksum fails). The entry is never applied or sent.
var ErrCorruptEntry = errors.New("log entry fails its checksum")

// CheckEntry verifies a log entry's checksum without decoding it (what a
// leader does before it sends the entry). An entry of format 2 has none and
// passes.
func CheckEntry(data []byte) error {
	if sealed(data) {
		return nil
	}
	cmd := &Command{}
	if err := proto.Unmarshal(data, cmd); err == nil && cmd.Format == legacyLogFormat && cmd.Crc == nil {
		return nil
	}
	return ErrCorruptEntry
}

// sealed reports whether data ends with its own CRC-32C in field crc.
func sealed(data []byte) bool {
	n := len(data) - crcTrailer
	if n < 0 {
		return false
	}
	num, typ, k := protowire.ConsumeTag(data[n:])
	if k != 1 || num != crcField || typ != protowire.Fixed32Type {
		return false
	}
	sum, _ := protowire.ConsumeFixed32(data[n+1:])
	return sum == crc32.Checksum(data[:n], castagnoli)
}

// Decode reads a log entry's bytes. An entry whose checksum fails is an
// error wrapping ErrCorruptEntry; one that does not decode is an error; one
// of a format this code does not read is a *FormatError (entry names the
// entry in all three). A format-2 entry carries no checksum and is read
// unchecked, but one that claims format 2 and has a crc field is a format-3
// entry whose format field was damaged.
func Decode(data []byte, entry string) (*Command, error) {
	cmd := &Command{}
	if err := proto.Unmarshal(data, cmd); err != nil {
		if !sealed(data) {
			return nil, fmt.Errorf("%s: %w", entry, ErrCorruptEntry)
		}
		return nil, fmt.Errorf("%s does not decode: %w", entry, err)
	}
	switch {
	case cmd.Format > legacyLogFormat && cmd.Format <= LogFormat: // 3 on: checksummed
		if !sealed(data) {
			return nil, fmt.Errorf("%s: %w", entry, ErrCorruptEntry)
		}
	case cmd.Format == legacyLogFormat:
		if cmd.Crc != nil {
			return nil, fmt.Errorf("%s: %w (a checksummed entry that claims format %d)", entry, ErrCorruptEntry, legacyLogFormat)
		}
	default:
		if sealed(data) || cmd.Crc == nil {
			return nil, &FormatError{What: entry, Found: max(cmd.Format, 1), Supported: LogFormat}
		}
		return nil, fmt.Errorf("%s: %w", entry, ErrCorruptEntry)
	}
	return cmd, nil
}

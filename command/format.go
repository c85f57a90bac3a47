package command

import (
	"fmt"

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
const (
	LogFormat   = 2
	StateFormat = 3
)

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
// log format this code writes.
func Encode(cmd *Command) ([]byte, error) {
	cmd.Format = LogFormat
	return proto.Marshal(cmd)
}

// Decode reads a log entry's bytes. An entry that does not decode is an
// error; one of another format is a *FormatError (entry names the entry in
// it).
func Decode(data []byte, entry string) (*Command, error) {
	cmd := &Command{}
	if err := proto.Unmarshal(data, cmd); err != nil {
		return nil, fmt.Errorf("%s does not decode: %w", entry, err)
	}
	if cmd.Format != LogFormat {
		return nil, &FormatError{What: entry, Found: max(cmd.Format, 1), Supported: LogFormat}
	}
	return cmd, nil
}

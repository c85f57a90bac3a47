package command

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// MustDecodeRecord decodes a record apply stored. A stored record that does
// not decode means the state file is not what this code wrote: apply must
// stop rather than guess, so it panics (the FSM turns a panic on a valid
// entry into a discarded command, alike on every replica).
func MustDecodeRecord(b []byte, m proto.Message) {
	if err := proto.Unmarshal(b, m); err != nil {
		panic(fmt.Sprintf("stored %T does not decode: %v", m, err))
	}
}

// MustEncodeRecord encodes a record for the state file; a record that does
// not encode is a bug.
func MustEncodeRecord(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("%T does not encode: %v", m, err))
	}
	return b
}

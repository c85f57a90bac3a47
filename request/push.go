package request

import (
	"encoding/json"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
)

// PushItem is one message to push as a front end decoded it (spec §4.2).
type PushItem struct {
	Queue         string
	Partition     string  // "" = "Default"
	TransactionID string  // "" = minted here
	TraceID       *string // nil = none; anything else must be a UUID
	// Payload is the JSON text of the payload; nil means null. The front end
	// vouches that it is one JSON value (see JSONValue).
	Payload []byte
}

// Push turns a push's items into the push command's items (spec §4.2),
// checked in item order, and mints each message id, and the transactionId
// of an item that has none.
func Push(items []PushItem) ([]*command.PushItem, error) {
	out := make([]*command.PushItem, 0, len(items))
	for i := range items {
		it, err := pushItem(&items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

func pushItem(in *PushItem) (*command.PushItem, error) {
	if err := CheckName("queue", in.Queue); err != nil {
		return nil, err
	}
	it := &command.PushItem{Queue: in.Queue, Partition: "Default", TransactionId: in.TransactionID, Payload: in.Payload}
	if in.Partition != "" {
		if err := CheckName("partition", in.Partition); err != nil {
			return nil, err
		}
		it.Partition = in.Partition
	}
	if len(in.TransactionID) > MaxTxnIDBytes {
		return nil, Bad("TransactionId is too long")
	}
	if t := in.TraceID; t != nil {
		if _, err := uuid.Parse(*t); err != nil || len(*t) != 36 {
			return nil, Bad("TraceId must be a UUID")
		}
		it.TraceId = *t
	}
	if it.Payload == nil {
		it.Payload = []byte("null")
	}
	it.MessageId = NewMessageID()
	if it.TransactionId == "" {
		it.TransactionId = uuid.NewString()
	}
	return it, nil
}

// NewMessageID mints a message id: a UUIDv7, so ids sort by creation.
func NewMessageID() []byte {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return id[:]
}

// JSONValue checks bytes a wire carries as opaque (gRPC) that the API
// stores as JSON: empty means null, anything else must be one JSON value.
func JSONValue(what string, b []byte) ([]byte, error) {
	if len(b) == 0 {
		return []byte("null"), nil
	}
	if !json.Valid(b) {
		return nil, Bad(what + " must be valid JSON text")
	}
	return b, nil
}

// The ids this node mints (message ids, transaction ids, lease ids) are
// names, not secrets: their random bits come from crypto/rand read in
// batches (uuid's pool) rather than in one read per id, which cost a
// twentieth of a push's CPU on the node a client calls.
func init() { uuid.EnableRandPool() }

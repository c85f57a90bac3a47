package request

import (
	"github.com/google/uuid"

	"github.com/queen-node/queen-node/command"
)

// Ack is one ack as a front end decoded it (spec §4.4).
type Ack struct {
	TransactionID string
	PartitionID   string
	ConsumerGroup string // "" or __QUEUE_MODE__ = queue mode
	LeaseID       string
	// Status as sent: nil (completed), completed | success | acked | ok,
	// failed, retry, dlq (addendum §4.7); anything else is unknown. A
	// front end whose wire has booleans sends true as "completed" and false
	// as "failed".
	Status *string
	Error  *string // the DLQ's error text
}

// ackStatuses are the status spellings the API takes.
var ackStatuses = map[string]command.AckStatus{
	"completed": command.AckStatus_COMPLETED, "success": command.AckStatus_COMPLETED,
	"acked": command.AckStatus_COMPLETED, "ok": command.AckStatus_COMPLETED,
	"failed": command.AckStatus_FAILED, "retry": command.AckStatus_RETRY, "dlq": command.AckStatus_DLQ,
}

// Acks are the items of an ack call. An item whose status the API does not
// know is answered as a refused item ("invalid status"), not as a 4xx, on
// /ack and /ack/batch alike; the others go to the node as one entry.
type Acks struct {
	items []*command.AckItem
	known []bool
}

// AckOne validates POST /ack's single ack.
func AckOne(in Ack) (Acks, error) {
	it, known, err := ackItem(in, false)
	if err != nil {
		return Acks{}, err
	}
	return Acks{items: []*command.AckItem{it}, known: []bool{known}}, nil
}

// AckBatch validates POST /ack/batch: the group is the top level's, for
// every item (spec §4.4); an item's own group is ignored.
func AckBatch(group string, in []Ack) (Acks, error) {
	if err := CheckName("consumerGroup", group); err != nil {
		return Acks{}, err
	}
	out := Acks{items: make([]*command.AckItem, 0, len(in)), known: make([]bool, 0, len(in))}
	for _, a := range in {
		a.ConsumerGroup = group
		it, known, err := ackItem(a, true)
		if err != nil {
			return Acks{}, err
		}
		out.items, out.known = append(out.items, it), append(out.known, known)
	}
	return out, nil
}

// Command is the one entry of the known items; nil when there are none.
func (a Acks) Command() *command.Command {
	var send []*command.AckItem
	for i, it := range a.items {
		if a.known[i] {
			send = append(send, it)
		}
	}
	if len(send) == 0 {
		return nil
	}
	return &command.Command{Body: &command.Command_Ack{Ack: &command.Ack{Items: send}}}
}

// Results are one result per item, in request order: the node's results
// (res, nil when Command was nil) with the refused unknown statuses between.
func (a Acks) Results(res *command.AckResult) []*command.AckItemResult {
	out := make([]*command.AckItemResult, len(a.items))
	j := 0
	for i, it := range a.items {
		if !a.known[i] {
			out[i] = &command.AckItemResult{TransactionId: it.TransactionId, Error: "invalid status"}
			continue
		}
		if res != nil && j < len(res.Items) {
			out[i] = res.Items[j]
		} else {
			out[i] = &command.AckItemResult{TransactionId: it.TransactionId, Error: "internal error: no result"}
		}
		j++
	}
	return out
}

// Items are the validated items, for a front end's metrics.
func (a Acks) Items() []*command.AckItem { return a.items }

// ackItem validates one ack. known=false for a status the API does not know.
func ackItem(in Ack, batch bool) (it *command.AckItem, known bool, err error) {
	if in.TransactionID == "" {
		if batch {
			return nil, false, Bad("Each acknowledgment must have a valid transactionId string")
		}
		return nil, false, Bad("transactionId is required")
	}
	if in.PartitionID == "" {
		if batch {
			return nil, false, Bad("Each acknowledgment must have a valid partitionId string to ensure message uniqueness")
		}
		return nil, false, Bad("partitionId is required to ensure message uniqueness")
	}
	if err := CheckName("consumerGroup", in.ConsumerGroup); err != nil {
		return nil, false, err
	}
	it = &command.AckItem{TransactionId: in.TransactionID, LeaseId: in.LeaseID}
	if pid, err := uuid.Parse(in.PartitionID); err == nil {
		it.PartitionId = pid[:] // a non-UUID finds nothing: "Message not found"
	}
	if in.ConsumerGroup != command.QueueModeGroup {
		it.ConsumerGroup = in.ConsumerGroup
	}
	if in.Error != nil {
		it.Error, it.HasError = *in.Error, true
	}
	it.Status, known = command.AckStatus_COMPLETED, true
	if in.Status != nil {
		it.Status, known = ackStatuses[*in.Status]
	}
	return it, known, nil
}

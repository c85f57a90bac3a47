package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// decodeAck checks an ack's members' JSON types (spec §4.4). The SDKs'
// boolean status (false = failed) is decoded to its word.
func decodeAck(o object, batch bool) (request.Ack, error) {
	var in request.Ack
	// Not a string reads as missing: request says which is.
	in.TransactionID, _ = str(o["transactionId"])
	in.PartitionID, _ = str(o["partitionId"])
	if in.TransactionID == "" || in.PartitionID == "" {
		return in, nil
	}
	var err error
	if !batch {
		if in.ConsumerGroup, err = optString(o["consumerGroup"], "consumerGroup must be a string"); err != nil {
			return in, err
		}
	}
	if in.LeaseID, err = optString(o["leaseId"], "leaseId must be a string"); err != nil {
		return in, err
	}
	if raw := o["error"]; present(raw) {
		e, ok := str(raw)
		if !ok {
			return in, request.Bad("error must be a string or null")
		}
		in.Error = &e
	}
	if raw := o["status"]; present(raw) {
		var s string
		switch kindOf(raw) {
		case 't':
			s = "completed"
		case 'f':
			s = "failed"
		default:
			s, _ = str(raw) // not a string: "", which no status is
		}
		in.Status = &s
	}
	return in, nil
}

type ackItemOut struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     *string `json:"queueName"`
	PartitionName *string `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Noop          bool    `json:"noop"`
}

func (a *API) ack(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	in, err := decodeAck(o, false)
	if err != nil {
		writeError(w, err)
		return
	}
	acks, err := request.AckOne(in)
	if err != nil {
		writeError(w, err)
		return
	}
	a.applyAcks(w, r, acks)
}

func (a *API) ackBatch(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	elems, ok := array(o["acknowledgments"])
	if !ok {
		writeError(w, request.Bad("acknowledgments array is required"))
		return
	}
	group, err := optString(o["consumerGroup"], "consumerGroup must be a string")
	if err != nil {
		writeError(w, err)
		return
	}
	in := make([]request.Ack, 0, len(elems))
	for _, e := range elems {
		eo, ok := asObject(e)
		if !ok {
			writeError(w, request.Bad("Each acknowledgment must be an object"))
			return
		}
		it, err := decodeAck(eo, true)
		if err != nil {
			writeError(w, err)
			return
		}
		in = append(in, it)
	}
	acks, err := request.AckBatch(group, in)
	if err != nil {
		writeError(w, err)
		return
	}
	a.applyAcks(w, r, acks)
}

// applyAcks sends the acks as one entry and answers one result per item in
// request order.
func (a *API) applyAcks(w http.ResponseWriter, r *http.Request, acks request.Acks) {
	var res *command.AckResult
	if cmd := acks.Command(); cmd != nil {
		out, ok := a.propose(w, r, nil, cmd)
		if !ok {
			return
		}
		res = out.(*command.AckResult)
	}
	results := acks.Results(res)
	out := make([]ackItemOut, len(results))
	for i, ir := range results {
		out[i] = ackItemOut{
			Index: i, TransactionID: ir.TransactionId, Success: ir.Success, Error: nullable(ir.Error),
			QueueName: nullable(ir.Queue), PartitionName: nullable(ir.Partition),
			LeaseReleased: ir.LeaseReleased, DLQ: ir.Dlq, Noop: ir.Noop,
		}
		if ir.Success {
			a.m.acked.WithLabelValues(acks.Items()[i].Status.Text()).Inc()
		}
	}
	writeJSON(w, http.StatusOK, out)
}

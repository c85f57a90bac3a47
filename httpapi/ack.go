package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/google/uuid"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// ackStatus normalises an ack status (spec §4.4, addendum §4.7); ok=false
// for a value the API does not know.
func ackStatus(raw json.RawMessage) (string, bool) {
	if !present(raw) {
		return fsm.StatusCompleted, true
	}
	if b, ok := boolean(raw); ok { // the SDKs' `false` means failed
		if b {
			return fsm.StatusCompleted, true
		}
		return fsm.StatusFailed, true
	}
	s, ok := str(raw)
	if !ok {
		return "", false
	}
	switch s {
	case "completed", "success", "acked", "ok":
		return fsm.StatusCompleted, true
	case "failed":
		return fsm.StatusFailed, true
	case "retry":
		return fsm.StatusRetry, true
	case "dlq":
		return fsm.StatusDLQ, true
	}
	return "", false
}

// parseAckItem validates an ack's fields. The group is taken from group
// when non-nil (the batch route's top level).
func parseAckItem(o object, batch bool) (*fsmpb.AckItem, bool, error) {
	txn, ok := str(o["transactionId"])
	if !ok || txn == "" {
		if batch {
			return nil, false, bad("Each acknowledgment must have a valid transactionId string")
		}
		return nil, false, bad("transactionId is required")
	}
	pidStr, ok := str(o["partitionId"])
	if !ok || pidStr == "" {
		if batch {
			return nil, false, bad("Each acknowledgment must have a valid partitionId string to ensure message uniqueness")
		}
		return nil, false, bad("partitionId is required to ensure message uniqueness")
	}
	it := &fsmpb.AckItem{TransactionId: txn}
	if pid, err := uuid.Parse(pidStr); err == nil {
		it.PartitionId = pid[:] // a non-UUID finds nothing: "Message not found"
	}
	if raw := o["consumerGroup"]; present(raw) {
		g, ok := str(raw)
		if !ok {
			return nil, false, bad("consumerGroup must be a string")
		}
		if err := checkName("consumerGroup", g); err != nil {
			return nil, false, err
		}
		if g != fsm.QueueModeGroup {
			it.ConsumerGroup = g
		}
	}
	if raw := o["leaseId"]; present(raw) {
		l, ok := str(raw)
		if !ok {
			return nil, false, bad("leaseId must be a string")
		}
		it.LeaseId = l
	}
	if raw := o["error"]; present(raw) {
		e, ok := str(raw)
		if !ok {
			return nil, false, bad("error must be a string or null")
		}
		it.Error, it.HasError = e, true
	}
	status, known := ackStatus(o["status"])
	it.Status = status
	return it, known, nil
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

func ackOut(i int, r *fsmpb.AckItemResult) ackItemOut {
	return ackItemOut{
		Index: i, TransactionID: r.TransactionId, Success: r.Success, Error: nullable(r.Error),
		QueueName: nullable(r.Queue), PartitionName: nullable(r.Partition),
		LeaseReleased: r.LeaseReleased, DLQ: r.Dlq, Noop: r.Noop,
	}
}

func (a *API) ack(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	it, known, err := parseAckItem(o, false)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	a.applyAcks(w, r, []*fsmpb.AckItem{it}, []bool{known})
}

func (a *API) ackBatch(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	elems, ok := array(o["acknowledgments"])
	if !ok {
		writeError(w, http.StatusBadRequest, "acknowledgments array is required")
		return
	}
	group := ""
	if raw := o["consumerGroup"]; present(raw) {
		g, ok := str(raw)
		if !ok {
			writeError(w, http.StatusBadRequest, "consumerGroup must be a string")
			return
		}
		if err := checkName("consumerGroup", g); err != nil {
			writeDecodeError(w, err)
			return
		}
		if g != fsm.QueueModeGroup {
			group = g
		}
	}
	items := make([]*fsmpb.AckItem, 0, len(elems))
	known := make([]bool, 0, len(elems))
	for _, e := range elems {
		eo, ok := asObject(e)
		if !ok {
			writeError(w, http.StatusBadRequest, "Each acknowledgment must be an object")
			return
		}
		it, k, err := parseAckItem(eo, true)
		if err != nil {
			writeDecodeError(w, err)
			return
		}
		it.ConsumerGroup = group // the top level decides (spec §4.4)
		items = append(items, it)
		known = append(known, k)
	}
	a.applyAcks(w, r, items, known)
}

// applyAcks sends the acks with a known status as one entry and answers one
// result per item in request order.
func (a *API) applyAcks(w http.ResponseWriter, r *http.Request, items []*fsmpb.AckItem, known []bool) {
	out := make([]ackItemOut, len(items))
	var send []*fsmpb.AckItem
	var at []int
	for i, it := range items {
		if !known[i] {
			e := "invalid status"
			out[i] = ackItemOut{Index: i, TransactionID: it.TransactionId, Error: &e}
			continue
		}
		send = append(send, it)
		at = append(at, i)
	}
	if len(send) > 0 {
		ctx, cancel := a.writeCtx(r)
		defer cancel()
		res, err := a.b.Apply(ctx, &fsmpb.Command{Body: &fsmpb.Command_Ack{Ack: &fsmpb.Ack{Items: send}}})
		if err != nil {
			writeBackendError(w, err)
			return
		}
		for j, ir := range res.(*fsmpb.AckResult).Items {
			out[at[j]] = ackOut(at[j], ir)
			if ir.Success {
				a.m.acked.WithLabelValues(send[j].Status).Inc()
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

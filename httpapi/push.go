package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// pushItemJSON is one push item with its members still raw, so that one
// json.Unmarshal of the whole body does all the scanning; types are
// checked per member afterwards with the spec's own error texts.
type pushItemJSON struct {
	Queue         json.RawMessage `json:"queue"`
	Partition     json.RawMessage `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	Data          json.RawMessage `json:"data"`
	TransactionID json.RawMessage `json:"transactionId"`
	TraceID       json.RawMessage `json:"traceId"`
}

type pushBodyJSON struct {
	Items *[]pushItemJSON `json:"items"`
}

// parsePushBody decodes a whole POST /push body in one pass.
func parsePushBody(body []byte) ([]*fsmpb.PushItem, error) {
	var pb pushBodyJSON
	if err := json.Unmarshal(body, &pb); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			switch {
			case te.Field == "":
				return nil, bad("Request body must be a JSON object")
			case te.Field == "items":
				return nil, bad("items array is required")
			default:
				return nil, bad("Each item must be an object")
			}
		}
		return nil, bad("Invalid JSON: " + err.Error())
	}
	if pb.Items == nil {
		return nil, bad("items array is required")
	}
	items := make([]*fsmpb.PushItem, 0, len(*pb.Items))
	for i := range *pb.Items {
		it, err := (*pb.Items)[i].parse()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

// parsePushItem validates one push item given as a raw object.
func parsePushItem(o object) (*fsmpb.PushItem, error) {
	j := pushItemJSON{Queue: o["queue"], Partition: o["partition"], Payload: o["payload"], Data: o["data"],
		TransactionID: o["transactionId"], TraceID: o["traceId"]}
	return j.parse()
}

// parse validates one push item (spec §4.2, checked in this order) and
// mints its message id, and its transactionId when none was given.
func (j *pushItemJSON) parse() (*fsmpb.PushItem, error) {
	q, ok := str(j.Queue)
	if !ok {
		return nil, bad("Queue must be a string")
	}
	if err := checkName("queue", q); err != nil {
		return nil, err
	}
	it := &fsmpb.PushItem{Queue: q, Partition: "Default"}
	if raw := j.Partition; present(raw) {
		p, ok := str(raw)
		if !ok {
			return nil, bad("Partition must be a string")
		}
		if err := checkName("partition", p); err != nil {
			return nil, err
		}
		if p != "" {
			it.Partition = p
		}
	}
	if raw := j.TransactionID; present(raw) {
		t, ok := str(raw)
		if !ok {
			return nil, bad("TransactionId must be a string")
		}
		if len(t) > maxTxnIDBytes {
			return nil, bad("TransactionId is too long")
		}
		it.TransactionId = t
	}
	if raw := j.TraceID; present(raw) {
		t, ok := str(raw)
		if !ok {
			return nil, bad("TraceId must be a string")
		}
		if _, err := uuid.Parse(t); err != nil || len(t) != 36 {
			return nil, bad("TraceId must be a UUID")
		}
		it.TraceId = t
	}
	payload := j.Payload
	if payload == nil {
		payload = j.Data
	}
	if payload == nil {
		payload = json.RawMessage("null")
	}
	it.Payload = []byte(payload)
	mid, err := uuid.NewV7()
	if err != nil {
		mid = uuid.New()
	}
	it.MessageId = mid[:]
	if it.TransactionId == "" {
		it.TransactionId = uuid.NewString()
	}
	return it, nil
}

func parsePushItems(raw json.RawMessage) ([]*fsmpb.PushItem, error) {
	elems, ok := array(raw)
	if !ok {
		return nil, bad("items array is required")
	}
	items := make([]*fsmpb.PushItem, 0, len(elems))
	for _, e := range elems {
		o, ok := asObject(e)
		if !ok {
			return nil, bad("Each item must be an object")
		}
		it, err := parsePushItem(o)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	return items, nil
}

type pushItemOut struct {
	Index           int     `json:"index"`
	Status          string  `json:"status"`
	TransactionIDSn string  `json:"transaction_id"`
	TransactionID   string  `json:"transactionId"`
	MessageIDSn     *string `json:"message_id"`
	MessageID       *string `json:"messageId"`
	PartitionIDSn   *string `json:"partition_id"`
	PartitionID     *string `json:"partitionId"`
	TraceIDSn       *string `json:"trace_id"`
	QueueName       string  `json:"queueName"`
	Offset          *uint64 `json:"offset,omitempty"`
	Error           *string `json:"error,omitempty"`
}

var pushStatus = map[fsmpb.PushItemResult_Status]string{
	fsmpb.PushItemResult_QUEUED: "queued", fsmpb.PushItemResult_DUPLICATE: "duplicate",
	fsmpb.PushItemResult_BUFFERED: "buffered", fsmpb.PushItemResult_FAILED: "failed",
}

func pushOut(i int, r *fsmpb.PushItemResult) pushItemOut {
	mid, pid := uuidString(r.MessageId), uuidString(r.PartitionId)
	out := pushItemOut{
		Index: i, Status: pushStatus[r.Status], TransactionIDSn: r.TransactionId, TransactionID: r.TransactionId,
		MessageIDSn: mid, MessageID: mid, PartitionIDSn: pid, PartitionID: pid,
		TraceIDSn: nullable(r.TraceId), QueueName: r.Queue,
	}
	if r.Offset > 0 {
		off := r.Offset
		out.Offset = &off
	}
	if r.Status == fsmpb.PushItemResult_FAILED {
		e := r.Error
		out.Error = &e
	}
	return out
}

// push is POST /api/v1/push: one entry for the whole request.
func (a *API) push(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	idem, handled := a.idempotency(w, r, body, a.renderPush)
	if handled {
		return
	}
	items, err := parsePushBody(body)
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	if len(items) == 0 && idem == nil {
		writeJSON(w, http.StatusCreated, []pushItemOut{})
		return
	}
	res, ok := a.apply(w, r, idem, &fsmpb.Command{Body: &fsmpb.Command_Push{Push: &fsmpb.Push{Items: items}}}, a.renderPush)
	if !ok {
		return
	}
	queued := 0
	for _, it := range res.(*fsmpb.PushResult).Items {
		if it.Status == fsmpb.PushItemResult_QUEUED {
			queued++
		}
	}
	a.m.pushed.Add(float64(queued))
	a.renderPush(w, res)
}

func (a *API) renderPush(w http.ResponseWriter, res proto.Message) {
	pr := res.(*fsmpb.PushResult)
	out := make([]pushItemOut, len(pr.Items))
	for i, it := range pr.Items {
		out[i] = pushOut(i, it)
	}
	writeJSON(w, http.StatusCreated, out)
}

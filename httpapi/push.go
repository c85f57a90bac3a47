package httpapi

import (
	"errors"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// pushItemJSON is one push item with its members still raw: one decode of
// the whole body does all the scanning, and each member's type is checked
// afterwards with the spec's own texts.
type pushItemJSON struct {
	Queue         jsontext.Value `json:"queue"`
	Partition     jsontext.Value `json:"partition"`
	Payload       jsontext.Value `json:"payload"`
	Data          jsontext.Value `json:"data"`
	TransactionID jsontext.Value `json:"transactionId"`
	TraceID       jsontext.Value `json:"traceId"`
}

type pushBodyJSON struct {
	Items *[]pushItemJSON `json:"items"`
}

// decodePushBody decodes a whole POST /push body in one pass.
func decodePushBody(body []byte) ([]request.PushItem, error) {
	if kindOf(body) != '{' {
		if err := checkJSON(body); err != nil {
			return nil, err
		}
		return nil, request.Bad("Request body must be a JSON object")
	}
	var pb pushBodyJSON
	if err := unmarshal(body, &pb); err != nil {
		var se *json.SemanticError
		if errors.As(err, &se) && se.JSONPointer == "/items" {
			return nil, request.Bad("items array is required")
		}
		if errors.As(err, &se) && se.JSONKind != 0 {
			return nil, request.Bad("Each item must be an object")
		}
		return nil, request.Bad("Invalid JSON: " + err.Error())
	}
	if pb.Items == nil {
		return nil, request.Bad("items array is required")
	}
	items := make([]request.PushItem, len(*pb.Items))
	for i := range *pb.Items {
		if err := (*pb.Items)[i].decode(&items[i]); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// decodePushItem decodes one push item given as an object (a transaction's
// push op).
func decodePushItem(o object) (request.PushItem, error) {
	j := pushItemJSON{Queue: o["queue"], Partition: o["partition"], Payload: o["payload"], Data: o["data"],
		TransactionID: o["transactionId"], TraceID: o["traceId"]}
	var it request.PushItem
	return it, j.decode(&it)
}

// decode checks the members' JSON types (spec §4.2, in this order).
func (j *pushItemJSON) decode(it *request.PushItem) error {
	var ok bool
	if it.Queue, ok = str(j.Queue); !ok {
		return request.Bad("Queue must be a string")
	}
	var err error
	if it.Partition, err = optString(j.Partition, "Partition must be a string"); err != nil {
		return err
	}
	if it.TransactionID, err = optString(j.TransactionID, "TransactionId must be a string"); err != nil {
		return err
	}
	if present(j.TraceID) {
		t, ok := str(j.TraceID)
		if !ok {
			return request.Bad("TraceId must be a string")
		}
		it.TraceID = &t
	}
	it.Payload = j.Payload
	if it.Payload == nil {
		it.Payload = j.Data
	}
	return nil
}

// push is POST /api/v1/push: one entry for the whole request.
func (a *API) push(w http.ResponseWriter, r *http.Request) {
	body, idem, ok := a.readWrite(w, r)
	if !ok {
		return
	}
	decoded, err := decodePushBody(body)
	var items []*command.PushItem
	if err == nil {
		items, err = request.Push(decoded)
	}
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	if len(items) == 0 && idem == nil {
		writeRawJSON(w, http.StatusCreated, []byte("[]\n"))
		return
	}
	res, ok := a.propose(w, r, idem, &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: items}}})
	if !ok {
		return
	}
	pr := res.(*command.PushResult)
	queued := 0
	for _, it := range pr.Items {
		if it.Status == command.PushItemResult_QUEUED {
			queued++
		}
	}
	a.m.pushed.Add(float64(queued))
	renderPush(w, pr)
}

func renderPush(w http.ResponseWriter, res *command.PushResult) {
	writeRawJSON(w, http.StatusCreated, appendPushResults(make([]byte, 0, 320*len(res.Items)+2), res))
}

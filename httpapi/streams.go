package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/request"
)

// Streams (spec §4.16): the routes Queen's stream runtimes keep their state
// through. Members are matched exactly and unknown ones refused with 400
// (the runtimes send exactly these); see package streams for what commits.

var (
	registerFields = []string{"name", "source_queue", "sink_queue", "config_hash", "reset"}
	cycleFields    = []string{"query_id", "partition_id", "consumer_group", "state_ops", "push_items", "ack", "release_lease"}
	stateOpFields  = []string{"type", "key", "value"}
	cycleAckFields = []string{"transactionId", "leaseId", "status", "count"}
	sinkItemFields = []string{"queue", "partition", "payload", "transactionId", "traceId"}
	stateGetFields = []string{"query_id", "partition_id", "keys", "key_prefix", "ripe_at_or_before"}
)

// onlyFields refuses a member outside allowed.
func onlyFields(o object, what string, allowed []string) error {
	for k := range o {
		found := false
		for _, a := range allowed {
			found = found || a == k
		}
		if !found {
			return request.Bad(fmt.Sprintf("unknown field %q in %s", k, what))
		}
	}
	return nil
}

// strField decodes an optional string member (null = absent).
func strField(o object, name string) (string, error) {
	raw := o[name]
	if !present(raw) {
		return "", nil
	}
	s, ok := str(raw)
	if !ok {
		return "", request.Bad(name + " must be a string")
	}
	return s, nil
}

func boolField(o object, name string, def bool) (bool, error) {
	raw := o[name]
	if !present(raw) {
		return def, nil
	}
	b, ok := boolean(raw)
	if !ok {
		return false, request.Bad(name + " must be a boolean")
	}
	return b, nil
}

// objects decodes an optional array of objects (null = empty).
func objects(o object, name string) ([]object, error) {
	raw := o[name]
	if !present(raw) {
		return nil, nil
	}
	elems, ok := array(raw)
	if !ok {
		return nil, request.Bad(name + " must be an array")
	}
	out := make([]object, len(elems))
	for i, e := range elems {
		if out[i], ok = asObject(e); !ok {
			return nil, request.Bad(fmt.Sprintf("%s[%d] must be an object", name, i))
		}
	}
	return out, nil
}

// POST /streams/v1/queries
func (a *API) streamRegister(w http.ResponseWriter, r *http.Request) {
	body, idem, ok := a.readWrite(w, r)
	if !ok {
		return
	}
	cmd, err := decodeStreamRegister(body)
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	res, ok := a.propose(w, r, idem, cmd)
	if !ok {
		return
	}
	rr := res.(*command.StreamRegisterResult)
	q := rr.Query
	out := map[string]any{"success": true, "query_id": uuidOrEmpty(q.Id), "name": q.Name, "config_hash": q.ConfigHash,
		"fresh": rr.Fresh, "reset": rr.DidReset}
	if rr.Mismatch {
		writeJSON(w, http.StatusConflict, map[string]any{"success": false, "query_id": uuidOrEmpty(q.Id), "name": q.Name,
			"error": fmt.Sprintf("config_hash mismatch: operator chain changed for queryId '%s'. Pass reset:true to wipe existing state, or use a new queryId.", q.Name)})
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func decodeStreamRegister(body []byte) (*command.Command, error) {
	o, err := parseObject(body)
	if err != nil {
		return nil, err
	}
	if err := onlyFields(o, "the body", registerFields); err != nil {
		return nil, err
	}
	var in request.StreamRegister
	for _, f := range []struct {
		name string
		dst  *string
	}{{"name", &in.Name}, {"source_queue", &in.SourceQueue}, {"sink_queue", &in.SinkQueue}, {"config_hash", &in.ConfigHash}} {
		if *f.dst, err = strField(o, f.name); err != nil {
			return nil, err
		}
	}
	if in.Reset, err = boolField(o, "reset", false); err != nil {
		return nil, err
	}
	return request.StreamRegisterCommand(in)
}

// POST /streams/v1/cycle: 200 whether or not it committed; a refusal of
// the state (a lost lease, a flush that lost its race) is success:false.
func (a *API) streamCycle(w http.ResponseWriter, r *http.Request) {
	body, idem, ok := a.readWrite(w, r)
	if !ok {
		return
	}
	decoded, err := decodeStreamCycle(body)
	var in *command.StreamCycle
	if err == nil {
		in, err = a.rules.StreamLimits().StreamCycle(decoded)
	}
	if err != nil {
		a.refuse(w, r, idem, err)
		return
	}
	q, err := a.streamQuery(r, in.QueryId)
	if err != nil {
		writeError(w, err)
		return
	}
	out := map[string]any{"query_id": decoded.QueryID, "partition_id": decoded.PartitionID, "queueName": nil,
		"state_ops_applied": 0, "push_results": []any{}, "ack_result": nil}
	if q == nil {
		out["success"], out["error"] = false, "query not found: register it with POST /streams/v1/queries"
		writeJSON(w, http.StatusOK, out)
		return
	}
	in.SourceQueue, in.SinkQueue = q.SourceQueue, q.SinkQueue
	out["queueName"] = q.SourceQueue
	res, ok := a.propose(w, r, idem, &command.Command{Body: &command.Command_StreamCycle{StreamCycle: in}})
	if !ok {
		return
	}
	cr := res.(*command.StreamCycleResult)
	out["success"] = cr.Success
	if !cr.Success {
		out["error"] = cr.Error
		writeJSON(w, http.StatusOK, out)
		return
	}
	out["state_ops_applied"] = cr.StateOpsApplied
	pushes := make([]map[string]any, len(cr.Pushes))
	for i, p := range cr.Pushes {
		pushes[i] = map[string]any{"index": i, "transaction_id": p.TransactionId, "status": p.Status.Text(),
			"message_id": uuidOrEmpty(p.MessageId), "partition_id": uuidOrEmpty(p.PartitionId), "queueName": p.Queue}
	}
	out["push_results"] = pushes
	if cr.Acked {
		out["ack_result"] = map[string]any{"success": true, "count": cr.AckCount, "lease_released": cr.LeaseReleased, "dlq": cr.Dlq}
	}
	if cr.Replayed {
		out["replayed"] = true // committed by an earlier call whose answer was lost: nothing applied again
	}
	writeJSON(w, http.StatusOK, out)
}

func decodeStreamCycle(body []byte) (request.StreamCycle, error) {
	var in request.StreamCycle
	o, err := parseObject(body)
	if err != nil {
		return in, err
	}
	if err := onlyFields(o, "the body", cycleFields); err != nil {
		return in, err
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"query_id", &in.QueryID}, {"partition_id", &in.PartitionID}, {"consumer_group", &in.ConsumerGroup}} {
		if *f.dst, err = strField(o, f.name); err != nil {
			return in, err
		}
	}
	if in.ReleaseLease, err = boolField(o, "release_lease", true); err != nil {
		return in, err
	}
	ops, err := objects(o, "state_ops")
	if err != nil {
		return in, err
	}
	for i, op := range ops {
		at := fmt.Sprintf("state_ops[%d]", i)
		if err := onlyFields(op, at, stateOpFields); err != nil {
			return in, err
		}
		var so request.StreamOp
		if so.Type, err = strField(op, "type"); err != nil {
			return in, request.Bad(at + ": type must be a string")
		}
		if so.Key, err = strField(op, "key"); err != nil {
			return in, request.Bad(at + ": key must be a string")
		}
		if raw := op["value"]; present(raw) {
			so.Value = []byte(jsontext.Value(raw).Clone())
		}
		in.Ops = append(in.Ops, so)
	}
	items, err := objects(o, "push_items")
	if err != nil {
		return in, err
	}
	for i, it := range items {
		if err := onlyFields(it, fmt.Sprintf("push_items[%d]", i), sinkItemFields); err != nil {
			return in, err
		}
		pi, err := decodePushItem(it)
		if err != nil {
			return in, err
		}
		in.Pushes = append(in.Pushes, pi)
	}
	if raw := o["ack"]; present(raw) {
		ao, ok := asObject(raw)
		if !ok {
			return in, request.Bad("ack must be an object or null")
		}
		if err := onlyFields(ao, "ack", cycleAckFields); err != nil {
			return in, err
		}
		ack := &request.StreamAck{}
		for _, f := range []struct {
			name string
			dst  *string
		}{{"transactionId", &ack.TransactionID}, {"leaseId", &ack.LeaseID}, {"status", &ack.Status}} {
			if *f.dst, err = strField(ao, f.name); err != nil {
				return in, request.Bad("ack." + f.name + " must be a string")
			}
		}
		if raw := ao["count"]; present(raw) {
			if ack.Count, ok = integer(raw); !ok {
				return in, request.Bad("ack.count must be an integer >= 0")
			}
		}
		in.Ack = ack
	}
	return in, nil
}

// streamQuery reads a query by id as the leader has it (a follower waits
// for the leader's read index): a query registered a moment ago on another
// node is found.
func (a *API) streamQuery(r *http.Request, id []byte) (*command.StreamQueryRecord, error) {
	var q *command.StreamQueryRecord
	err := a.b.Read(r.Context(), cluster.Linearizable, func(rd *fsm.Reader) error {
		q = rd.StreamQuery(id)
		return nil
	})
	return q, err
}

// POST /streams/v1/state/get
func (a *API) streamStateGet(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	decoded, err := decodeStateGet(o)
	var in *command.StreamStateGet
	if err == nil {
		in, err = request.StreamStateQuery(decoded)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	q, err := a.streamQuery(r, in.QueryId)
	if err != nil {
		writeError(w, err)
		return
	}
	rows := []map[string]any{}
	if q != nil {
		in.SourceQueue = q.SourceQueue
		res, err := a.query(r, &command.Query{Body: &command.Query_StreamState{StreamState: in}})
		if err != nil {
			writeError(w, err)
			return
		}
		for _, row := range res.GetStreamState().Rows {
			rows = append(rows, map[string]any{"key": row.Key, "value": json.RawMessage(row.Value), "updated_at": isoMicros(row.UpdatedUs)})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "rows": rows})
}

func decodeStateGet(o object) (request.StreamStateGet, error) {
	var in request.StreamStateGet
	var err error
	if err := onlyFields(o, "the body", stateGetFields); err != nil {
		return in, err
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"query_id", &in.QueryID}, {"partition_id", &in.PartitionID}, {"key_prefix", &in.KeyPrefix}} {
		if *f.dst, err = strField(o, f.name); err != nil {
			return in, err
		}
	}
	if raw := o["keys"]; present(raw) {
		elems, ok := array(raw)
		if !ok {
			return in, request.Bad("keys must be an array of strings")
		}
		for _, e := range elems {
			k, ok := str(e)
			if !ok {
				return in, request.Bad("keys must be an array of strings")
			}
			in.Keys = append(in.Keys, k)
		}
	}
	if raw := o["ripe_at_or_before"]; present(raw) {
		n, ok := integer(raw)
		if !ok {
			return in, request.Bad("ripe_at_or_before must be an integer (epoch milliseconds)")
		}
		in.Ripe = &n
	}
	return in, nil
}

// GET /streams/v1/queries (admin)
func (a *API) streamQueries(w http.ResponseWriter, r *http.Request) {
	res, err := a.query(r, &command.Query{Body: &command.Query_StreamQueries{StreamQueries: &command.StreamQueryList{}}})
	if err != nil {
		writeError(w, err)
		return
	}
	qs := res.GetStreamQueries().Queries
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	out := make([]map[string]any, len(qs))
	for i, q := range qs {
		out[i] = map[string]any{"query_id": uuidOrEmpty(q.Id), "name": q.Name, "source_queue": q.SourceQueue,
			"sink_queue": nullable(q.SinkQueue), "config_hash": q.ConfigHash,
			"created_at": isoMicros(q.CreatedUs), "updated_at": isoMicros(q.UpdatedUs)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"queries": out})
}

// DELETE /streams/v1/queries/{name} (admin): the query and, swept in
// steps, its state.
func (a *API) streamDeleteQuery(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_StreamDeleteQuery{StreamDeleteQuery: &command.StreamDeleteQuery{Name: name}}})
	if !ok {
		return
	}
	if !res.(*command.StreamDeleteQueryResult).Deleted {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "stream query not found: " + name})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "deleted": name})
}

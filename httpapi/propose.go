package httpapi

import (
	"context"
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/audit"
	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/idempotency"
	"github.com/queen-node/queen-node/request"
)

// Writes: every route that changes state proposes one command through
// propose. A request with an Idempotency-Key (package idempotency) carries
// the key in its command; a refusal of the request by the rules is stored
// under the key too (refuse), so that a retry gets the same answer; and
// whatever the key answered first is answered again.

const (
	headerIdemKey      = "Idempotency-Key"
	headerIdemReplayed = "Idempotent-Replayed"
)

// readWrite reads a write's body and its Idempotency-Key (nil without
// one). ok=false means the answer (a 4xx) was written.
func (a *API) readWrite(w http.ResponseWriter, r *http.Request) ([]byte, *command.Idempotency, bool) {
	body, err := a.readBody(r)
	if err != nil {
		writeError(w, err)
		return nil, nil, false
	}
	caller := ""
	if id := identityOf(r); id != nil {
		caller = id.Sub
	}
	idem, err := a.rules.Idempotency(r.Header.Get(headerIdemKey), caller, r.Method+" "+r.URL.Path, body)
	if err != nil {
		writeError(w, err)
		return nil, nil, false
	}
	return body, idem, true
}

// refuse answers a refusal of the rules; with a key it is stored first,
// unless the key already has an outcome, which is then the answer.
func (a *API) refuse(w http.ResponseWriter, r *http.Request, idem *command.Idempotency, err error) {
	e := request.FromError(err)
	if idem == nil || !e.Storable() {
		writeError(w, e)
		return
	}
	res, ok := a.propose(w, r, idem, idempotency.Refused(idem, e.Refusal()))
	if !ok {
		return
	}
	if stored, isRefusal := res.(*command.Refusal); isRefusal {
		e = request.FromRefusal(stored)
	}
	writeError(w, e)
}

// propose applies cmd with the request's key (idem may be nil) and returns
// its result, or the result the key stored first (with Idempotent-Replayed:
// true). ok=false means the answer was written: a failure, the key reused
// with another request, or a refusal the key stored first.
func (a *API) propose(w http.ResponseWriter, r *http.Request, idem *command.Idempotency, cmd *command.Command) (proto.Message, bool) {
	if !auth.MayRun(r.Context(), cmd) || !auth.CommandInScope(r.Context(), cmd, a.partitionQueue(r.Context())) {
		writeJSON(w, http.StatusForbidden, errorBody{Error: auth.ErrInsufficient.Msg})
		return nil, false
	}
	auth.Stamp(r.Context(), cmd)
	cmd.Idempotency = idem
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.RequestTimeout)
	defer cancel()
	res, err := a.b.Apply(ctx, cmd)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	if action, detail := audit.Action(cmd); action != "" {
		a.log.Info("audit", "action", action, "actor", cmd.Actor, "detail", detail, "remote", r.RemoteAddr)
	}
	out, replayed, err := idempotency.Outcome(idem, res)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	if replayed {
		w.Header().Set(headerIdemReplayed, "true")
	}
	if refusal, isRefusal := out.(*command.Refusal); isRefusal && cmd.GetIdempotencyRecord() == nil {
		writeError(w, request.FromRefusal(refusal))
		return nil, false
	}
	return out, true
}

// partitionQueue resolves an ack's partition for a scope check.
func (a *API) partitionQueue(ctx context.Context) func([]byte) (string, bool) {
	return func(pid []byte) (string, bool) { return a.b.PartitionQueue(ctx, pid) }
}

// query runs a read query the caller's scope allows.
func (a *API) query(r *http.Request, q *command.Query) (*command.QueryResult, error) {
	if !auth.QueryInScope(r.Context(), q) {
		return nil, &request.Error{Kind: request.Refused, Msg: auth.ErrInsufficient.Msg}
	}
	return a.b.Query(r.Context(), readLevel(r), q)
}

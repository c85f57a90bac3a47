package httpapi

import (
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/pipeline"
)

// Writes: every route that changes state proposes one command through
// propose, which is the write path every front end shares (package
// pipeline: authorisation, stamping, the Idempotency-Key, timeout, apply,
// outcome, the audit line). A refusal of the request by the rules goes
// through refuse, so that a retry with the same key gets the same answer.

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

// call is what the write path needs of a request beyond its command.
func call(r *http.Request, idem *command.Idempotency) pipeline.Call {
	return pipeline.Call{Idem: idem, Remote: r.RemoteAddr}
}

// refuse answers a refusal of the rules; with a key it is stored first,
// unless the key already has an outcome, which is then the answer
// (pipeline.Refuse).
func (a *API) refuse(w http.ResponseWriter, r *http.Request, idem *command.Idempotency, err error) {
	answer, replayed := a.pipe.Refuse(r.Context(), call(r, idem), err)
	if replayed {
		w.Header().Set(headerIdemReplayed, "true")
	}
	writeError(w, answer)
}

// propose runs cmd through the write path with the request's key (idem
// may be nil) and returns its result, or the result the key stored first
// (with Idempotent-Replayed: true). ok=false means the answer was written:
// a refusal (403 included), a failure, the key reused with another
// request, or a refusal the key stored first.
func (a *API) propose(w http.ResponseWriter, r *http.Request, idem *command.Idempotency, cmd *command.Command) (proto.Message, bool) {
	res, replayed, err := a.pipe.Write(r.Context(), call(r, idem), cmd)
	if replayed {
		w.Header().Set(headerIdemReplayed, "true")
	}
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return res, true
}

// query runs a read query the caller may run (pipeline.Query).
func (a *API) query(r *http.Request, q *command.Query) (*command.QueryResult, error) {
	return a.pipe.Query(r.Context(), readLevel(r), q)
}

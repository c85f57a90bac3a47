package httpapi

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net/http"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// Idempotency-Key (seed 003, the way payment APIs do it): the first
// definitive answer to a POST that carries the header is stored in the
// replicated state with a TTL, in the same log entry as the request's own
// effects; a retry with the same key and body gets the stored answer with
// Idempotent-Replayed: true; the same key with another body is a 422; the
// same key while the first request is still being applied is a 409. 5xx
// answers are never stored, so a retry after one really runs again.

const (
	headerIdemKey      = "Idempotency-Key"
	headerIdemReplayed = "Idempotent-Replayed"
	maxIdemKeyBytes    = 255
)

// renderFunc writes a command's result as the route answers it.
type renderFunc func(w http.ResponseWriter, res proto.Message)

// idempotency reads the request's key. handled=true means the answer was
// written (a bad key, a replay, a 422).
func (a *API) idempotency(w http.ResponseWriter, r *http.Request, body []byte, render renderFunc) (*fsmpb.Idempotency, bool) {
	key := r.Header.Get(headerIdemKey)
	if key == "" {
		return nil, false
	}
	if len(key) > maxIdemKeyBytes {
		writeError(w, http.StatusBadRequest, "Idempotency-Key is too long (max 255 bytes)")
		return nil, true
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			writeError(w, http.StatusBadRequest, "Idempotency-Key must be printable ASCII")
			return nil, true
		}
	}
	h := sha256.New()
	h.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
	h.Write(body)
	idem := &fsmpb.Idempotency{Key: key, RequestHash: h.Sum(nil), TtlSeconds: int64(a.cfg.IdempotencyTTL / time.Second)}
	var stored *fsmpb.StoredOutcome
	err := a.b.Read(r.Context(), cluster.Linearizable, func(rd *fsm.Reader) error {
		stored = rd.Outcome(key, a.b.Now())
		return nil
	})
	if err != nil {
		writeBackendError(w, err)
		return nil, true
	}
	if stored != nil {
		a.replay(w, idem, stored, render)
		return nil, true
	}
	return idem, false
}

// replay answers from a stored outcome, or 422 when the key came with
// another request.
func (a *API) replay(w http.ResponseWriter, idem *fsmpb.Idempotency, o *fsmpb.StoredOutcome, render renderFunc) {
	if !bytes.Equal(o.RequestHash, idem.RequestHash) {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{
			Error: "Idempotency-Key was already used with a different request", Code: "idempotency_key_reused"})
		return
	}
	w.Header().Set(headerIdemReplayed, "true")
	if o.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(o.Status))
		w.Write(o.Body)
		return
	}
	resp := &fsmpb.Response{}
	if err := proto.Unmarshal(o.Result, resp); err != nil {
		writeError(w, http.StatusInternalServerError, "stored answer does not decode")
		return
	}
	render(w, fsm.Unwrap(resp))
}

// refuse answers a 4xx for a request with a key, storing it first so that
// the retry gets the same answer.
func (a *API) refuse(w http.ResponseWriter, r *http.Request, idem *fsmpb.Idempotency, err error) {
	status, body := decodeErrorBody(err)
	if idem != nil {
		ctx, cancel := a.writeCtx(r)
		defer cancel()
		// A failure to store is not the client's concern: the answer is the
		// 4xx either way, and an unstored 4xx is simply computed again.
		_, _ = a.b.Apply(ctx, &fsmpb.Command{Idempotency: idem,
			Body: &fsmpb.Command_IdempotencyRecord{IdempotencyRecord: &fsmpb.IdempotencyRecord{Status: int32(status), Body: body}}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// apply proposes cmd with the request's key and renders the result; a
// replay found at apply time (a retry that raced) is answered from the
// store. ok=false means the answer was written.
func (a *API) apply(w http.ResponseWriter, r *http.Request, idem *fsmpb.Idempotency, cmd *fsmpb.Command, render renderFunc) (proto.Message, bool) {
	cmd.Idempotency = idem
	ctx, cancel := a.writeCtx(r)
	defer cancel()
	res, err := a.b.Apply(ctx, cmd)
	if err != nil {
		if errors.Is(err, cluster.ErrInFlight) {
			writeJSON(w, http.StatusConflict, errorBody{Error: "a request with this Idempotency-Key is still in flight", Code: "idempotency_key_in_flight"})
			return nil, false
		}
		writeBackendError(w, err)
		return nil, false
	}
	if rp, isReplay := res.(*fsmpb.Replay); isReplay {
		a.replay(w, idem, rp.Outcome, render)
		return nil, false
	}
	return res, true
}

package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// extendLease is POST /api/v1/lease/:leaseId/extend (spec §4.6).
func (a *API) extendLease(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var secs int64
	raw := o["seconds"]
	given := present(raw)
	if given {
		var ok bool
		if secs, ok = integer(raw); !ok {
			secs = -1 // request refuses it with the range's text
		}
	}
	id := r.PathValue("leaseId")
	ext, err := request.ExtendLease(id, secs, given)
	if err != nil {
		writeError(w, err)
		return
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_ExtendLease{ExtendLease: ext}})
	if !ok {
		return
	}
	er := res.(*command.ExtendResult)
	item := map[string]any{"index": 0, "leaseId": id, "success": er.Success, "error": nullable(er.Error)}
	if er.Success {
		item["expiresAt"] = isoMillis(er.ExpiresUs)
		item["newExpiresAt"] = isoMillis(er.ExpiresUs)
		item["lease_expires_at"] = isoMillis(er.ExpiresUs)
	}
	writeJSON(w, http.StatusOK, []any{item})
}

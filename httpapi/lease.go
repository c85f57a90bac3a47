package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/fsm/fsmpb"
)

const defaultExtendSeconds = 60

// extendLease is POST /api/v1/lease/:leaseId/extend (spec §4.6).
func (a *API) extendLease(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	secs := int64(defaultExtendSeconds)
	if raw := o["seconds"]; present(raw) {
		s, ok := integer(raw)
		if !ok || s <= 0 || s > 7*24*3600 {
			writeError(w, http.StatusBadRequest, "seconds must be an integer between 1 and 604800")
			return
		}
		secs = s
	}
	id := r.PathValue("leaseId")
	ctx, cancel := a.writeCtx(r)
	defer cancel()
	res, err := a.b.Apply(ctx, &fsmpb.Command{Body: &fsmpb.Command_ExtendLease{ExtendLease: &fsmpb.ExtendLease{LeaseId: id, Seconds: secs}}})
	if err != nil {
		writeBackendError(w, err)
		return
	}
	er := res.(*fsmpb.ExtendResult)
	item := map[string]any{"index": 0, "leaseId": id, "success": er.Success, "error": nullable(er.Error)}
	if er.Success {
		item["expiresAt"] = isoMillis(er.ExpiresUs)
		item["newExpiresAt"] = isoMillis(er.ExpiresUs)
		item["lease_expires_at"] = isoMillis(er.ExpiresUs)
	}
	writeJSON(w, http.StatusOK, []any{item})
}

package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/pipeline"
)

// identityOf is the caller a request's token named; nil with JWT off (or
// on a public route).
func identityOf(r *http.Request) *auth.Identity { return auth.IdentityFrom(r.Context()) }

// authorize checks the request's token against its route's row of the
// access table (package pipeline); false means it answered the refusal.
func (a *API) authorize(w http.ResponseWriter, r *http.Request, pattern string) (*http.Request, bool) {
	v := a.cfg.Auth
	acc := pipeline.RouteAccess(pattern)
	if v == nil || acc.Level == auth.Public || v.Skip(r.URL.Path) {
		return r, true
	}
	id, aerr := v.Authenticate(r.Header.Get("Authorization"))
	if aerr == nil && !id.Allows(acc.Level, acc.Producer) {
		aerr = auth.ErrInsufficient
	}
	if aerr != nil {
		writeJSON(w, aerr.Status, errorBody{Error: aerr.Msg})
		return r, false
	}
	return r.WithContext(auth.WithIdentity(r.Context(), id)), true
}

package httpapi

import (
	"context"
	"net/http"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/pipeline"
	"github.com/queen-node/queen-node/tenant"
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

// withTenant carries the request's tenant (package tenant's one rule) in
// its context; false means it answered the refusal of a header tenant that
// is not a valid name.
func (a *API) withTenant(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	var claim string
	if id := identityOf(r); id != nil {
		claim = id.Tenant
	}
	name, err := a.tenants.Resolve(claim, r.Header.Get(tenant.Header))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return r, false
	}
	ctx := tenant.With(r.Context(), name)
	if id := identityOf(r); id.AllTenants() && r.Header.Get(tenant.Header) == "" {
		ctx = tenant.WithEvery(ctx)
	}
	return r.WithContext(ctx), true
}

// eachTenant runs fn with the request's context for its tenant, or, for
// an admin of every tenant that named none, once per tenant the node's
// state holds (with every set: a listing then says whose each row is).
func (a *API) eachTenant(r *http.Request, fn func(ctx context.Context, name string, every bool) error) error {
	if !tenant.Every(r.Context()) {
		return fn(r.Context(), tenant.From(r.Context()), false)
	}
	for _, name := range a.b.Tenants() {
		if err := fn(tenant.With(r.Context(), name), name, true); err != nil {
			return err
		}
	}
	return nil
}

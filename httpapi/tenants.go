package httpapi

import (
	"net/http"
	"strconv"

	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
	"github.com/queen-node/queen-node/tenant"
)

// The placement of tenants on Raft groups (issue 26), an operator's:
//
//	GET  /api/v1/system/tenants              the groups, the placement table
//	                                         and every tenant the node holds
//	                                         with its group
//	POST /api/v1/system/tenants/{tenant}/pin {"group": N}: pin a tenant to a
//	                                         group before it writes; 409 once
//	                                         it has data in another

func (a *API) listTenants(w http.ResponseWriter, r *http.Request) {
	groups := len(a.b.GroupsStatus())
	rows := []map[string]any{}
	for _, name := range a.b.Tenants() {
		rows = append(rows, map[string]any{"tenant": name, "group": a.b.GroupFor(tenant.With(r.Context(), name))})
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": groups, "placements": placementsOut(a.b.Placements()), "tenants": rows})
}

func (a *API) pinTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tenant")
	if err := tenant.Valid(name); err != nil || name == tenant.Default {
		writeError(w, request.Bad("tenant "+name+" cannot be pinned: "+tenant.Rule+"; the default tenant lives in group 0"))
		return
	}
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	g, ok := integer(o["group"])
	if groups := len(a.b.GroupsStatus()); !ok || g < 0 || g >= int64(groups) {
		writeError(w, request.Bad("group must be an integer from 0 to "+strconv.Itoa(groups-1)))
		return
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_PlaceTenant{PlaceTenant: &command.PlaceTenant{
		Tenant: name, Group: uint32(g), Pin: true}}})
	if !ok {
		return
	}
	p := res.(*command.PlaceTenantResult)
	if !p.Placed {
		writeJSON(w, http.StatusConflict, errorBody{Error: p.Error})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenant": name, "group": p.Group, "pinned": true, "written": p.Written})
}

// groupParam reads ?group=N (--raft-groups: the state hash, backup and
// restore are one group's; group 0 without it) into the request's context.
func (a *API) groupParam(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	v := r.URL.Query().Get("group")
	if v == "" {
		return r, true
	}
	groups := len(a.b.GroupsStatus())
	g, err := strconv.Atoi(v)
	if err != nil || g < 0 || g >= groups {
		writeError(w, request.Bad("group must be an integer from 0 to "+strconv.Itoa(groups-1)+", not "+strconv.Quote(v)))
		return r, false
	}
	return r.WithContext(cluster.WithGroup(r.Context(), g)), true
}

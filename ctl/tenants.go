package ctl

import (
	"flag"
	"net/http"
	"net/url"
	"strconv"
)

// Tenants on Raft groups (issue 26): where each tenant lives, and an
// operator's pin of a tenant to a group before it writes.

func init() {
	register(
		&command{path: "tenants", args: "", nargs: exactly(0),
			summary: "every tenant the node holds and its Raft group, and the placement table (GET /api/v1/system/tenants)",
			setup:   func(*flag.FlagSet) runFunc { return runTenants }},
		&command{path: "tenants pin", args: "TENANT GROUP", nargs: exactly(2),
			summary: "pin a tenant to a Raft group before it writes (refused once it has data in another)",
			setup:   func(*flag.FlagSet) runFunc { return runPin }},
	)
}

func runTenants(e *env, _ []string) error {
	var out struct {
		Groups     int
		Placements []placementRow
		Tenants    []struct {
			Tenant string
			Group  int
		}
	}
	raw, err := e.api.get(e.ctx, "/api/v1/system/tenants", nil, &out)
	if err != nil {
		return err
	}
	if e.json() {
		return e.printRaw(raw)
	}
	rows := map[string]placementRow{}
	for _, p := range out.Placements {
		rows[p.Tenant] = p
	}
	if err := fields(e.out, "raft groups", strconv.Itoa(out.Groups)); err != nil {
		return err
	}
	t := newTable(e.out, "TENANT", "GROUP", "PINNED", "WRITTEN")
	seen := map[string]bool{}
	for _, tn := range out.Tenants {
		p := rows[tn.Tenant]
		t.row(tn.Tenant, strconv.Itoa(tn.Group), yesNo(p.Pinned), yesNo(p.Written || tn.Tenant == "default"))
		seen[tn.Tenant] = true
	}
	for _, p := range out.Placements {
		if !seen[p.Tenant] {
			t.row(p.Tenant, strconv.Itoa(p.Group), yesNo(p.Pinned), yesNo(p.Written))
		}
	}
	return t.flush()
}

func runPin(e *env, args []string) error {
	g, err := strconv.Atoi(args[1])
	if err != nil {
		return usagef("tenants pin: GROUP must be a number, not %q", args[1])
	}
	var res struct {
		Tenant  string
		Group   int
		Written bool
	}
	raw, err := e.api.do(e.ctx, http.MethodPost, "/api/v1/system/tenants/"+url.PathEscape(args[0])+"/pin", nil,
		map[string]any{"group": g}, &res)
	if err != nil {
		return err
	}
	if e.json() {
		return e.printRaw(raw)
	}
	e.say("tenant %s is pinned to group %d", res.Tenant, res.Group)
	return nil
}

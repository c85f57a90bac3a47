package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The cluster and its nodes: the cluster view with each node's /health,
// one node's health, and maintenance (spec §4.13, §4.14).

func init() {
	register(
		&command{path: "cluster", args: "", nargs: exactly(0),
			summary: "the nodes: role, voter, leader, term, applied and lag of each (GET /api/v1/system/cluster and each node's /health)",
			setup:   func(*flag.FlagSet) runFunc { return runCluster }},
		&command{path: "health", args: "", nargs: exactly(0),
			summary: "the --url node's /health; exit 1 unless healthy",
			setup:   func(*flag.FlagSet) runFunc { return runHealth }},
		&command{path: "maintenance", args: "[on|off] [--pop]", nargs: between(0, 1),
			summary: "show maintenance, or turn it on (pushes are buffered; with --pop, pops answer empty) or off",
			setup:   setupMaintenance},
	)
}

// health is GET /health.
type health struct {
	Status  string `json:"status"`
	NodeID  string `json:"nodeId"`
	Version string `json:"version"`
	Raft    struct {
		Role, LeaderID             string
		Leader                     bool
		Term, Applied, Commit, Lag uint64
		StorageReady               bool
		ClusterVersion             uint64
		Apply                      struct{ Failure *string }
	} `json:"raft"`
	Load struct {
		InFlight, MaxInflight int64
		DiskFreeBytes         uint64
		StorageFull           bool
		ApplyPaused           bool
	} `json:"load"`
	Security struct {
		JWT      bool     `json:"jwt"`
		Warnings []string `json:"warnings"`
	} `json:"security"`
	Groups     []groupRow     `json:"groups"`
	Placements []placementRow `json:"placements"`
}

// groupRow is one Raft group as a node's /health shows it (--raft-groups).
type groupRow struct {
	Group                 int
	Role, Leader          string
	Term, Applied, Commit uint64
}

// placementRow is one row of the placement table of tenants on groups.
type placementRow struct {
	Tenant          string
	Group           int
	Pinned, Written bool
}

// nodeHealth is one node's /health answer (any status) or why there is
// none.
type nodeHealth struct {
	raw    json.RawMessage
	status int
	h      health
	err    error
}

func (e *env) health(a *api) nodeHealth {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	b, status, err := a.call(ctx, http.MethodGet, "/health", nil, nil)
	nh := nodeHealth{raw: b, status: status, err: err}
	if err == nil {
		if jerr := json.Unmarshal(b, &nh.h); jerr != nil {
			nh.err = errorOf(status, b)
		}
	}
	return nh
}

func runCluster(e *env, _ []string) error {
	var view struct {
		Leader struct{ ID, HTTPAddr string }
		Nodes  []struct {
			ID, RaftAddr, HTTPAddr, GRPCAddr, State string
			Voter, Alive                            bool
		}
		Term, CommitIndex, AppliedIndex uint64
	}
	raw, err := e.api.get(e.ctx, "/api/v1/system/cluster", nil, &view)
	if err != nil {
		return err
	}
	hs := make([]nodeHealth, len(view.Nodes))
	var wg sync.WaitGroup
	for i, n := range view.Nodes {
		if n.HTTPAddr == "" {
			hs[i].err = errors.New("no HTTP address known (not seen over gossip)")
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); hs[i] = e.health(e.api.at(n.HTTPAddr)) }()
	}
	wg.Wait()
	if e.json() {
		var out map[string]json.RawMessage
		var nodes []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &out); err != nil {
			return err
		}
		if err := json.Unmarshal(out["nodes"], &nodes); err != nil {
			return err
		}
		for i := range nodes {
			h := hs[i].raw
			if hs[i].err != nil {
				h, _ = json.Marshal(map[string]any{"error": hs[i].err.Error()})
			}
			nodes[i]["health"] = h
		}
		b, _ := json.Marshal(nodes)
		out["nodes"] = b
		return e.printJSON(out)
	}
	commit := view.CommitIndex // the leader's commit index, as its /health says when it answered
	for i, n := range view.Nodes {
		if n.ID == view.Leader.ID && hs[i].err == nil {
			commit = max(commit, hs[i].h.Raft.Commit)
		}
	}
	leader := view.Leader.ID
	if leader == "" {
		leader = "(none known)"
	}
	if err := fields(e.out, "leader", leader, "term", strconv.FormatUint(view.Term, 10),
		"commit", strconv.FormatUint(commit, 10)); err != nil {
		return err
	}
	fmt.Fprintln(e.out)
	t := newTable(e.out, "NODE", "ROLE", "VOTER", "ALIVE", "HTTP", "TERM", "APPLIED", "LAG", "HEALTH")
	for i, n := range view.Nodes {
		h := hs[i]
		role, term, applied, lag, status := n.State, "", "", "", ""
		switch {
		case h.err != nil:
			status = "unreachable: " + clip(h.err.Error(), 60)
		default:
			role, status = h.h.Raft.Role, h.h.Status
			term, applied = strconv.FormatUint(h.h.Raft.Term, 10), strconv.FormatUint(h.h.Raft.Applied, 10)
			var behind uint64
			if commit > h.h.Raft.Applied {
				behind = commit - h.h.Raft.Applied
			}
			lag = strconv.FormatUint(behind, 10)
		}
		t.row(n.ID, role, yesNo(n.Voter), yesNo(n.Alive), n.HTTPAddr, term, applied, lag, status)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return e.printGroups(view.Nodes[0].ID, hs)
}

// printGroups adds, with more than one Raft group, a row per group (its
// leader, term, commit, and each node's applied index) and the placement
// table, as the first node that answered shows them.
func (e *env) printGroups(_ string, hs []nodeHealth) error {
	var first *health
	for i := range hs {
		if hs[i].err == nil {
			first = &hs[i].h
			break
		}
	}
	if first == nil || len(first.Groups) < 2 {
		return nil
	}
	fmt.Fprintln(e.out)
	t := newTable(e.out, "GROUP", "LEADER", "TERM", "COMMIT", "APPLIED (by node)")
	for g, row := range first.Groups {
		var applied []string
		for i := range hs {
			if hs[i].err == nil && g < len(hs[i].h.Groups) {
				applied = append(applied, hs[i].h.NodeID+" "+strconv.FormatUint(hs[i].h.Groups[g].Applied, 10))
			}
		}
		t.row(strconv.Itoa(row.Group), orNone(row.Leader), strconv.FormatUint(row.Term, 10), strconv.FormatUint(row.Commit, 10),
			strings.Join(applied, ", "))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(first.Placements) == 0 {
		return nil
	}
	fmt.Fprintln(e.out)
	pt := newTable(e.out, "TENANT", "GROUP", "PINNED", "WRITTEN")
	for _, p := range first.Placements {
		pt.row(p.Tenant, strconv.Itoa(p.Group), yesNo(p.Pinned), yesNo(p.Written))
	}
	return pt.flush()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func runHealth(e *env, _ []string) error {
	h := e.health(e.api)
	if h.err != nil {
		return h.err
	}
	if e.json() {
		if err := e.printRaw(h.raw); err != nil {
			return err
		}
	} else {
		r, l := h.h.Raft, h.h.Load
		failure := ""
		if r.Apply.Failure != nil {
			failure = *r.Apply.Failure
		}
		if err := fields(e.out,
			"status", h.h.Status,
			"node", h.h.NodeID,
			"version", h.h.Version,
			"role", r.Role,
			"leader", r.LeaderID,
			"term", strconv.FormatUint(r.Term, 10),
			"applied", fmt.Sprintf("%d (commit %d, lag %d)", r.Applied, r.Commit, r.Lag),
			"storage", fmt.Sprintf("ready %s, full %s, apply paused %s, disk free %s", yesNo(r.StorageReady),
				yesNo(l.StorageFull), yesNo(l.ApplyPaused), bytesIEC(l.DiskFreeBytes)),
			"apply failure", failure,
			"writes in flight", fmt.Sprintf("%d of %d", l.InFlight, l.MaxInflight),
			"jwt", onOff(h.h.Security.JWT),
			"warnings", strings.Join(h.h.Security.Warnings, "; "),
		); err != nil {
			return err
		}
	}
	if h.status != http.StatusOK {
		return &apiError{Status: h.status, Msg: "the node is " + h.h.Status}
	}
	return nil
}

func setupMaintenance(fs *flag.FlagSet) runFunc {
	pop := fs.Bool("pop", false, "pop maintenance (every pop answers empty) instead of push maintenance")
	return func(e *env, args []string) error {
		path := "/api/v1/system/maintenance"
		if *pop {
			path += "/pop"
		}
		if len(args) == 0 {
			var m struct {
				MaintenanceMode, PopMaintenanceMode bool
				BufferedMessages                    uint64
				BufferStats                         struct{ Draining bool }
			}
			raw, err := e.api.get(e.ctx, "/api/v1/system/maintenance", nil, &m)
			if err != nil {
				return err
			}
			if e.json() {
				return e.printRaw(raw)
			}
			buffered := count(m.BufferedMessages)
			if m.BufferStats.Draining {
				buffered += " (being appended)"
			}
			return fields(e.out, "push maintenance", onOff(m.MaintenanceMode), "pop maintenance", onOff(m.PopMaintenanceMode),
				"buffered pushes", buffered)
		}
		var on bool
		switch args[0] {
		case "on":
			on = true
		case "off":
		default:
			return usagef("maintenance: on or off, not %q", args[0])
		}
		var res struct{ Message string }
		// Ending push maintenance appends the buffered pushes before it
		// answers: not bounded by --timeout.
		raw, err := e.api.unbounded().do(e.ctx, http.MethodPost, path, nil, map[string]any{"enabled": on}, &res)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		e.say("%s", res.Message)
		return nil
	}
}

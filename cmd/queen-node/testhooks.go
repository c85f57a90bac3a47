package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"time"

	"github.com/queen-node/queen-node/cluster"
)

// testHooks serves the fault-test hooks (--test-hooks): a clock that jumps,
// a leader that steps down on request, and a snapshot that truncates the
// log down to a few entries (so that a follower behind must install it).
func testHooks(mux *http.ServeMux, groups *cluster.Groups) {
	mux.HandleFunc("POST /debug/clock-skew", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Ms int64 `json:"ms"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, `{"error":"body must be {\"ms\": N}"}`, http.StatusBadRequest)
			return
		}
		groups.Each(func(n *cluster.Node) { n.SetClockSkew(time.Duration(in.Ms) * time.Millisecond) })
		w.Write([]byte(`{"ok":true}`))
	})
	mux.HandleFunc("POST /debug/step-down", func(w http.ResponseWriter, r *http.Request) {
		if err := stepDown(groups); err != nil {
			http.Error(w, `{"error":"`+err.Error()+`"}`, http.StatusConflict)
			return
		}
		w.Write([]byte(`{"ok":true}`))
	})
	mux.HandleFunc("POST /debug/snapshot", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Trailing uint64 `json:"trailing"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Trailing == 0 {
			http.Error(w, `{"error":"body must be {\"trailing\": N}, N > 0"}`, http.StatusBadRequest)
			return
		}
		var err error
		groups.Each(func(n *cluster.Node) { err = errors.Join(err, n.SnapshotWithTrailing(in.Trailing)) })
		if err != nil {
			http.Error(w, `{"error":"snapshot: `+err.Error()+`"}`, http.StatusConflict)
			return
		}
		w.Write([]byte(`{"ok":true}`))
	})
}

// testBootID lets a fault test pretend the machine rebooted (a simulated
// power loss): with --test-hooks, QUEEN_TEST_BOOT_ID replaces the kernel's
// boot id in the state file's session record.
func testBootID(cfg *config) string {
	if !cfg.TestHooks {
		return ""
	}
	return os.Getenv("QUEEN_TEST_BOOT_ID")
}

// stepDown hands over every group this node leads; ErrNotLeader when it
// leads none.
func stepDown(groups *cluster.Groups) error {
	led := false
	var err error
	groups.Each(func(n *cluster.Node) {
		if n.IsLeader() {
			led = true
			err = errors.Join(err, n.StepDown())
		}
	})
	if !led {
		return cluster.ErrNotLeader
	}
	return err
}

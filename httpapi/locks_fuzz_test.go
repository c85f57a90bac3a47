package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/locks"
	"github.com/queen-node/queen-node/request"
)

// FuzzLocksBody sends arbitrary bodies to POST /api/v1/locks (the rig's
// invariants: no 5xx, a 4xx writes nothing, one entry at most) and checks
// that whatever reached Apply keeps addendum §4.3's limits, and that a 200
// has one result per op with its index, op and name.
func FuzzLocksBody(f *testing.F) {
	addSeeds(f, commonSeeds...)
	addSeeds(f,
		`{"operations":[{"op":"acquire","name":"daily-report","ttlSeconds":30,"owner":"cron-7"}]}`,
		`[{"op":"acquire","name":"gpu","ttlSeconds":60,"owner":"w-1","limit":4},{"op":"get","name":"d"}]`,
		`[{"op":"renew","name":"b","token":8,"ttlSeconds":30,"slot":3,"owner":"w-1"},{"op":"release","name":"c","token":9}]`,
		`[{"op":"acquire","name":"a#1","ttlSeconds":1}]`,
		`[{"op":"acquire","name":"a","ttlSeconds":1,"forever":true}]`,
		`[{"op":"acquire","name":"a","ttlSeconds":1,"limit":1025}]`,
		`[{"op":"release","name":"a","token":7,"slot":1024}]`,
		`[{"op":"get","name":"a"},{"op":"get","name":"a"}]`,
		`{"operations":[]}`,
	)
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := r.send(t, "POST", "/api/v1/locks", body)
		applies := r.fb.Applies() // checked by the rig (checkLocksCommand)
		if rec.Code != http.StatusOK {
			return
		}
		var out struct {
			Results []map[string]any `json:"results"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Results == nil {
			t.Fatalf("200 from /locks without results: %s", rec.Body.String())
		}
		want := 0
		if len(applies) == 1 {
			want = len(applies[0].GetLocks().GetOps())
		}
		if len(out.Results) != want {
			t.Fatalf("%d results for %d ops: %s", len(out.Results), want, rec.Body.String())
		}
		for i, res := range out.Results {
			if res["index"] != float64(i) || res["op"] == nil || res["name"] == nil {
				t.Fatalf("result %d without its index, op and name: %v", i, res)
			}
		}
	})
}

func checkLocksCommand(t *testing.T, cmd *command.Command) {
	t.Helper()
	in := cmd.GetLocks()
	if in == nil {
		t.Fatalf("/locks applied %T", cmd.Body)
	}
	if n := len(in.Ops); n == 0 || n > locks.MaxOps {
		t.Fatalf("a locks entry with %d ops", n)
	}
	seen := map[string]bool{}
	for _, op := range in.Ops {
		if !locks.ValidName(op.Name) || seen[op.Name] {
			t.Fatalf("op on name %q (valid %v, seen %v)", op.Name, locks.ValidName(op.Name), seen[op.Name])
		}
		seen[op.Name] = true
		if op.Owner != "" && !locks.ValidOwner(op.Owner) {
			t.Fatalf("owner %q", op.Owner)
		}
		switch op.Kind {
		case command.LockOp_ACQUIRE:
			if op.Limit < 1 || op.Limit > locks.MaxLimit {
				t.Fatalf("acquire with limit %d", op.Limit)
			}
		case command.LockOp_RENEW, command.LockOp_RELEASE:
			if op.Token == 0 || op.Slot >= locks.MaxLimit {
				t.Fatalf("%v with token %d slot %d", op.Kind, op.Token, op.Slot)
			}
		}
		if ttl := op.TtlSeconds; (op.Kind == command.LockOp_ACQUIRE || op.Kind == command.LockOp_RENEW) && (ttl <= 0 || ttl > request.MaxSeconds) {
			t.Fatalf("%v with ttlSeconds %d", op.Kind, ttl)
		}
	}
}

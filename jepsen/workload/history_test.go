package workload

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/jepsen/history"
)

// Helpers that build synthetic histories for the checkers' tests.

// mustJSON marshals v for a history op.
func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hop is one synthetic op: [call, ret] in arbitrary units (ns).
type hop struct {
	client    int
	kind      string
	call, ret int64
	status    history.Status
	in, out   any
	err       string
}

func mustOps(t *testing.T, hs []hop) []history.Op {
	t.Helper()
	var out []history.Op
	for _, h := range hs {
		st := h.status
		if st == "" {
			st = history.OK
		}
		out = append(out, history.Op{Client: h.client, Kind: h.kind, Input: mustJSON(t, h.in),
			Output: mustJSON(t, h.out), Status: st, Err: h.err, Call: h.call, Return: h.ret})
	}
	return out
}

// want is what a checker's Result must show.
type want struct {
	lost, duplicated int
	linearizable     *bool // nil: not checked
	violations       []string
	ok               bool
}

func (w want) check(t *testing.T, res Result) {
	t.Helper()
	if res.OK() != w.ok {
		t.Errorf("OK() = %v, want %v; result %+v", res.OK(), w.ok, summarize(res))
	}
	if res.Lost != w.lost {
		t.Errorf("Lost = %d, want %d; violations %q", res.Lost, w.lost, res.Violations)
	}
	if res.Duplicated != w.duplicated {
		t.Errorf("Duplicated = %d, want %d; violations %q", res.Duplicated, w.duplicated, res.Violations)
	}
	if w.linearizable != nil && (res.Linearizable == nil || *res.Linearizable != *w.linearizable) {
		t.Errorf("Linearizable = %v, want %v; violations %q", fmtBool(res.Linearizable), *w.linearizable, res.Violations)
	}
	for _, v := range w.violations {
		found := false
		for _, got := range res.Violations {
			if strings.Contains(got, v) {
				found = true
			}
		}
		if !found {
			t.Errorf("no violation mentions %q; got %q", v, res.Violations)
		}
	}
	if w.ok && len(res.Violations) > 0 {
		t.Errorf("unexpected violations %q", res.Violations)
	}
}

func summarize(r Result) string {
	b, _ := json.Marshal(map[string]any{"lost": r.Lost, "dup": r.Duplicated, "lin": fmtBool(r.Linearizable), "violations": r.Violations})
	return string(b)
}

func fmtBool(b *bool) string {
	if b == nil {
		return "nil"
	}
	if *b {
		return "true"
	}
	return "false"
}

func boolp(b bool) *bool { return &b }

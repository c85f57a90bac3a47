package main

import (
	"context"
	"testing"
	"time"
)

// knownFindings are broker bugs this fuzzer found and reported, which the
// short run below tolerates (the CI fuzz step does not): remove an entry
// when its fix lands.
//
// Fixed (the node now answers these without an entry, fsm.Reader.Refused):
// a seek of a queue or partition that does not exist answered 404 after an
// entry and an audit record; a transaction refused by the operator's
// switches answered 403 after an entry.
var knownFindings = []string{}

// Ten seconds against a real node: the harness builds and starts it, sends
// requests of every kind, compares the state hash around 4xx answers and
// holds tokens to their roles, and the node survives it all.
func TestFuzzARealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node (-short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Duration: 10 * time.Second, Seed: 1, Dir: t.TempDir(), Out: t.Output(), Known: knownFindings})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	t.Log(rep.Details())
	for _, fl := range rep.Failures {
		t.Errorf("%s: %s", fl.Kind, fl.String())
	}
	for _, known := range knownFindings {
		if rep.Known[known] == 0 {
			t.Logf("known finding %q not seen in this run (fixed? then remove it from knownFindings)", known)
		}
	}
	switch {
	case rep.Sent < 200:
		t.Errorf("only %d requests in 10 s", rep.Sent)
	case rep.Classes["2xx"] == 0 || rep.Classes["4xx"] == 0:
		t.Errorf("answers by class: %v", rep.Classes)
	case rep.Checked4xx == 0 || rep.AuthChecks == 0 || rep.ScopeChecks == 0:
		t.Errorf("%d 4xx compared for writes, %d auth answers checked, %d scoped transactions checked", rep.Checked4xx, rep.AuthChecks, rep.ScopeChecks)
	}
}

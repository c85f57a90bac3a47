package cluster

import "testing"

// An epoch ends when another leader is seen, never for the same one again:
// the observer may report a leader twice, or after a forward already
// looked it up.
func TestALeaderEpochEndsOnlyForAnotherLeader(t *testing.T) {
	e := newLeaderEpochs()
	a := e.of("n1")
	if e.of("n1") != a || a.Err() != nil {
		t.Fatal("the same leader seen again ended its epoch")
	}
	b := e.of("n2")
	if a.Err() == nil || b.Err() != nil {
		t.Fatalf("another leader: the old epoch %v, the new one %v", a.Err(), b.Err())
	}
	none := e.of("") // no leader known: what was forwarded to n2 ends too
	if b.Err() == nil || none.Err() != nil {
		t.Fatalf("no leader: n2's epoch %v", b.Err())
	}
}

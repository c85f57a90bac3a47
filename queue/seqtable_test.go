package queue

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSeqTableAgreesWithAMap drives the table and a plain multimap with the
// same random adds and removes (hashes from a small set, so that runs
// collide, wrap around the end of the table and repeat a hash) and checks
// every hash's candidates after each step, through growth and shrinking.
func TestSeqTableAgreesWithAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newSeqTable(0)
	ref := map[uint64][]uint64{}
	hashes := make([]uint64, 300)
	for i := range hashes {
		hashes[i] = rng.Uint64()
	}
	hashes[1] = hashes[0] ^ 1 // neighbours
	var live []seqSlot
	seq := uint64(0)
	check := func(step int) {
		t.Helper()
		if tab.len() != len(live) {
			t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(live))
		}
		for _, h := range hashes {
			got, want := tab.candidates(h), ref[h]
			if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
				t.Fatalf("step %d: candidates(%x) = %v, want %v", step, h, got, want)
			}
		}
	}
	for step := range 20000 {
		grow := step < 8000 || (step > 12000 && step < 15000)
		if len(live) == 0 || (grow && rng.IntN(4) != 0) || (!grow && rng.IntN(4) == 0) {
			seq++
			h := hashes[rng.IntN(len(hashes))]
			tab.add(h, seq)
			ref[h] = append(ref[h], seq)
			live = append(live, seqSlot{h, seq})
		} else {
			k := rng.IntN(len(live))
			s := live[k]
			live = slices.Delete(live, k, k+1)
			tab.remove(s.hash, s.seq)
			ref[s.hash] = slices.DeleteFunc(ref[s.hash], func(x uint64) bool { return x == s.seq })
			if len(ref[s.hash]) == 0 {
				delete(ref, s.hash)
			}
			tab.remove(s.hash, s.seq) // a second remove is a no-op
		}
		if step%97 == 0 {
			check(step)
		}
	}
	check(-1)
	if len(tab.slots) > 8*max(tab.len(), seqTableMin) {
		t.Fatalf("%d slots for %d seqs: the table did not shrink", len(tab.slots), tab.len())
	}
}

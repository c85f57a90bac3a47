package queue

import "slices"

// seqTable is the dedup index of one partition: a multimap from a
// transaction hash to the seqs stored under it, as one flat open-addressing
// table (linear probing, backward-shift deletion). A slot is the hash and
// the seq side by side, so a lookup reads one cache line where a Go map
// reads its group's control word and then the slot; seq 0 (never a
// message's) marks an empty slot. The rare second message under the same
// hash is simply another slot of the same run.
//
// Once a partition's window holds a million messages the index no longer
// fits in the caches, and the lookup is a cache miss or two a message: the
// scale-out bench measured the map's probing at 11% of a follower's CPU.
type seqTable struct {
	slots []seqSlot
	n     int
	shift uint // 64 - log2(len(slots))
}

type seqSlot struct{ hash, seq uint64 }

const seqTableMin = 16 // slots of the smallest table

func newSeqTable(capacity int) *seqTable {
	t := &seqTable{}
	size := seqTableMin
	for size*3/4 < capacity {
		size *= 2
	}
	t.alloc(size)
	return t
}

func (t *seqTable) alloc(size int) {
	t.slots, t.n, t.shift = make([]seqSlot, size), 0, 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
}

// home is where hash's run starts (Fibonacci hashing: FNV-1a's low bits
// alone spread poorly).
func (t *seqTable) home(hash uint64) int { return int((hash * 0x9E3779B97F4A7C15) >> t.shift) }

func (t *seqTable) len() int { return t.n }

// add stores seq under hash (a seq is added once).
func (t *seqTable) add(hash, seq uint64) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(len(t.slots) * 2)
	}
	t.put(seqSlot{hash, seq})
}

func (t *seqTable) put(s seqSlot) {
	mask := len(t.slots) - 1
	i := t.home(s.hash)
	for t.slots[i].seq != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
	t.n++
}

// candidates are the seqs stored under hash, oldest first.
func (t *seqTable) candidates(hash uint64) []uint64 {
	var out []uint64
	mask := len(t.slots) - 1
	for i := t.home(hash); t.slots[i].seq != 0; i = (i + 1) & mask {
		if t.slots[i].hash == hash {
			out = append(out, t.slots[i].seq)
		}
	}
	if len(out) > 1 {
		slices.Sort(out)
	}
	return out
}

// remove takes seq out from under hash, if it is there.
func (t *seqTable) remove(hash, seq uint64) {
	mask := len(t.slots) - 1
	i := t.home(hash)
	for t.slots[i] != (seqSlot{hash, seq}) {
		if t.slots[i].seq == 0 {
			return
		}
		i = (i + 1) & mask
	}
	// Backward-shift deletion: move into the hole every later slot of the
	// run whose home is not between the hole and it, so that no probe meets
	// an empty slot before the end of its run.
	for j := (i + 1) & mask; t.slots[j].seq != 0; j = (j + 1) & mask {
		h := t.home(t.slots[j].hash)
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = seqSlot{}
	t.n--
	if len(t.slots) > seqTableMin && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

// resize moves every slot into a table of size slots.
func (t *seqTable) resize(size int) {
	old := t.slots
	t.alloc(size)
	for _, s := range old {
		if s.seq != 0 {
			t.put(s)
		}
	}
}

// slotOf is the first slot of hash's run (Tx.PrefetchDedup).
func (t *seqTable) slotOf(hash uint64) *seqSlot { return &t.slots[t.home(hash)] }

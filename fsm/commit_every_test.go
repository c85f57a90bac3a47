package fsm

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// crashCopy copies what dir's files hold on disk now (the state file as of
// its last commit, the message files as written) to a new dir: what a
// kill -9 leaves.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(out, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// With the state file committed once per several batches (issue 22), every
// read after every batch sees all it applied (the state hash reads every
// bucket and message), replicas stay equal to one committing every batch,
// and a kill -9 with batches applied but not committed, before and after a
// snapshot, recovers exactly by replaying the log after the file's applied
// index.
func TestStateCommittedEverySeveralBatchesReadsAndRecoversExactly(t *testing.T) {
	for seed := int64(21); seed <= 23; seed++ {
		src := workload(t, seed, 400)
		ref, _ := freshFSM(t)
		dir := t.TempDir()
		lazy := openFSM(t, dir, 8)
		rng := rand.New(rand.NewSource(seed))
		crashes, snapshotted := 0, false
		for i := 0; i < len(src.log); {
			n := min(rng.Intn(5)+1, len(src.log)-i)
			ref.ApplyBatch(src.log[i : i+n])
			lazy.ApplyBatch(src.log[i : i+n])
			i += n
			if stateHash(t, lazy) != stateHash(t, ref) {
				t.Fatalf("seed %d: a read after entry %d does not see what was applied", seed, i)
			}
			if !snapshotted && i > len(src.log)/3 {
				snap, err := lazy.Snapshot() // flushes: Raft may truncate its log after it
				if err != nil {
					t.Fatal(err)
				}
				snap.Release()
				if lazy.db.Pending() != 0 {
					t.Fatal("batches pending after a snapshot")
				}
				snapshotted = true
			}
			if pend := lazy.db.Pending(); pend > 0 && rng.Intn(25) == 0 {
				// kill -9 now: the file lacks the pending batches.
				rec := openFSM(t, crashCopy(t, dir), 8)
				if rec.AppliedIndex() >= lazy.AppliedIndex() {
					t.Fatalf("the crash copy holds entry %d, with %d batches uncommitted", rec.AppliedIndex(), pend)
				}
				rec.ApplyBatch(src.log[rec.AppliedIndex():i]) // Raft replays after the file's applied index
				if stateHash(t, rec) != stateHash(t, ref) {
					t.Fatalf("seed %d: recovery after a kill -9 at entry %d (%d batches uncommitted) differs", seed, i, pend)
				}
				crashes++
			}
		}
		if crashes == 0 || !snapshotted {
			t.Fatalf("seed %d: %d crashes, snapshot %v", seed, crashes, snapshotted)
		}
		if err := lazy.Flush(); err != nil {
			t.Fatal(err)
		}
		eq(t, "state after the last flush", stateHash(t, lazy), stateHash(t, src.f))
	}
}

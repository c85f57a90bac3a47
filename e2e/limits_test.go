package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queen-node/queen-node/diskspace"
	"github.com/queen-node/queen-node/nodeproc"
)

// Overload and a full disk (addendum §4.9), from outside.

// With --max-inflight 2 and 48 concurrent producers some pushes are
// answered 429 overloaded with Retry-After and the engine code; what was
// refused was not applied, and everything answered 201 is delivered.
func TestOverloadIsA429AndChangesNothing(t *testing.T) {
	n := startNode(t, nodeOpts{Extra: []string{"--max-inflight", "2"}})
	var mu sync.Mutex
	accepted, refused := map[string]bool{}, map[string]bool{}
	var sawRetryAfter atomic.Bool
	var wg sync.WaitGroup
	for w := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				id := fmt.Sprintf("w%d-%d", w, i)
				r, err := n.send(10*time.Second, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "ov", TransactionID: id, Payload: i}}}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				switch r.Status {
				case http.StatusCreated:
					accepted[id] = true
				case http.StatusTooManyRequests:
					refused[id] = true
					if errCode(r) != "overloaded" || !strings.Contains(string(r.Body), `"error"`) {
						t.Errorf("429 body: %s", r.Body)
					}
					if r.Header.Get("Retry-After") == "1" {
						sawRetryAfter.Store(true)
					}
				default:
					t.Errorf("push: %s", r)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(refused) == 0 || len(accepted) == 0 {
		t.Fatalf("%d accepted, %d refused: want both under 48 producers and 2 slots", len(accepted), len(refused))
	}
	if !sawRetryAfter.Load() {
		t.Fatal("no 429 carried Retry-After: 1")
	}
	a := n.api(t)
	delivered := map[string]bool{}
	for range 100 {
		p := a.pop("/api/v1/pop/queue/ov", map[string][]string{"batch": {"500"}})
		if p == nil {
			break
		}
		for _, m := range p.Messages {
			delivered[m.TransactionID] = true
		}
		a.ackAll(p, nil)
	}
	for id := range accepted {
		if !delivered[id] {
			t.Errorf("%s was answered 201 and never delivered", id)
		}
	}
	for id := range refused {
		if delivered[id] {
			t.Errorf("%s was answered 429 and delivered", id)
		}
	}
	t.Logf("48 producers, 2 slots: %d pushes accepted, %d answered 429 overloaded", len(accepted), len(refused))
}

// mountTmpfs mounts a tmpfs of size MiB at dir for the test.
func mountTmpfs(t *testing.T, dir string, mib int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem for the disk-full test needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mib), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fill writes a file at path until the filesystem has at most leave bytes
// free.
func fill(t *testing.T, path string, leave uint64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for range 4096 {
		free, err := diskspace.Free(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		if free <= leave {
			return
		}
		n := min(uint64(len(chunk)), free-leave)
		if _, err := f.Write(chunk[:n]); err != nil {
			t.Fatalf("filling %s: %v", path, err)
		}
	}
}

// One follower's data disk fills under load: it stops applying where it
// is (never skipping an entry), refuses pushes with 507 storage_full, and
// the cluster goes on serving through the other two. Once space is freed
// it catches up and its state hash equals the leader's.
func TestAFollowerWithAFullDiskStopsAndCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test; skipped with -short")
	}
	small := t.TempDir()
	mountTmpfs(t, small, 160)
	c := startCluster(t, nodeOpts{SnapshotThreshold: 100000,
		Extra: []string{"--min-free-disk-mb", "48", "--test-hooks"},
		Node: func(i int, s *nodeproc.Spec) error {
			if i == 3 {
				s.DataDir = filepath.Join(small, "n3")
			}
			return nil
		}})
	full := c.nodes[2]
	l := c.leader(20 * time.Second)
	for try := 0; l == full && try < 5; try++ {
		full.send(5*time.Second, "POST", "/debug/step-down", nil, nil)
		c.awaitNewLeader(full.ID(), time.Now(), 5*time.Second) // an error: the next try steps it down again
		l = c.leader(20 * time.Second)
	}
	if l == full {
		t.Fatal("the node on the small disk keeps the leadership")
	}

	var acked atomic.Int64
	stop := make(chan struct{})
	var loadDone sync.WaitGroup
	loadDone.Add(1)
	go func() { // batches of 50 through the leader, every 20 ms
		defer loadDone.Done()
		pad := strings.Repeat("x", 512)
		for b := 0; ; b++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var items []pushItem
			for i := range 50 {
				items = append(items, pushItem{Queue: "disk", Partition: fmt.Sprint("p", i%4), TransactionID: fmt.Sprintf("b%d-%d", b, i), Payload: pad})
			}
			if r, err := l.send(5*time.Second, "POST", "/api/v1/push", map[string]any{"items": items}, nil); err == nil && r.Status == http.StatusCreated {
				acked.Add(50)
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		loadDone.Wait()
	}()
	waitFor(t, 30*time.Second, "the load acknowledged before the disk fills", func() bool { return acked.Load() >= 500 })
	filler := filepath.Join(small, "filler")
	fill(t, filler, 16<<20)
	ctx := context.Background()
	ok, detail := pollUntil(15*time.Second, 100*time.Millisecond, func() (bool, string) {
		var h map[string]any
		if err := full.getJSON("/health", 2*time.Second, &h); err != nil {
			return false, err.Error()
		}
		load, _ := h["load"].(map[string]any)
		return load["applyPaused"] == true && load["storageFull"] == true, fmt.Sprint(load)
	})
	if !ok {
		t.Fatalf("the follower on the full disk did not pause: %s", detail)
	}
	h1, _ := full.Health(ctx)
	ackedBefore := acked.Load()
	lc1, _ := l.Health(ctx)
	// The leader goes on committing and acknowledging while the follower
	// stays where it paused.
	waitFor(t, 30*time.Second, "the leader commits 50 entries more and acknowledges pushes", func() bool {
		lc, err := l.Health(ctx)
		return err == nil && lc.Raft.Commit >= lc1.Raft.Commit+50 && acked.Load() > ackedBefore
	})
	h2, _ := full.Health(ctx)
	lc2, _ := l.Health(ctx)
	if h2.Raft.StateApplied != h1.Raft.StateApplied {
		t.Fatalf("the paused follower applied %d -> %d", h1.Raft.StateApplied, h2.Raft.StateApplied)
	}
	if acked.Load() <= ackedBefore || lc2.Raft.Commit <= lc1.Raft.Commit {
		t.Fatalf("the cluster stopped serving: acked %d -> %d, leader commit %d -> %d", ackedBefore, acked.Load(), lc1.Raft.Commit, lc2.Raft.Commit)
	}
	r, err := full.send(5*time.Second, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "disk", TransactionID: "via-full"}}}, nil)
	if err != nil || r.Status != http.StatusInsufficientStorage || errCode(r) != "storage_full" {
		t.Fatalf("push to the node with the full disk: %v %v, want 507 storage_full", r, err)
	}
	t.Logf("paused at entry %d while the leader committed %d -> %d and %d more messages were acknowledged",
		h1.Raft.StateApplied, lc1.Raft.Commit, lc2.Raft.Commit, acked.Load()-ackedBefore)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The load goes on while the follower resumes.
	ackedAtFree := acked.Load()
	if ok, detail := pollUntil(30*time.Second, 100*time.Millisecond, func() (bool, string) {
		var h map[string]any
		if err := full.getJSON("/health", 2*time.Second, &h); err != nil {
			return false, err.Error()
		}
		load, _ := h["load"].(map[string]any)
		return load["applyPaused"] == false && acked.Load() > ackedAtFree, fmt.Sprint(load, " acked ", acked.Load()-ackedAtFree)
	}); !ok {
		t.Fatalf("the follower did not resume under load once space was back: %s", detail)
	}
	close(stop)
	loadDone.Wait()
	sameState := func(what string) string {
		t.Helper()
		var last string
		ok, detail := pollUntil(60*time.Second, 200*time.Millisecond, func() (bool, string) {
			var idx []float64
			var hashes []string
			for _, n := range c.nodes {
				var sh map[string]any
				if err := n.getJSON("/api/v1/system/state-hash", 10*time.Second, &sh); err != nil {
					return false, err.Error()
				}
				idx = append(idx, sh["appliedIndex"].(float64))
				hashes = append(hashes, sh["hash"].(string))
			}
			last = fmt.Sprint(idx, hashes)
			return idx[0] == idx[1] && idx[1] == idx[2] && hashes[0] == hashes[1] && hashes[1] == hashes[2], last
		})
		if !ok {
			t.Fatalf("%s: the follower did not catch up to the same state: %s", what, detail)
		}
		return last
	}
	// Caught up: all three at one applied index with one state hash.
	last := sameState("after freeing space")

	// Stopped while full: SIGTERM ends it cleanly (apply halts, nothing is
	// written into the full disk); restarted once space is back, it
	// applies what it had not and agrees again.
	fill(t, filler, 16<<20)
	loadIs := func(key string) (bool, string) {
		var h map[string]any
		if err := full.getJSON("/health", 2*time.Second, &h); err != nil {
			return false, err.Error()
		}
		load, _ := h["load"].(map[string]any)
		return load[key] == true, fmt.Sprint(load)
	}
	// Wait until the sampler has seen the disk below the pause threshold
	// (half of --min-free-disk-mb): apply trusts its last reading.
	if ok, detail := pollUntil(5*time.Second, 50*time.Millisecond, func() (bool, string) {
		var h map[string]any
		if err := full.getJSON("/health", 2*time.Second, &h); err != nil {
			return false, err.Error()
		}
		load, _ := h["load"].(map[string]any)
		free, _ := load["diskFreeBytes"].(float64)
		return free < 24<<20, fmt.Sprint(load)
	}); !ok {
		t.Fatalf("the full disk was not noticed: %s", detail)
	}
	c.sendRetry(l, 10*time.Second, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "disk", TransactionID: "while-full"}}}, nil)
	acked.Add(1)
	if ok, detail := pollUntil(15*time.Second, 100*time.Millisecond, func() (bool, string) { return loadIs("applyPaused") }); !ok {
		t.Fatalf("no pause the second time: %s", detail)
	}
	if code, took := full.sigterm(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM of the node with the full disk: exit %d after %v", code, took)
	}
	if b, err := os.ReadFile(full.LogPath()); err != nil || !strings.Contains(string(b), "apply halted") {
		t.Fatalf("the stopping node did not halt its apply (log read: %v)", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	full.restart()
	last = sameState("after a stop while full")
	totals := full.api(t).queueTotals("disk")
	if int64(totals["total"]) < acked.Load() {
		t.Fatalf("the caught-up follower holds %d messages, %d were acknowledged", totals["total"], acked.Load())
	}
	t.Logf("caught up: %s; %d acknowledged messages, the follower holds %d", last, acked.Load(), totals["total"])
}

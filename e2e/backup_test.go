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
	"testing"
	"time"
)

// Backup and restore from outside, with the binary's own subcommands: a
// backup taken under load from a follower, restored into a fresh
// three-node cluster, holds every message and marker acknowledged before
// it was taken and every group position; a truncated or corrupted file is
// refused and changes nothing.

// queenNode runs the binary with args (for at most two minutes) and
// returns its output and error.
func queenNode(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
	return string(out), err
}

func TestBackupUnderLoadRestoresIntoAFreshCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("two clusters; skipped with -short")
	}
	a := startCluster(t, nodeOpts{})
	la := a.leader(20 * time.Second)

	// A group that consumed half of a fixed queue and stopped.
	var fixed []pushItem
	for i := range 80 {
		fixed = append(fixed, pushItem{Queue: "fixed", Partition: fmt.Sprint("p", i%4), TransactionID: fmt.Sprint("f", i), Payload: i})
	}
	a.sendRetry(la, 10*time.Second, "POST", "/api/v1/push", map[string]any{"items": fixed}, nil)
	for range 4 {
		r := a.sendRetry(la, 10*time.Second, "GET", "/api/v1/pop/queue/fixed?batch=10&consumerGroup=frozen&subscriptionMode=all", nil, nil)
		var p popResponse
		r.decode(t, &p)
		group := "frozen"
		la.api(t).ackAll(&p, &group)
	}
	frozen := la.api(t).groupOffsets("frozen", "fixed")

	// Load: producers through every node, a charger that writes a marker
	// with each ack.
	var mu sync.Mutex
	pushedAt := map[string]time.Time{} // answered 201
	markedAt := map[string]time.Time{} // marker + ack committed
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; ; b++ {
				select {
				case <-stop:
					return
				default:
				}
				var items []pushItem
				for i := range 20 {
					items = append(items, pushItem{Queue: "orders", Partition: fmt.Sprint("p", i%4), TransactionID: fmt.Sprintf("w%d-%d-%d", w, b, i), Payload: i})
				}
				n := a.nodes[(w+b)%clusterSize]
				r, err := n.send(5*time.Second, "POST", "/api/v1/push", map[string]any{"items": items}, nil)
				if err == nil && r.Status == http.StatusCreated {
					now := time.Now()
					mu.Lock()
					for _, it := range items {
						pushedAt[it.TransactionID] = now
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := la.send(5*time.Second, "GET", "/api/v1/pop/queue/orders?batch=5&consumerGroup=charger&subscriptionMode=all&wait=true&timeout=500", nil, nil)
			if err != nil || r.Status != http.StatusOK {
				continue
			}
			var p popResponse
			r.decode(t, &p)
			for _, m := range p.Messages {
				body := markerCommit(m, "charger", "charges", "charge:"+m.TransactionID, map[string]any{"chargeId": "ch_" + m.TransactionID})
				if v, err := la.send(5*time.Second, "POST", "/api/v1/transaction", body, nil); err == nil && v.Status == 200 &&
					strings.Contains(string(v.Body), `"success":true`) {
					mu.Lock()
					markedAt[m.TransactionID] = time.Now()
					mu.Unlock()
				}
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	// The backup runs under load: pushes and markers acknowledged before it.
	waitFor(t, 30*time.Second, "100 pushes and 10 markers acknowledged before the backup", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(pushedAt) >= 100 && len(markedAt) >= 10
	})
	file := filepath.Join(t.TempDir(), "cluster.backup")
	follower := a.others(la)[0]
	started := time.Now()
	out, err := queenNode("backup", "--addr", follower.URL(), "--out", file)
	if err != nil {
		t.Fatalf("queen-node backup: %v\n%s", err, out)
	}
	ended := time.Now()
	t.Logf("backup under load took %v: %s", ended.Sub(started), strings.Join(strings.Fields(out), " "))
	waitFor(t, 30*time.Second, "a push acknowledged after the backup ended", func() bool { // load goes on past the backup
		mu.Lock()
		defer mu.Unlock()
		for _, at := range pushedAt {
			if at.After(ended) {
				return true
			}
		}
		return false
	})
	close(stop)
	wg.Wait()
	mu.Lock()
	var wantPushed, wantMarked []string
	for id, at := range pushedAt {
		if at.Before(started) {
			wantPushed = append(wantPushed, id)
		}
	}
	for id, at := range markedAt {
		if at.Before(started) {
			wantMarked = append(wantMarked, id)
		}
	}
	mu.Unlock()
	if len(wantPushed) == 0 || len(wantMarked) == 0 {
		t.Fatalf("the load acknowledged %d pushes and %d markers before the backup; want some of each", len(wantPushed), len(wantMarked))
	}

	// A fresh cluster; bad files first.
	b := startCluster(t, nodeOpts{})
	lb := b.leader(20 * time.Second)
	fb := b.others(lb)[0]
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.backup")
	corrupted := filepath.Join(t.TempDir(), "corrupted.backup")
	os.WriteFile(truncated, good[:len(good)/2], 0o600)
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x40
	os.WriteFile(corrupted, bad, 0o600)
	for _, c := range []struct{ file, want string }{{truncated, "truncated"}, {corrupted, "checksum"}} {
		if out, err := queenNode("verify-backup", c.file); err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("verify-backup %s: %v %s, want an error saying %q", filepath.Base(c.file), err, out, c.want)
		}
		if out, err := queenNode("restore", "--addr", fb.URL(), "--in", c.file); err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("restore %s: %v %s, want refused saying %q", filepath.Base(c.file), err, out, c.want)
		}
		// The server refuses one too, if a client sends it anyway.
		r, err := lb.send(10*time.Second, "POST", "/api/v1/system/restore", nil, nil)
		if err != nil || r.Status != http.StatusBadRequest || errCode(r) != "bad_backup" {
			t.Fatalf("an empty restore body: %v %v, want 400 bad_backup", r, err)
		}
	}
	var queues struct {
		Queues []any `json:"queues"`
	}
	if err := lb.getJSON("/api/v1/resources/queues", 5*time.Second, &queues); err != nil || len(queues.Queues) != 0 {
		t.Fatalf("a refused restore changed the cluster: %v %v", queues, err)
	}

	out, err = queenNode("restore", "--addr", fb.URL(), "--in", file)
	if err != nil {
		t.Fatalf("queen-node restore: %v\n%s", err, out)
	}
	t.Logf("restored: %s", strings.Join(strings.Fields(out), " "))

	// Every node of the new cluster holds the same state.
	awaitSameState(t, b.nodes, 30*time.Second)
	for _, n := range b.nodes {
		if got := n.api(t).groupOffsets("frozen", "fixed"); fmt.Sprint(got) != fmt.Sprint(frozen) {
			t.Fatalf("%s: group frozen at %v, it was at %v", n.ID(), got, frozen)
		}
	}
	lb = b.leader(20 * time.Second)
	delivered := map[string]bool{}
	for _, id := range drainGroup(t, b, lb, "orders", "verify") {
		delivered[id] = true
	}
	for _, id := range wantPushed {
		if !delivered[id] {
			t.Errorf("%s was acknowledged before the backup and is not in the restored cluster", id)
		}
	}
	missing := 0
	for _, id := range wantMarked {
		if e := lb.api(t).kvGet("charges", "charge:"+id); !e.Found {
			missing++
			t.Errorf("marker of %s was committed before the backup and is not in the restored cluster", id)
		}
	}
	// The restored cluster serves: a push and a pop of it.
	lb.api(t).push(pushItem{Queue: "after", TransactionID: "a1", Payload: 1})
	if p := lb.api(t).pop("/api/v1/pop/queue/after", nil); p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop after the restore: %+v", p)
	}
	t.Logf("%d pushes and %d markers acknowledged before the backup, all in the restored cluster (%d messages delivered there)",
		len(wantPushed), len(wantMarked)-missing, len(delivered))
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/kvstore"
	"github.com/queen-node/queen-node/store"
	"github.com/queen-node/queen-node/tenant"
)

// The case protocol-aware recovery exists for (FAST'18; cluster/resync.go):
// of a three-node cluster only the leader L and one follower F hold the
// newest committed entry E (the third, S, was stopped). L dies, and F's
// copy of E is damaged on disk. Were F to vote like any node, F and S
// could elect a leader without E, and an acknowledged write would be lost.
// Instead F finds the damage at open, neither votes nor stands, and the
// cluster stays unavailable: S alone cannot win. When L is back, L and S
// elect L (its log holds E), F is made a non-voter, rebuilt from L and
// promoted back, and E is delivered as pushed.
func TestADamagedReplicaOfTheNewestEntryWaitsForTheOther(t *testing.T) {
	c := startCluster(t, nodeOpts{})
	l := c.leader(30 * time.Second)
	followers := c.others(l)
	f, s := followers[0], followers[1]
	s.sigterm(10 * time.Second)

	const needle = "the-newest-entry-only-two-nodes-hold"
	l.api(t).push(pushItem{Queue: "ledger", TransactionID: "e-1", Payload: map[string]string{"entry": needle}})
	lh, err := l.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ok, detail := pollUntil(10*time.Second, 50*time.Millisecond, func() (bool, string) {
		h, err := f.Health(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return h.Raft.Applied >= lh.Raft.Commit, fmt.Sprintf("applied %d, want %d", h.Raft.Applied, lh.Raft.Commit)
	})
	if !ok {
		t.Fatalf("%s did not apply the newest entry: %s", f.ID(), detail)
	}
	l.kill9()
	f.sigterm(10 * time.Second)
	if flipped := flipEvery(t, filepath.Join(f.DataDir(), "raft", "wal"), needle); flipped == 0 {
		t.Fatalf("no copy of the entry in %s's log", f.ID())
	}

	f.launch()
	s.launch()
	// Unavailable, and saying why: no leader for a while, F quarantined.
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range []*node{f, s} {
			if h, err := n.Health(context.Background()); err == nil && h.Raft.LeaderID != "" {
				t.Fatalf("%s names the leader %s while only %s (damaged) and %s (behind) are up", n.ID(), h.Raft.LeaderID, f.ID(), s.ID())
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	r, err := f.send(2*time.Second, "GET", "/health", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Status string `json:"status"`
		Raft   struct {
			Damage *struct{ Where string } `json:"damage"`
			Resync *struct{ Phase string } `json:"resync"`
		} `json:"raft"`
	}
	if json.Unmarshal(r.Body, &h) != nil || h.Status != "damaged" || h.Raft.Damage == nil || h.Raft.Damage.Where != "raft_log" ||
		h.Raft.Resync == nil || h.Raft.Resync.Phase == "" {
		t.Fatalf("%s's /health while it waits: %d %s", f.ID(), r.Status, r.Body)
	}
	t.Logf("%s waits: %s", f.ID(), h.Raft.Resync.Phase)

	l.launch()
	nl := c.leader(30 * time.Second)
	if nl != l {
		t.Fatalf("the leader is %s; only %s holds the newest entry intact", nl.ID(), l.ID())
	}
	awaitRebuilt(t, c, f, 60*time.Second)
	p := l.api(t).pop("/api/v1/pop/queue/ledger", url.Values{"wait": {"false"}})
	if p == nil || len(p.Messages) != 1 || compactJSON(t, p.Messages[0].Data) != fmt.Sprintf(`{"entry":%q}`, needle) {
		t.Fatalf("the newest entry after the recovery: %+v", p)
	}
}

// flipEvery flips one bit inside every occurrence of needle in the files
// under dir and returns how many it flipped.
func flipEvery(t *testing.T, dir, needle string) int {
	t.Helper()
	n := 0
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found := 0
		for at := 0; ; {
			i := bytes.Index(b[at:], []byte(needle))
			if i < 0 {
				break
			}
			b[at+i+len(needle)/2] ^= 0x01
			at += i + len(needle)
			found++
		}
		if found > 0 {
			n += found
			return os.WriteFile(path, b, info.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Damage in a stopped follower's state file, found three ways: a flipped
// bit fails its record's checksum on the first read that meets it (the
// state check at start reads every record); meta pages bbolt finds invalid
// stop the file from opening (the node reads the configuration from its
// Raft files instead, and rebuilds); a record rewritten whole with a valid
// checksum (a lost or misdirected write: no checksum can tell) is found by
// the state check at its start: the leader appends a check for the
// restarted node, every replica digests its state file at that entry, the
// follower's digest differs from the two others', and another voter counts
// the peer that differed. Either way the follower rebuilds itself from the
// leader and reads the value as written.
func TestAStateFileDamagedUnderAFollowerIsFoundAndRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path, needle string)
		peer   bool // found by the state check's comparison
	}{
		{"a flipped bit", func(t *testing.T, path, needle string) {
			if flipEvery(t, path, needle) == 0 {
				t.Fatalf("the value is not in %s", path)
			}
		}, false},
		{"a record rewritten with a valid checksum", rewriteKV, true},
		{"both meta pages, so that bbolt does not open it", flipMetaPages, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, nodeOpts{})
			l := c.leader(30 * time.Second)
			const needle = "a-value-whose-bytes-the-disk-will-flip"
			l.api(t).mustStatus(200, "POST", "/api/v1/kv", map[string]any{"operations": []any{
				map[string]any{"op": "put", "ns": "ledger", "key": "balance", "value": needle, "forever": true}}})
			awaitSameState(t, c.others(), 20*time.Second)
			f := c.others(l)[0]
			f.sigterm(10 * time.Second)
			tc.damage(t, filepath.Join(f.DataDir(), "fsm.db"), needle)
			since := time.Now()
			f.launch()
			awaitRebuilt(t, c, f, 90*time.Second)
			t.Logf("%s's damaged state file found and rebuilt in %v", f.ID(), time.Since(since).Round(time.Millisecond))
			if kept, _ := filepath.Glob(filepath.Join(f.DataDir(), "damaged", "*", "fsm.db")); len(kept) != 1 {
				t.Fatalf("the damaged state file was not kept aside: %v", kept)
			}
			if tc.peer {
				// Which of the others sees the damaged node's digest before
				// it restarts to rebuild is up to gossip: in a CI run the
				// leader had judged on the two matching digests and a
				// follower counted the one that differed.
				counted := regexp.MustCompile(`queen_state_check_total\{result="peer_differs"\} [1-9]`)
				var seen []string
				if ok, _ := pollUntil(10*time.Second, 200*time.Millisecond, func() (bool, string) {
					seen = seen[:0]
					for _, o := range c.others(f) {
						m := string(o.api(t).must("GET", "/metrics/prometheus", nil).Body)
						if counted.MatchString(m) {
							return true, ""
						}
						seen = append(seen, o.ID()+":\n"+grepLines(m, "queen_state_check"))
					}
					return false, ""
				}); !ok {
					t.Fatalf("no other voter counted the peer that differed:\n%s", strings.Join(seen, "\n"))
				}
			}
			r := f.api(t).mustStatus(200, "GET", "/api/v1/kv/ledger/balance", nil)
			if !bytes.Contains(r.Body, []byte(needle)) {
				t.Fatalf("the rebuilt node reads %s", r.Body)
			}
		})
	}
}

// flipMetaPages flips a bit of the magic number of both of bbolt's meta
// pages (pages 0 and 1, after each page's 16-byte header).
func flipMetaPages(t *testing.T, path, _ string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, off := range []int64{16, int64(os.Getpagesize()) + 16} {
		b := []byte{0}
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x01
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
}

// rewriteKV rewrites the KV record holding needle in the state file at
// path, with another value of the same length and a valid checksum, as a
// write the disk lost or put in the wrong place would leave it.
func rewriteKV(t *testing.T, path, needle string) { rewriteKVOf(t, path, needle, tenant.Default) }

// rewriteKVOf is rewriteKV in the buckets of tenant name.
func rewriteKVOf(t *testing.T, path, needle, name string) {
	t.Helper()
	db, err := store.Open(path, fsm.Buckets, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	found := false
	if err := db.Update(func(b *store.Batch) error {
		tx := b.In(fsm.ScopeOf(tenant.Key(name))).Begin()
		c := tx.Cursor(kvstore.BucketEntries)
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if bytes.Contains(v, []byte(needle)) {
				tx.Put(kvstore.BucketEntries, append([]byte(nil), k...), bytes.ReplaceAll(v, []byte(needle), bytes.Repeat([]byte("x"), len(needle))))
				found = true
			}
		}
		return tx.Commit()
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("no KV record holds %q", needle)
	}
}

// A node that is the only voter has nothing to rebuild a damaged log from:
// it refuses to start and says why (before, hashicorp/raft's start
// panicked at the unreadable entry), and leaves its files as they are.
func TestTheOnlyVoterRefusesToStartOnADamagedLog(t *testing.T) {
	n := startNode(t, nodeOpts{})
	const needle = "an-entry-of-the-only-copy"
	n.api(t).push(pushItem{Queue: "alone", TransactionID: "a-1", Payload: map[string]string{"entry": needle}})
	n.sigterm(10 * time.Second)
	if flipEvery(t, filepath.Join(n.DataDir(), "raft", "wal"), needle) == 0 {
		t.Fatal("no copy of the entry in the log")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, n.Args()...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("start on a damaged log: %v, want exit status 1\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("this node is the only voter: there is no replica to rebuild them from")) || bytes.Contains(out, []byte("panic")) {
		t.Fatalf("the refusal does not say why:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(n.DataDir(), "damaged")); !os.IsNotExist(err) {
		t.Fatalf("the only copy was set aside: %v", err)
	}
}

// A flipped bit in a stopped follower's newest snapshot fails its CRC-64
// when the node opens it at start: the node rebuilds itself from the
// leader like any damaged node, its damaged snapshot set aside.
func TestADamagedSnapshotIsFoundAtOpenAndRebuilt(t *testing.T) {
	// with --raft-groups 2 the stores are opened again on the Raft port's
	// mux (before, the reopened transport found its layer closed and the
	// node never caught up: jepsen r9)
	for _, groups := range []string{"1", "2"} {
		t.Run("raft-groups="+groups, func(t *testing.T) { damagedSnapshotAtOpen(t, groups) })
	}
}

func damagedSnapshotAtOpen(t *testing.T, groups string) {
	c := startCluster(t, nodeOpts{SnapshotThreshold: 100, SnapshotInterval: 50 * time.Millisecond, Extra: []string{"--raft-groups", groups}})
	l := c.leader(30 * time.Second)
	f := c.others(l)[0]
	a := l.api(t)
	var snaps []string
	for i := 0; len(snaps) == 0 && i < 40; i++ {
		for j := range 20 {
			a.push(pushItem{Queue: "snapped", TransactionID: fmt.Sprintf("s-%d-%d", i, j), Payload: map[string]int{"i": i, "j": j}})
		}
		time.Sleep(100 * time.Millisecond)
		snaps, _ = filepath.Glob(filepath.Join(f.DataDir(), "raft", "snapshots", "*", "state.bin"))
	}
	if len(snaps) == 0 {
		t.Fatalf("%s took no snapshot", f.ID())
	}
	f.sigterm(10 * time.Second)
	snaps, _ = filepath.Glob(filepath.Join(f.DataDir(), "raft", "snapshots", "*", "state.bin"))
	for _, p := range snaps { // every snapshot it keeps: the newest is the one opened
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0x10
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.launch()
	awaitRebuilt(t, c, f, 60*time.Second)
	if kept, _ := filepath.Glob(filepath.Join(f.DataDir(), "damaged", "*", "snapshots")); len(kept) != 1 {
		t.Fatalf("the damaged snapshots were not kept aside: %v", kept)
	}
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The Raft log moves between raft-boltdb (every earlier version's
// raft.db, and --raft-log bolt) and raft-wal (the default) at start, on
// the built binary: a data dir whose log is in raft.db starts with the
// default and finds every message it acknowledged, the FORMAT file says
// where the log is, and the move back with --raft-log bolt loses nothing
// either, across a kill -9 as well as a clean stop.
func TestTheRaftLogMovesToTheWALAndBack(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	format := func() string {
		b, err := os.ReadFile(filepath.Join(data, "FORMAT"))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			RaftLog string `json:"raftLog"`
		}
		json.Unmarshal(b, &f)
		return f.RaftLog
	}
	pushed := 0
	push := func(a *api, n int) {
		for range n {
			a.push(pushItem{Queue: "moved", TransactionID: fmt.Sprint("m-", pushed), Payload: map[string]int{"n": pushed}})
			pushed++
		}
	}
	consumed := map[string]bool{}
	consume := func(a *api, n int) {
		for len(consumed) < n {
			p := a.pop("/api/v1/pop/queue/moved", url.Values{"batch": {"10"}})
			if p == nil {
				t.Fatalf("nothing to pop with %d of %d consumed", len(consumed), n)
			}
			for _, m := range p.Messages {
				if consumed[m.TransactionID] {
					t.Fatalf("%s delivered again after its ack", m.TransactionID)
				}
				consumed[m.TransactionID] = true
			}
			a.ackAll(p, nil)
		}
	}

	// As an earlier version would have written it: the log in raft.db.
	n := startNode(t, nodeOpts{DataDir: data, Extra: []string{"--raft-log", "bolt"}})
	push(n.api(t), 300)
	consume(n.api(t), 100)
	if code, _ := n.sigterm(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	if got := format(); got != "bolt" {
		t.Fatalf("FORMAT raftLog %q after a start with --raft-log bolt", got)
	}

	// The default moves it into raft-wal, and everything is there.
	n = startNode(t, nodeOpts{DataDir: data})
	if got := format(); got != "wal" {
		t.Fatalf("FORMAT raftLog %q after a default start", got)
	}
	if _, err := os.Stat(filepath.Join(data, "raft", "wal")); err != nil {
		t.Fatalf("no raft-wal directory: %v", err)
	}
	a := n.api(t)
	consume(a, 200)
	push(a, 100)
	n.kill9()

	// Back into raft.db after a kill -9: nothing acknowledged is lost,
	// nothing consumed comes back.
	n = startNode(t, nodeOpts{DataDir: data, Extra: []string{"--raft-log", "bolt"}})
	if got := format(); got != "bolt" {
		t.Fatalf("FORMAT raftLog %q after moving back", got)
	}
	if _, err := os.Stat(filepath.Join(data, "raft", "wal")); !os.IsNotExist(err) {
		t.Fatalf("the raft-wal directory is still there after moving back: %v", err)
	}
	consume(n.api(t), pushed)
	if p := n.api(t).pop("/api/v1/pop/queue/moved", nil); p != nil {
		t.Fatalf("a message beyond the %d pushed: %+v", pushed, p.Messages)
	}
}

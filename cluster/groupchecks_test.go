package cluster

import (
	"fmt"
	"io"
	"log"
	"testing"
	"time"
)

// A node that joins gossip after another node checked a group > 0 still
// gets that check: without it, a replica that restarted and ran its first
// check at once could not see that its own digest is the one that differs
// (e2e TestADamagedReplicaOfAnotherGroupIsRebuilt failed so in CI once).
func TestAGroupCheckSentBeforeANodeJoinedReachesIt(t *testing.T) {
	quiet := log.New(io.Discard, "", 0)
	start := func(id string) *members {
		addr := freeAddr(t)
		m, err := startMembership(meta{ID: id}, addr, addr, true, nil, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.shutdown)
		return m
	}
	a := start("a")
	a.publishGroupCheck(1, 42, "d1g3st") // nobody else is there yet
	b := start("b")
	if _, err := b.ml.Join([]string{a.ml.LocalNode().Address()}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, func() error {
		if at, d := b.checkOf(Member{meta: meta{ID: "a"}}, 1); at != 42 || d != "d1g3st" {
			return fmt.Errorf("b holds a's check of group 1 as %d %q", at, d)
		}
		return nil
	})
}

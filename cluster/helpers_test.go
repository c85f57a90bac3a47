package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// freeAddr returns a free 127.0.0.1 port.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// mustStartNode starts a single-node cluster on a temp dir and waits until
// it leads.
func mustStartNode(t testing.TB) *Node {
	t.Helper()
	n, err := Start(Config{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: freeAddr(t), BootstrapExpect: 1,
		Tuning: fastTuning()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	checkFor(t, 10*time.Second, func() error {
		if !n.IsLeader() || !n.ready.Load() {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	return n
}

// checkFor polls fn until it returns nil or the time is up.
func checkFor(t testing.TB, total time.Duration, fn func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	var err error
	for {
		if err = fn(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("still failing after %v: %v", total, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

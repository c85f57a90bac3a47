// Package grpctest starts a real in-process queen-node with both front ends
// for tests and benchmarks: Raft and the state file in a temporary
// directory, the HTTP API behind httptest, and the gRPC server (forwarding,
// queen.v1, health, reflection) on a 127.0.0.1 listener.
package grpctest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/grpcapi"
	"github.com/queen-node/queen-node/httpapi"
	"github.com/queen-node/queen-node/raftlog"
	"github.com/queen-node/queen-node/request"
	"github.com/queen-node/queen-node/tlsfiles"
)

// Node is a started node and where to reach it.
type Node struct {
	*cluster.Node
	HTTPURL  string // http://127.0.0.1:port
	GRPCAddr string // 127.0.0.1:port
	GRPC     *grpc.Server
}

// Options are what a test may choose.
type Options struct {
	// DefaultSubscriptionMode: "" = "new", as the binary's default.
	DefaultSubscriptionMode string
	// KVReadRate: 0 = unlimited (tests read KV in tight loops).
	KVReadRate float64
	// Logs: the node's log; nil = discarded.
	Logs io.Writer
	// Auth puts both APIs behind JWTs; nil = off.
	Auth *auth.Verifier
	// PeerTLS serves the gRPC port over TLS, the forwarding service to
	// callers with a peer certificate only; nil = plain gRPC.
	PeerTLS *tlsfiles.Peer
}

// Start starts a single-node broker and waits until it leads. Everything is
// stopped when the test ends.
func Start(t testing.TB, o Options) *Node {
	t.Helper()
	rate := o.KVReadRate
	if rate == 0 {
		rate = -1
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	log := slog.New(slog.NewTextHandler(o.Logs, nil))
	var n *cluster.Node
	var err error
	for attempt := 0; attempt < 5; attempt++ { // a free port can be taken between freeAddr and the bind
		n, err = cluster.Start(cluster.Config{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: freeAddr(t), Logger: log,
			BootstrapExpect: 1, Registry: prometheus.NewRegistry(), SweepInterval: 100 * time.Millisecond,
			Tuning: raftlog.Tuning{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
				LeaderLeaseTimeout: 100 * time.Millisecond}})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Shutdown()
		t.Fatal(err)
	}
	rules := request.New(request.Options{DefaultSubscriptionMode: o.DefaultSubscriptionMode, KVReadRate: rate})
	opts := []grpcapi.Option{grpcapi.WithRules(rules), grpcapi.WithAuth(o.Auth)}
	if o.PeerTLS != nil {
		opts = append(opts, grpcapi.WithPeerTLS(o.PeerTLS.SharedServerConfig(nil), o.PeerTLS.Verified))
	}
	srv := grpcapi.NewServer(n, opts...)
	go srv.Serve(ln)
	h := httptest.NewServer(httpapi.New(httpapi.Config{Backend: n, Logger: log, Rules: rules, Auth: o.Auth}))
	t.Cleanup(func() {
		n.Drain()
		h.Close()
		srv.GracefulStop()
		n.Shutdown()
	})
	deadline := time.Now().Add(10 * time.Second)
	for !n.Ready() || !n.IsLeader() || readErr(n) != nil {
		if time.Now().After(deadline) {
			t.Fatal("grpctest: the node did not become ready in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &Node{Node: n, HTTPURL: h.URL, GRPCAddr: ln.Addr().String(), GRPC: srv}
}

// readErr is a linearizable read: it succeeds once the leader has applied
// the entries of earlier terms.
func readErr(n *cluster.Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := n.ReadIndex(ctx)
	return err
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/examples/exactly-once/app"
)

// TestExactlyOnceExample runs examples/exactly-once (the seed's "charge
// each order once", written with the Go client) against the built binary,
// over both transports: the HTTP API and gRPC (queen.v1).
func TestExactlyOnceExample(t *testing.T) {
	n := startNode(t, nodeOpts{})
	for _, tc := range []struct{ transport, url string }{
		{"http", "http://" + n.Addrs().HTTP},
		{"grpc", n.Addrs().GRPC},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var out bytes.Buffer
			start := time.Now()
			err := app.Run(ctx, app.Config{URL: tc.url, Transport: tc.transport, Out: &out})
			t.Logf("ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
			if err != nil {
				t.Fatalf("app.Run: %v", err)
			}
			if !strings.Contains(out.String(), "\nPASS: 7 checks\n") {
				t.Fatalf("no PASS line")
			}
		})
	}
	n.requireRunning()
}

// TestExactlyOnceExampleOnFollower runs the example over gRPC against a
// follower of a three-node cluster: the public gRPC API gets the node's
// leader forwarding like the HTTP API (pushes, pops, acks, transactions,
// KV writes and linearizable KV reads all go through the leader).
func TestExactlyOnceExampleOnFollower(t *testing.T) {
	c := startCluster(t, nodeOpts{})
	f := c.others(c.leader(30 * time.Second))[0]
	for _, tc := range []struct{ transport, url string }{
		{"grpc", f.Addrs().GRPC},
		{"http", "http://" + f.Addrs().HTTP},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var out bytes.Buffer
			err := app.Run(ctx, app.Config{URL: tc.url, Transport: tc.transport, Out: &out})
			if err != nil {
				t.Fatalf("app.Run against follower %s: %v\n%s", f.ID(), err, out.String())
			}
		})
	}
}

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/grpcapi/internalpb"
	"github.com/queen-node/queen-node/grpcapi/queenpb"
	"github.com/queen-node/queen-node/nodeproc"
	"github.com/queen-node/queen-node/tlsfiles/tlstest"
)

// A three-node cluster with every link encrypted: HTTPS and TLS gRPC for
// clients (a certificate of the cluster CA), mutual TLS on Raft and
// forwarding, gossip under a keyring. It forms, forwards (HTTPS and gRPC
// through a follower) and fails over; a node whose certificate another CA
// signed never enters the Raft configuration; the forwarding service
// refuses a caller without a peer certificate.
func TestMutualTLSBetweenNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	dir := t.TempDir()
	ca, rogueCA := tlstest.NewCA(t, "queen cluster CA"), tlstest.NewCA(t, "somebody else")
	caFile := filepath.Join(dir, "ca.PEM")
	os.WriteFile(caFile, ca.PEM, 0o600)
	pool := ca.Pool()
	keyring := keyFile(t, dir, "gossip.keys")
	c := startCluster(t, nodeOpts{Node: func(i int, s *nodeproc.Spec) error {
		signer := ca
		if i == 4 {
			signer = rogueCA
		}
		cert, key := signer.Issue(t, dir, fmt.Sprint("n", i))
		pub, pubKey := ca.Issue(t, dir, fmt.Sprint("public-n", i))
		s.Flags = append(s.Flags, "--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", caFile,
			"--tls-cert", pub, "--tls-key", pubKey, "--gossip-keyring", keyring)
		s.ClientTLS = &tls.Config{RootCAs: pool}
		return nil
	}})
	l := c.leader(20 * time.Second)
	via := c.others(l)[0]
	if r := c.sendRetry(via, 10*time.Second, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "m", TransactionID: "via-follower"}}}, nil); r.Status != http.StatusCreated {
		t.Fatalf("a push forwarded over mTLS: %s", r)
	}
	// The public gRPC API through a follower, over TLS checked against the CA.
	conn, err := grpc.NewClient(via.Addrs().GRPC, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gctx, gcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer gcancel()
	if _, err := queenpb.NewQueenClient(conn).Push(gctx, &queenpb.PushRequest{Items: []*queenpb.PushItem{{Queue: "m", TransactionId: "grpc-via-follower"}}}); err != nil {
		t.Fatalf("a gRPC push over TLS through a follower: %v", err)
	}
	old := l.ID()
	l.kill9()
	if _, took, err := c.awaitNewLeader(old, time.Now(), 20*time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("failover with mTLS: new leader after %v", took)
	}
	nl := c.leader(20 * time.Second)
	if r := c.sendRetry(c.others(nl)[0], 10*time.Second, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "m", TransactionID: "after-failover"}}}, nil); r.Status != http.StatusCreated {
		t.Fatalf("a push after the failover: %s", r)
	}
	l.restart()
	c.waitRejoined(l, 30*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rogue, err := c.AddNode(ctx)
	if rogue != nil {
		defer rogue.Kill()
	}
	if err == nil {
		t.Fatal("a node with a certificate of another CA joined")
	}
	v, err := c.leader(20 * time.Second).ClusterView(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range v.Nodes {
		if n.ID == "n4" && n.Voter {
			t.Fatalf("n4 entered the Raft configuration: %+v", v.Nodes)
		}
	}

	// The forwarding service on a node's gRPC port: without a client
	// certificate (TLS to the port, trusting it) the call is refused.
	conn, err = grpc.NewClient(c.nodes[0].Addrs().GRPC, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	_, err = internalpb.NewForwardClient(conn).Apply(cctx, &command.Command{Body: &command.Command_Noop{Noop: &command.Noop{}}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Forward.Apply without a peer certificate: %v, want PERMISSION_DENIED", err)
	}
}

// --tls-cert alone (no peer TLS): the HTTP and gRPC APIs serve TLS, and the
// nodes forward to each other over TLS, checking the other node's
// certificate against their own certificate file's chain; plain gRPC is
// refused.
func TestTLSWithoutPeerTLSForwardsOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "queen public CA")
	pool := ca.Pool()
	c := startCluster(t, nodeOpts{Node: func(i int, s *nodeproc.Spec) error {
		cert, key := ca.Issue(t, dir, fmt.Sprint("n", i))
		chain, _ := os.ReadFile(cert) // the leaf, then the CA: a full chain
		os.WriteFile(cert, append(chain, ca.PEM...), 0o600)
		s.Flags = append(s.Flags, "--tls-cert", cert, "--tls-key", key)
		s.ClientTLS = &tls.Config{RootCAs: pool}
		return nil
	}})
	l := c.leader(20 * time.Second)
	via := c.others(l)[0]
	if r := c.sendRetry(via, 10*time.Second, "POST", "/api/v1/push", map[string]any{"items": []pushItem{{Queue: "t", TransactionID: "via-follower"}}}, nil); r.Status != http.StatusCreated {
		t.Fatalf("an HTTPS push through a follower (forwarded over TLS): %s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tlsConn, err := grpc.NewClient(via.Addrs().GRPC, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer tlsConn.Close()
	if _, err := queenpb.NewQueenClient(tlsConn).Push(ctx, &queenpb.PushRequest{Items: []*queenpb.PushItem{{Queue: "t", TransactionId: "grpc-via-follower"}}}); err != nil {
		t.Fatalf("a gRPC push over TLS through a follower: %v", err)
	}
	plain, err := grpc.NewClient(via.Addrs().GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer pcancel()
	if _, err := queenpb.NewQueenClient(plain).Push(pctx, &queenpb.PushRequest{Items: []*queenpb.PushItem{{Queue: "t", TransactionId: "plain"}}}); err == nil {
		t.Fatal("a plain-text gRPC call was served beside TLS")
	}
}

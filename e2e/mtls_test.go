package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
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
)

// testCA is a certificate authority for a test cluster.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a node certificate signed by ca into dir as name.pem and
// name.key.
func (ca *testCA) issue(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

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
	ca, rogueCA := newCA(t, "queen cluster CA"), newCA(t, "somebody else")
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, ca.pem, 0o600)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	keyring := keyFile(t, dir, "gossip.keys")
	c := startCluster(t, nodeOpts{Node: func(i int, s *nodeproc.Spec) error {
		signer := ca
		if i == 4 {
			signer = rogueCA
		}
		cert, key := signer.issue(t, dir, fmt.Sprint("n", i))
		pub, pubKey := ca.issue(t, dir, fmt.Sprint("public-n", i))
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
	ca := newCA(t, "queen public CA")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	c := startCluster(t, nodeOpts{Node: func(i int, s *nodeproc.Spec) error {
		cert, key := ca.issue(t, dir, fmt.Sprint("n", i))
		chain, _ := os.ReadFile(cert) // the leaf, then the CA: a full chain
		os.WriteFile(cert, append(chain, ca.pem...), 0o600)
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

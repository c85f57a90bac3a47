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
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// writeCert writes a self-signed certificate for 127.0.0.1 with the given
// serial, and returns it.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "queen-node test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	// Key first, then the certificate: a reader between the two writes
	// sees a mismatched pair, which must keep the old one.
	os.WriteFile(keyFile+".tmp", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	os.WriteFile(certFile+".tmp", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.Rename(keyFile+".tmp", keyFile)
	os.Rename(certFile+".tmp", certFile)
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// The HTTP API over TLS: HTTPS with the given certificate, plain HTTP
// refused, a replaced certificate served without a restart (on change and
// on SIGHUP), and --require-secure refusing to start an open node.
func TestHTTPSWithACertificateReplacedOnDisk(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 1)
	addrs, err := nodeproc.FreeAddrs(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := addrs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "--node-id", "n1", "--data-dir", filepath.Join(dir, "data"),
		"--http-addr", a.HTTP, "--grpc-addr", a.GRPC, "--raft-addr", a.Raft, "--gossip-addr", a.Gossip,
		"--tls-cert", certFile, "--tls-key", keyFile)
	logf, _ := os.Create(filepath.Join(dir, "node.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	// The client trusts nothing; it reads the serial of what it is served.
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	served := func() (int64, int, error) {
		resp, err := hc.Get("https://" + a.HTTP + "/health")
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), resp.StatusCode, nil
	}
	ok, detail := pollUntil(20*time.Second, 100*time.Millisecond, func() (bool, string) {
		s, code, err := served()
		return err == nil && code == 200 && s == 1, "serial/status/err: " + strings.TrimSpace(strings.Join([]string{itoa(s), itoa(int64(code)), errText(err)}, " "))
	})
	if !ok {
		b, _ := os.ReadFile(filepath.Join(dir, "node.log"))
		t.Fatalf("HTTPS /health: %s\n%s", detail, b)
	}
	if resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + a.HTTP + "/health"); err == nil && resp.StatusCode == 200 {
		t.Fatal("plain HTTP was served beside TLS")
	}
	writeCert(t, certFile, keyFile, 2)
	if ok, detail := pollUntil(10*time.Second, 200*time.Millisecond, func() (bool, string) {
		s, _, err := served()
		return err == nil && s == 2, itoa(s) + " " + errText(err)
	}); !ok {
		t.Fatalf("the replaced certificate was not served: %s", detail)
	}
	// A broken pair keeps the one loaded before; SIGHUP reloads a good one.
	// Handshakes go on until the node has read the broken file and said so
	// (it rereads a changed file on a handshake, at most once a second);
	// each is served the certificate loaded before.
	os.WriteFile(certFile, []byte("not a certificate"), 0o600)
	if ok, detail := pollUntil(10*time.Second, 100*time.Millisecond, func() (bool, string) {
		s, _, err := served()
		if err != nil || s != 2 {
			return false, "served " + itoa(s) + " " + errText(err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "node.log"))
		return strings.Contains(string(b), "the TLS certificate changed but does not load"), "no word of the broken file in the log"
	}); !ok {
		t.Fatalf("after a broken certificate: %s", detail)
	}
	if s, _, err := served(); err != nil || s != 2 {
		t.Fatalf("after a broken certificate: serial %d, %v", s, err)
	}
	writeCert(t, certFile, keyFile, 3)
	cmd.Process.Signal(syscall.SIGHUP)
	if ok, detail := pollUntil(10*time.Second, 100*time.Millisecond, func() (bool, string) {
		s, _, err := served()
		return err == nil && s == 3, itoa(s) + " " + errText(err)
	}); !ok {
		t.Fatalf("after SIGHUP: %s", detail)
	}

	// --require-secure with the HTTP API on every address and no JWT.
	out, err := exec.CommandContext(ctx, binPath, "--data-dir", filepath.Join(dir, "open"), "--http-addr", "0.0.0.0:0",
		"--grpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--require-secure").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--require-secure: refusing to start") || !strings.Contains(string(out), "no authentication") {
		t.Fatalf("--require-secure on an open node: %v\n%s", err, out)
	}
}

func itoa(n int64) string { return big.NewInt(n).String() }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

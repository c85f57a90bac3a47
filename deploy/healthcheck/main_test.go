package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTarget(t *testing.T) {
	for _, c := range []struct{ arg, env, want string }{
		{"", "", "127.0.0.1:6632"},
		{"", "0.0.0.0:6632", "127.0.0.1:6632"},
		{"", "[::]:7000", "127.0.0.1:7000"},
		{"", ":7001", "127.0.0.1:7001"},
		{"", "127.0.0.1:16632", "127.0.0.1:16632"},
		{"127.0.0.1:9", "0.0.0.0:6632", "127.0.0.1:9"},
		{"queen-1:6632", "", "queen-1:6632"},
	} {
		if got := target(c.arg, c.env); got != c.want {
			t.Errorf("target(%q, %q) = %q, want %q", c.arg, c.env, got, c.want)
		}
	}
}

func server(t *testing.T, code int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
		w.Write([]byte(`{"status":"x"}`))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://") // httptest listens on 127.0.0.1
}

func TestCheck(t *testing.T) {
	if err := check(server(t, http.StatusOK), nil, time.Second); err != nil {
		t.Fatalf("200: %v", err)
	}
	err := check(server(t, http.StatusServiceUnavailable), nil, time.Second)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503: got %v, want an error naming 503", err)
	}
	if err := check(server(t, http.StatusNotFound), nil, time.Second); err == nil {
		t.Fatal("404: want an error")
	}
}

func TestCheckRefusedAndSilent(t *testing.T) {
	// A port nothing listens on: take one and close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := check(addr, nil, time.Second); err == nil {
		t.Fatal("closed port: want an error")
	}

	// A listener that accepts and never answers: the deadline must fire.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(2 * time.Second)
		}
	}()
	start := time.Now()
	if err := check(ln.Addr().String(), nil, 200*time.Millisecond); err == nil {
		t.Fatal("silent server: want an error")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("silent server: took %v, want the 200ms deadline", d)
	}
}

// tlsServer is an HTTPS /health answering code, and the path of a PEM file
// holding its certificate.
func tlsServer(t *testing.T, code int) (addr, certFile string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	certFile = filepath.Join(t.TempDir(), "tls.crt")
	der := srv.TLS.Certificates[0].Certificate[0]
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(srv.URL, "https://"), certFile
}

func TestCheckTLS(t *testing.T) {
	addr, certFile := tlsServer(t, http.StatusOK)
	cfg, err := pinned(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(addr, cfg, time.Second); err != nil {
		t.Fatalf("HTTPS 200 with its own certificate pinned: %v", err)
	}
	if err := check(addr, nil, time.Second); err == nil {
		t.Fatal("plain HTTP to an HTTPS port: want an error")
	}

	// A certificate with another key: the pin does not match.
	otherCert := filepath.Join(t.TempDir(), "other.crt")
	if err := os.WriteFile(otherCert, selfSigned(t), 0o600); err != nil {
		t.Fatal(err)
	}
	otherCfg, err := pinned(otherCert)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(addr, otherCfg, time.Second); err == nil || !strings.Contains(err.Error(), "not the one") {
		t.Fatalf("a server with another certificate: got %v, want the pin to refuse it", err)
	}

	addr503, cert503 := tlsServer(t, http.StatusServiceUnavailable)
	cfg503, err := pinned(cert503)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(addr503, cfg503, time.Second); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("HTTPS 503: got %v, want an error naming 503", err)
	}

	// TLS to a plain HTTP server fails.
	if err := check(server(t, http.StatusOK), cfg, time.Second); err == nil {
		t.Fatal("TLS to a plain HTTP port: want an error")
	}

	if _, err := pinned(filepath.Join(t.TempDir(), "missing.crt")); err == nil {
		t.Fatal("a missing certificate file: want an error")
	}
	empty := filepath.Join(t.TempDir(), "empty.crt")
	os.WriteFile(empty, []byte("not PEM\n"), 0o600)
	if _, err := pinned(empty); err == nil {
		t.Fatal("a file without a certificate: want an error")
	}
}

// selfSigned is a new self-signed certificate (PEM) with a key of its own.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Command queen-healthcheck is the container image's HEALTHCHECK. The final
// image is distroless (no shell, no curl, no wget), so Docker's health check
// runs this small static binary instead: it sends GET /health to the node in
// the same container and exits 0 on 200, 1 on anything else (503 while the
// node has no leader, a refused connection, a timeout, a TLS failure).
//
// It is independent of the queen-node binary on purpose: it only speaks
// HTTP/1.0 over a plain TCP or TLS connection, so it stays small and works
// whatever the node's version. Kubernetes ignores the image's HEALTHCHECK and
// probes /health itself (deploy/k8s).
//
// Usage: queen-healthcheck [host:port]
//
// The address defaults to $QUEEN_HTTP_ADDR, then 127.0.0.1:6632. An
// unspecified host (0.0.0.0, ::, empty) becomes 127.0.0.1.
//
// When $QUEEN_TLS_CERT is set (the node serves HTTPS with that certificate
// file), the check speaks TLS and accepts the server only if it presents
// that certificate's public key: the file is the pin, so neither a CA nor a
// host name is needed (the address is usually 127.0.0.1, which a public
// certificate does not name). /health needs no token, JWT or not.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

const timeout = 3 * time.Second

func main() {
	addr := ""
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	var tlsCfg *tls.Config
	if certFile := os.Getenv("QUEEN_TLS_CERT"); certFile != "" {
		var err error
		if tlsCfg, err = pinned(certFile); err != nil {
			fmt.Fprintln(os.Stderr, "unhealthy:", err)
			os.Exit(1)
		}
	}
	if err := check(target(addr, os.Getenv("QUEEN_HTTP_ADDR")), tlsCfg, timeout); err != nil {
		fmt.Fprintln(os.Stderr, "unhealthy:", err)
		os.Exit(1)
	}
	fmt.Println("healthy")
}

// target is the address to probe: arg, else env, else 127.0.0.1:6632, with
// an unspecified host replaced by the loopback address.
func target(arg, env string) string {
	addr := arg
	if addr == "" {
		addr = env
	}
	if addr == "" {
		return "127.0.0.1:6632"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr // let the dial report it
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// pinned is a TLS client configuration that accepts only a server showing
// the public key of the first certificate in certFile.
func pinned(certFile string) (*tls.Config, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("QUEEN_TLS_CERT: %w", err)
	}
	var want *x509.Certificate
	for want == nil {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return nil, fmt.Errorf("QUEEN_TLS_CERT %s: no PEM certificate", certFile)
		}
		if block.Type == "CERTIFICATE" {
			if want, err = x509.ParseCertificate(block.Bytes); err != nil {
				return nil, fmt.Errorf("QUEEN_TLS_CERT %s: %w", certFile, err)
			}
		}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain and the name are not checked; the pin below is.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].RawSubjectPublicKeyInfo, want.RawSubjectPublicKeyInfo) {
				return fmt.Errorf("the server's certificate is not the one in %s", certFile)
			}
			return nil
		},
	}, nil
}

// check sends GET /health to addr, over TLS when tlsCfg is not nil, and
// returns nil only for a 200.
func check(addr string, tlsCfg *tls.Config, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if tlsCfg != nil {
		tc := tls.Client(conn, tlsCfg)
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	host, _, _ := net.SplitHostPort(addr)
	if _, err := fmt.Fprintf(conn, "GET /health HTTP/1.0\r\nHost: %s\r\nUser-Agent: queen-healthcheck\r\nConnection: close\r\n\r\n", host); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the status line: %w", err)
	}
	// "HTTP/1.1 200 OK"
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
		return fmt.Errorf("not an HTTP response: %q", strings.TrimSpace(line))
	}
	if f[1] != "200" {
		return errors.New("GET /health: " + strings.Join(f[1:], " "))
	}
	return nil
}

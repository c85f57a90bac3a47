// Command queen-healthcheck is the container image's HEALTHCHECK. The final
// image is distroless (no shell, no curl, no wget), so Docker's health check
// runs this small static binary instead: it sends GET /health to the node in
// the same container and exits 0 on 200, 1 on anything else (503 while the
// node has no leader, a refused connection, a timeout).
//
// It is independent of the queen-node binary on purpose: it only speaks
// HTTP/1.0 over a plain TCP connection, so it stays tiny and works whatever
// the node's version. Kubernetes ignores the image's HEALTHCHECK and probes
// /health itself (deploy/k8s).
//
// Usage: queen-healthcheck [host:port]
//
// The address defaults to $QUEEN_HTTP_ADDR, then 127.0.0.1:6632. An
// unspecified host (0.0.0.0, ::, empty) becomes 127.0.0.1.
package main

import (
	"bufio"
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
	if err := check(target(addr, os.Getenv("QUEEN_HTTP_ADDR")), timeout); err != nil {
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

// check sends GET /health to addr and returns nil only for a 200.
func check(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
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

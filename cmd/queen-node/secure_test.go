package main

import (
	"strings"
	"testing"
)

func TestExposureWarnsBeyondLoopback(t *testing.T) {
	c := &config{HTTPAddr: "127.0.0.1:6632", GRPCAddr: "127.0.0.1:6633", RaftAddr: "[::1]:6634", GossipAddr: "localhost:6635"}
	if w := exposure(c); w != nil {
		t.Fatalf("loopback only: %v", w)
	}
	c.HTTPAddr = "0.0.0.0:6632"
	w := strings.Join(exposure(c), "; ")
	if !strings.Contains(w, "no authentication") || !strings.Contains(w, "without TLS") {
		t.Fatalf("open HTTP: %s", w)
	}
	c.JWT.Enabled, c.TLSCert = true, "cert.pem"
	if w := exposure(c); w != nil {
		t.Fatalf("JWT and TLS on HTTP, the rest on loopback: %v", w)
	}
	c.RaftAddr = "10.0.0.5:6634"
	if w := strings.Join(exposure(c), "; "); !strings.Contains(w, "Raft (no --peer-tls-*) in clear text") {
		t.Fatalf("Raft beyond loopback: %s", w)
	}
	c.RaftAddr, c.GossipAddr = "[::1]:6634", "10.0.0.5:6635"
	if w := strings.Join(exposure(c), "; "); !strings.Contains(w, "gossip (no --gossip-keyring)") {
		t.Fatalf("gossip beyond loopback: %s", w)
	}
	c.GossipKeyring = "keys"
	if w := exposure(c); w != nil {
		t.Fatalf("gossip with a keyring: %v", w)
	}
	c.GRPCAddr = "10.0.0.5:6633"
	if w := strings.Join(exposure(c), "; "); !strings.Contains(w, "forwarding service on 10.0.0.5:6633 takes any caller") || strings.Contains(w, "clear text") {
		t.Fatalf("gRPC beyond loopback with --tls-cert only: %s", w)
	}
	c.TLSCert = ""
	if w := strings.Join(exposure(c), "; "); !strings.Contains(w, "gRPC (no --peer-tls-* or --tls-cert) in clear text") {
		t.Fatalf("gRPC beyond loopback in clear text: %s", w)
	}
	c.PeerTLSCert = "peer.pem"
	if w := strings.Join(exposure(c), "; "); strings.Contains(w, "gRPC") || strings.Contains(w, "forwarding") {
		t.Fatalf("gRPC with peer TLS: %s", w)
	}
}

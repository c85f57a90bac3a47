package main

import (
	"fmt"
	"net"
	"strings"
)

// exposure lists what makes this node unsafe beyond loopback: a listener
// on a non-loopback address without JWT (anyone who reaches it may do
// anything), or the HTTP API there without TLS (tokens and payloads in
// clear text), or a link between nodes in clear text (Raft and gRPC
// without --peer-tls-*, gossip without --gossip-keyring).
func exposure(c *config) []string {
	var open []string
	for _, l := range []struct{ name, addr string }{{"http", c.HTTPAddr}, {"grpc", c.GRPCAddr}, {"raft", c.RaftAddr}, {"gossip", c.GossipAddr}, {"kafka", c.Kafka.Addr}} {
		if l.addr == "" {
			continue // a listener that is off
		}
		if !loopback(l.addr) {
			open = append(open, l.name+"="+l.addr)
		}
	}
	if len(open) == 0 {
		return nil
	}
	where := strings.Join(open, ", ")
	var w []string
	if !c.JWT.Enabled {
		w = append(w, "no authentication (JWT off) on "+where)
	}
	if !loopback(c.HTTPAddr) && c.TLSCert == "" {
		w = append(w, "the HTTP API serves "+c.HTTPAddr+" without TLS")
	}
	if k := c.Kafka; k.Addr != "" && !loopback(k.Addr) {
		if k.TLSCert == "" && c.TLSCert == "" {
			w = append(w, "the Kafka listener serves "+k.Addr+" without TLS")
		}
		if c.JWT.Enabled && k.Trusted {
			w = append(w, "the Kafka listener on "+k.Addr+" lets clients in without SASL (--kafka-trusted-network)")
		}
	}
	var clear []string
	if !loopback(c.GRPCAddr) && c.PeerTLSCert == "" {
		if c.TLSCert == "" {
			clear = append(clear, "gRPC (no --peer-tls-* or --tls-cert)")
		} else {
			w = append(w, "the forwarding service on "+c.GRPCAddr+" takes any caller (no --peer-tls-*)")
		}
	}
	if !loopback(c.RaftAddr) && c.PeerTLSCert == "" {
		clear = append(clear, "Raft (no --peer-tls-*)")
	}
	if !loopback(c.GossipAddr) && c.GossipKeyring == "" {
		clear = append(clear, "gossip (no --gossip-keyring)")
	}
	if len(clear) > 0 {
		w = append(w, strings.Join(clear, ", ")+" in clear text")
	}
	return w
}

// loopback reports whether a listen address is reachable from this host
// only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func insecureError(w []string) error {
	return fmt.Errorf("--require-secure: refusing to start: %s", strings.Join(w, "; "))
}

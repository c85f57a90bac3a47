package raftlog

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer is raft's TCP stream layer with one difference: the address
// it advertises may be a host name (a Kubernetes pod's stable DNS name),
// kept as a string. The stock TCP transport insists on an IP, which a pod
// loses on every restart; a name does not change, so the Raft configuration
// stays valid.
//
// With mutual TLS (Config.ServerTLS and ClientTLS) the listener takes
// only TLS connections from nodes whose certificate the cluster CA signed,
// and every dial presents this node's certificate.
type streamLayer struct {
	net.Listener
	advertise net.Addr
	clientTLS *tls.Config // nil = plain TCP
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.clientTLS != nil {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), s.clientTLS)
		if err != nil {
			return nil, err
		}
		return conn, nil
	}
	return net.DialTimeout("tcp", string(address), timeout)
}

// hostAddr is a host:port that may hold a host name.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }

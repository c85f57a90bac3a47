package nodeproc

import (
	"fmt"
	"io"
	"net"
	"strconv"
)

// Addrs are a node's four listen addresses, host:port each. Other nodes
// and clients reach the node at the same addresses (--advertise-addr is not
// used).
type Addrs struct {
	HTTP, GRPC, Raft, Gossip string
}

// AddrsAt is host with the ports first (HTTP), first+1 (gRPC), first+2
// (Raft) and first+3 (gossip): AddrsAt(ip, 6632) are queen-node's default
// ports on ip.
func AddrsAt(host string, first int) Addrs {
	at := func(i int) string { return net.JoinHostPort(host, strconv.Itoa(first+i)) }
	return Addrs{HTTP: at(0), GRPC: at(1), Raft: at(2), Gossip: at(3)}
}

func (a Addrs) list() []string { return []string{a.HTTP, a.GRPC, a.Raft, a.Gossip} }

// FreeAddrs picks the addresses of n nodes on 127.0.0.1: 4n distinct ports
// that are free on TCP and on UDP (memberlist uses both on the gossip
// port), none of them in avoid. Every port is bound until all are chosen,
// then released: the node's own bind comes a moment later, and a start that
// lost that race (another program took the port) is retried on new ports
// by Node.Start and StartCluster.
func FreeAddrs(n int, avoid map[string]bool) ([]Addrs, error) {
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	pick := func() (string, error) {
		for try := 0; try < 50; try++ {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return "", fmt.Errorf("nodeproc: free port: %w", err)
			}
			held = append(held, l) // held either way, so it is not drawn again
			addr := l.Addr().String()
			if avoid[addr] {
				continue
			}
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				continue
			}
			held = append(held, pc)
			return addr, nil
		}
		return "", fmt.Errorf("nodeproc: no free loopback port (TCP and UDP) after 50 tries")
	}
	out := make([]Addrs, n)
	for i := range out {
		var a [4]string
		for j := range a {
			p, err := pick()
			if err != nil {
				return nil, err
			}
			a[j] = p
		}
		out[i] = Addrs{HTTP: a[0], GRPC: a[1], Raft: a[2], Gossip: a[3]}
	}
	return out, nil
}

package nodeproc

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Addrs are a node's listen addresses, host:port each. Other nodes and
// clients reach the node at the same addresses (--advertise-addr is not
// used). Kafka is passed as --kafka-addr only when the Spec asks for the
// Kafka listener.
type Addrs struct {
	HTTP, GRPC, Raft, Gossip, Kafka string
}

// AddrsAt is host with the ports first (HTTP), first+1 (gRPC), first+2
// (Raft), first+3 (gossip) and first+4 (Kafka): AddrsAt(ip, 6632) are
// queen-node's default ports on ip.
func AddrsAt(host string, first int) Addrs {
	at := func(i int) string { return net.JoinHostPort(host, strconv.Itoa(first+i)) }
	return Addrs{HTTP: at(0), GRPC: at(1), Raft: at(2), Gossip: at(3), Kafka: at(4)}
}

func (a Addrs) list() []string { return []string{a.HTTP, a.GRPC, a.Raft, a.Gossip, a.Kafka} }

// lowestPort is the bottom of the range FreeAddrs draws from; the top is
// the bottom of the kernel's ephemeral range.
const lowestPort = 10000

// FreeAddrs picks the addresses of n nodes on 127.0.0.1: 5n distinct ports
// that are free on TCP and on UDP (memberlist uses both on the gossip
// port), none of them in avoid. The ports lie below the kernel's ephemeral
// range (net.ipv4.ip_local_port_range), so no outgoing connection is ever
// given one as its local port: a node killed and restarted finds its ports
// still free (a port drawn from the ephemeral range was once taken by a
// client connection in the gap, and the restart failed). Every port is
// bound until all are chosen, then released: the node's own bind comes a
// moment later, and a start that lost that race (another program took the
// port) is retried on new ports by Node.Start and StartCluster.
func FreeAddrs(n int, avoid map[string]bool) ([]Addrs, error) {
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	top := ephemeralLow()
	pick := func() (string, error) {
		for try := 0; try < 200; try++ {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lowestPort+rand.IntN(top-lowestPort)))
			if avoid[addr] {
				continue
			}
			l, err := net.Listen("tcp", addr)
			if err != nil {
				continue
			}
			held = append(held, l) // held either way, so it is not drawn again
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				continue
			}
			held = append(held, pc)
			return addr, nil
		}
		return "", fmt.Errorf("nodeproc: no free loopback port (TCP and UDP) in [%d, %d) after 200 tries", lowestPort, top)
	}
	out := make([]Addrs, n)
	for i := range out {
		var a [5]string
		for j := range a {
			p, err := pick()
			if err != nil {
				return nil, err
			}
			a[j] = p
		}
		out[i] = Addrs{HTTP: a[0], GRPC: a[1], Raft: a[2], Gossip: a[3], Kafka: a[4]}
	}
	return out, nil
}

// ephemeralLow is the lowest port the kernel gives outgoing connections
// (32768 where it cannot be read, Linux's default).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	if low <= lowestPort+1000 {
		low = lowestPort + 1000
	}
	return low
}

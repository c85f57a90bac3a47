// Package netns gives each node of a fault test its own network namespace on
// a private bridge, so that partitions can cut every kind of traffic between
// nodes (Raft, gossip over TCP and UDP, forwarding) with iptables inside the
// namespaces. It needs root and iproute2 + iptables; Available says whether
// this machine has them.
package netns

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// Net is a private network: a bridge in the root namespace (the test
// harness reaches every node through it) and one namespace per node.
type Net struct {
	id     string
	subnet string // "10.199.N"
	bridge string
	nodes  int
	mu     sync.Mutex
	cut    map[[2]int]bool
	oneWay map[[2]int]bool // {from, to}: to drops what from sends
}

// Available reports whether namespaces can be made here, and if not why.
func Available() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not root"
	}
	for _, bin := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			return false, bin + " not installed"
		}
	}
	name := fmt.Sprintf("qjprobe%d", rand.Intn(1e6))
	if err := run("ip", "netns", "add", name); err != nil {
		return false, "ip netns add: " + err.Error()
	}
	defer run("ip", "netns", "del", name)
	if err := run("ip", "netns", "exec", name, "iptables", "-L", "INPUT", "-n"); err != nil {
		return false, "iptables in a namespace: " + err.Error()
	}
	return true, ""
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// New creates the bridge and n namespaces with addresses subnet.1..n. The
// subnet and the names are picked so as not to collide with another run's
// on the same machine (they would route each other's traffic astray).
func New(n int) (*Net, error) {
	id, third, err := pickFree()
	if err != nil {
		return nil, err
	}
	nt := &Net{id: id, subnet: fmt.Sprintf("10.199.%d", third), bridge: "qjb" + id, nodes: n, cut: map[[2]int]bool{}, oneWay: map[[2]int]bool{}}
	steps := [][]string{
		{"ip", "link", "add", nt.bridge, "type", "bridge"},
		{"ip", "addr", "add", nt.subnet + ".254/24", "dev", nt.bridge},
		{"ip", "link", "set", nt.bridge, "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			nt.Close()
			return nil, err
		}
	}
	for i := 1; i <= n; i++ {
		if err := nt.addNode(i); err != nil {
			nt.Close()
			return nil, err
		}
	}
	return nt, nil
}

// pickFree chooses an id and a 10.199.x.0/24 subnet that no interface and
// no namespace of this machine uses yet.
func pickFree() (string, int, error) {
	addrs, err := exec.Command("ip", "-o", "addr", "show").Output()
	if err != nil {
		return "", 0, fmt.Errorf("ip addr show: %w", err)
	}
	names, _ := exec.Command("ip", "netns", "list").Output()
	for try := 0; try < 100; try++ {
		id := fmt.Sprintf("%04x", rand.Intn(0xffff))
		third := 100 + rand.Intn(150)
		if strings.Contains(string(addrs), fmt.Sprintf(" 10.199.%d.", third)) ||
			strings.Contains(string(addrs), "qjb"+id) || strings.Contains(string(names), "qj"+id+"-") {
			continue
		}
		return id, third, nil
	}
	return "", 0, fmt.Errorf("no free subnet for the test network")
}

// NS is node i's namespace name (1-based).
func (nt *Net) NS(i int) string { return fmt.Sprintf("qj%s-%d", nt.id, i) }

// IP is node i's address.
func (nt *Net) IP(i int) string { return fmt.Sprintf("%s.%d", nt.subnet, i) }

// HostIP is the harness's address on the bridge.
func (nt *Net) HostIP() string { return nt.subnet + ".254" }

func (nt *Net) hostVeth(i int) string { return fmt.Sprintf("qjh%s%d", nt.id, i) }

func (nt *Net) addNode(i int) error {
	ns := nt.NS(i)
	for _, s := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", nt.hostVeth(i), "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", nt.hostVeth(i), "master", nt.bridge, "up"},
		{"ip", "netns", "exec", ns, "ip", "addr", "add", nt.IP(i) + "/24", "dev", "eth0"},
		{"ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up"},
		{"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"},
	} {
		if err := run(s...); err != nil {
			return err
		}
	}
	return nil
}

// AddNode grows the network by one namespace and returns its index.
func (nt *Net) AddNode() (int, error) {
	nt.mu.Lock()
	nt.nodes++
	i := nt.nodes
	nt.mu.Unlock()
	return i, nt.addNode(i)
}

// Command runs a program inside node i's namespace. `ip netns exec` execs
// the program in place, so the command's PID is the program's.
func (nt *Net) Command(i int, bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", nt.NS(i), bin}, args...)...)
}

// Partition cuts traffic between every pair of nodes that are not in the
// same group. Nodes in no group are cut from everyone. The harness (the
// bridge address) always reaches every node.
func (nt *Net) Partition(groups [][]int) error {
	group := map[int]int{}
	for g, members := range groups {
		for _, m := range members {
			group[m] = g + 1
		}
	}
	if err := nt.Heal(); err != nil {
		return err
	}
	nt.mu.Lock()
	defer nt.mu.Unlock()
	for a := 1; a <= nt.nodes; a++ {
		for b := 1; b <= nt.nodes; b++ {
			if a == b || (group[a] != 0 && group[a] == group[b]) {
				continue
			}
			if err := nt.drop(a, b); err != nil {
				return err
			}
			nt.cut[[2]int{a, b}] = true
		}
	}
	return nil
}

// Cut drops traffic from a to b and from b to a.
func (nt *Net) Cut(a, b int) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	for _, p := range [][2]int{{a, b}, {b, a}} {
		if nt.cut[p] {
			continue
		}
		if err := nt.drop(p[0], p[1]); err != nil {
			return err
		}
		nt.cut[p] = true
	}
	return nil
}

// OneWay makes node to drop every packet that comes from node from, while
// to's own packets still reach from: a link that works one way only (TCP
// over it stalls, but not before the data that opened it arrived).
func (nt *Net) OneWay(from, to int) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if nt.oneWay[[2]int{from, to}] {
		return nil
	}
	if err := run("ip", "netns", "exec", nt.NS(to), "iptables", "-A", "INPUT", "-s", nt.IP(from), "-j", "DROP"); err != nil {
		return err
	}
	nt.oneWay[[2]int{from, to}] = true
	return nil
}

// drop makes node a drop every packet to or from node b (in a's namespace).
func (nt *Net) drop(a, b int) error {
	ns := nt.NS(a)
	if err := run("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-s", nt.IP(b), "-j", "DROP"); err != nil {
		return err
	}
	return run("ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-d", nt.IP(b), "-j", "DROP")
}

// Heal removes every cut.
func (nt *Net) Heal() error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	var first error
	for i := 1; i <= nt.nodes; i++ {
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			if err := run("ip", "netns", "exec", nt.NS(i), "iptables", "-F", chain); err != nil && first == nil {
				first = err
			}
		}
	}
	nt.cut = map[[2]int]bool{}
	nt.oneWay = map[[2]int]bool{}
	return first
}

// Close deletes the namespaces and the bridge.
func (nt *Net) Close() {
	for i := 1; i <= nt.nodes; i++ {
		run("ip", "netns", "del", nt.NS(i))
		run("ip", "link", "del", nt.hostVeth(i))
	}
	run("ip", "link", "del", nt.bridge)
}

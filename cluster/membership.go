package cluster

import (
	"encoding/json"
	"fmt"
	"log"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Membership is discovery only: memberlist tells the nodes about each other
// (their addresses and whether they look alive). The Raft configuration, not
// gossip, decides who votes (STYLE.md §6).

// meta is what a node tells the others about itself in gossip.
type meta struct {
	ID     string `json:"id"`
	Raft   string `json:"raft"`
	HTTP   string `json:"http"`
	GRPC   string `json:"grpc"`
	Kafka  string `json:"kafka,omitempty"` // the Kafka listener's advertised address
	Expect int    `json:"expect"`
	// Boot: this node has Raft state (it bootstrapped or was added).
	Boot bool `json:"boot"`
	// Check and CheckHash: the index of this node's last state check and
	// the first digits of its digest (statecheck.go).
	Check     uint64 `json:"check,omitempty"`
	CheckHash string `json:"checkHash,omitempty"`
	// CheckedGroups: bit g is set once Raft group g > 0 here ran a state
	// check since the node started (its digests are not compared over
	// gossip, which has room for group 0's only; the check's record
	// checksums find a flipped bit in any group).
	CheckedGroups uint64 `json:"checkedGroups,omitempty"`
	// Resync: this node found its files damaged and is being rebuilt from
	// the leader; it must not be a voter until it has caught up (resync.go).
	Resync bool `json:"resync,omitempty"`
	// ResyncGroups: the same for Raft groups other than 0, one bit per
	// group (bit g for group g; --raft-groups is at most 64).
	ResyncGroups uint64 `json:"resyncGroups,omitempty"`
	// Stopping: this node is draining for a graceful stop; no balancer
	// hands it a group's leadership (it would lose it again at once).
	Stopping bool `json:"stopping,omitempty"`
	// Groups: how many Raft groups the node runs (--raft-groups); 0 = 1.
	// Nodes that run another number cannot share groups (their Raft ports
	// speak another wire), so reconcile never adds one.
	Groups int `json:"groups,omitempty"`
}

// Member is a node as gossip sees it.
type Member struct {
	meta
	Alive bool
}

type members struct {
	keyring *memberlist.Keyring // nil: gossip in clear text
	ml      *memberlist.Memberlist
	mu      sync.Mutex
	self    meta
	// known is our own copy of every member, kept from memberlist's event
	// callbacks: the *Node values Members() returns are mutated by
	// memberlist's goroutines without a lock we could take.
	known map[string]Member
	// changed is signalled (non-blocking) on every join, leave or update.
	changed chan struct{}
	// groupChecks: each node's last state check of each group > 0, and
	// what to run when one arrives (groupchecks.go)
	groupChecks  map[string]map[int]groupCheck
	onGroupCheck map[int]func()
}

func (m *members) NodeMeta(limit int) []byte {
	m.mu.Lock()
	b, _ := json.Marshal(m.self)
	m.mu.Unlock()
	if len(b) > limit {
		return nil
	}
	return b
}
func (m *members) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (m *members) LocalState(join bool) []byte                { return nil }
func (m *members) MergeRemoteState(buf []byte, join bool)     {}
func (m *members) NotifyJoin(n *memberlist.Node) {
	m.record(n, true)
	m.sendOwnGroupChecks(n)
}
func (m *members) NotifyLeave(n *memberlist.Node)  { m.record(n, false) }
func (m *members) NotifyUpdate(n *memberlist.Node) { m.record(n, true) }

// record copies what a member says about itself; memberlist calls this with
// its own lock held, so the node's fields are stable here.
func (m *members) record(n *memberlist.Node, alive bool) {
	var md meta
	if json.Unmarshal(n.Meta, &md) == nil && md.ID != "" {
		m.mu.Lock()
		m.known[md.ID] = Member{meta: md, Alive: alive}
		m.mu.Unlock()
	}
	m.signal()
}

func (m *members) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// startMembership creates the memberlist on bindAddr, advertising advAddr.
func startMembership(self meta, bindAddr, advAddr string, local bool, keys [][]byte, logger *log.Logger) (*members, error) {
	m := &members{self: self, changed: make(chan struct{}, 1), known: map[string]Member{}}
	conf := memberlist.DefaultLANConfig()
	if local {
		conf = memberlist.DefaultLocalConfig()
	}
	conf.Name = self.ID
	host, port, err := splitHostPort(bindAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip address %q: %w", bindAddr, err)
	}
	conf.BindAddr, conf.BindPort = host, port
	ahost, aport, err := splitHostPort(advAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip advertise address %q: %w", advAddr, err)
	}
	// A pod's own DNS name may take a moment to resolve after it starts.
	ip, err := resolveIP(ahost)
	for wait := time.Now().Add(time.Minute); err != nil && time.Now().Before(wait); {
		time.Sleep(time.Second)
		ip, err = resolveIP(ahost)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip advertise address %q: %w", advAddr, err)
	}
	conf.AdvertiseAddr, conf.AdvertisePort = ip, aport
	conf.Delegate = m
	conf.Events = m
	// A node that crashed and comes back under the same name on a new
	// address (a rescheduled pod) may take its name back after this long,
	// instead of being refused as a conflicting address.
	conf.DeadNodeReclaimTime = 10 * time.Second
	conf.Logger = logger
	if len(keys) > 0 {
		// Gossip encrypted with the keyring (memberlist's AES-GCM): the
		// first key encrypts, every key decrypts, so a new key is added
		// everywhere first and made primary after (README, rotation).
		kr, err := memberlist.NewKeyring(keys, keys[0])
		if err != nil {
			return nil, fmt.Errorf("cluster: gossip keyring: %w", err)
		}
		conf.Keyring, m.keyring = kr, kr
		conf.GossipVerifyIncoming, conf.GossipVerifyOutgoing = true, true
	}
	ml, err := memberlist.Create(conf)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip on %s: %w", bindAddr, err)
	}
	m.ml = ml
	return m, nil
}

// setBoot records in gossip that this node has Raft state.
func (m *members) setBoot() {
	m.mu.Lock()
	changed := !m.self.Boot
	m.self.Boot = true
	m.mu.Unlock()
	if changed {
		_ = m.ml.UpdateNode(time.Second)
	}
}

// setCheck publishes this node's last state check.
func (m *members) setCheck(index uint64, digest string) {
	m.mu.Lock()
	m.self.Check, m.self.CheckHash = index, digest
	m.mu.Unlock()
	_ = m.ml.UpdateNode(time.Second)
}

// setStopping publishes that this node is draining to stop.
func (m *members) setStopping() {
	m.mu.Lock()
	changed := !m.self.Stopping
	m.self.Stopping = true
	m.mu.Unlock()
	if changed {
		_ = m.ml.UpdateNode(time.Second)
	}
}

// checkedIn reports whether the node's group g ran a state check since it
// started.
func (m meta) checkedIn(g int) bool {
	if g == 0 {
		return m.Check != 0
	}
	return m.CheckedGroups&(1<<uint(g)) != 0
}

// setChecked publishes that group g > 0 ran a state check.
func (m *members) setChecked(g int) {
	m.mu.Lock()
	changed := !m.self.checkedIn(g)
	m.self.CheckedGroups |= 1 << uint(g)
	m.mu.Unlock()
	if changed {
		_ = m.ml.UpdateNode(time.Second)
	}
}

// resyncIn reports whether the node says its Raft group g is being
// rebuilt from the group's leader.
func (m meta) resyncIn(g int) bool {
	if g == 0 {
		return m.Resync
	}
	return m.ResyncGroups&(1<<uint(g)) != 0
}

// withResync is m saying whether group g is being rebuilt.
func (m meta) withResync(g int, on bool) meta {
	switch {
	case g == 0:
		m.Resync = on
	case on:
		m.ResyncGroups |= 1 << uint(g)
	default:
		m.ResyncGroups &^= 1 << uint(g)
	}
	return m
}

// setResync publishes whether this node's group g is resyncing.
func (m *members) setResync(g int, on bool) {
	m.mu.Lock()
	changed := m.self.resyncIn(g) != on
	m.self = m.self.withResync(g, on)
	m.mu.Unlock()
	if changed {
		_ = m.ml.UpdateNode(time.Second)
	}
}

// list returns every member gossip has told us of, with its liveness, in
// id order.
func (m *members) list() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.known))
	for _, mb := range m.known {
		out = append(out, mb)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// byID finds a member by node id.
func (m *members) byID(id string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb, ok := m.known[id]
	return mb, ok
}

func (m *members) shutdown() {
	_ = m.ml.Leave(time.Second)
	_ = m.ml.Shutdown()
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	return h, port, nil
}

// resolveIP turns a host name into the IP gossip must advertise.
func resolveIP(host string) (string, error) {
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			return "", fmt.Errorf("%s is not an address other nodes can reach; set --advertise-addr", host)
		}
		return host, nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("cannot resolve %q: %v", host, err)
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip.String(), nil
		}
	}
	return ips[0].String(), nil
}

// groupsMeta is how gossip states a node's --raft-groups: 0 for one (what
// a node written before groups says by saying nothing).
func groupsMeta(n int) int {
	if n <= 1 {
		return 0
	}
	return n
}

package cluster

import (
	"encoding/json"

	"github.com/hashicorp/memberlist"
)

// State-check digests of Raft groups other than 0 (statecheck.go). Group
// 0's last check rides in each node's gossip metadata, which memberlist
// caps at 512 bytes: no room for 64 groups'. A group g > 0 instead sends
// each check's digest to every other member as a memberlist user message
// (over the same encrypted gossip), and every node keeps the last one it
// heard per node and group; compareChecks reads them as it reads group 0's
// metadata. A message lost leaves a node with fewer digests to compare,
// never a wrong verdict: it judges only when a majority of the voters'
// digests for one index agree. A node that joins or rejoins gossip is sent
// every member's last checks, and a node whose digest differs is sent them
// again (sendOwnGroupChecks), so that it can find its own damage.

// checkMsgKind opens a group check message (the only user message).
const checkMsgKind = 'c'

// groupCheck is one node's last state check of one group.
type groupCheck struct {
	ID     string `json:"id"`
	Group  int    `json:"g"`
	Index  uint64 `json:"i"`
	Digest string `json:"h"`
}

// publishGroupCheck records this node's check of group g and sends it to
// every other live member.
func (m *members) publishGroupCheck(g int, index uint64, digest string) {
	c := groupCheck{ID: m.self.ID, Group: g, Index: index, Digest: digest}
	m.noteGroupCheck(c)
	msg := groupCheckMsg(c)
	self := m.ml.LocalNode().Name
	for _, node := range m.ml.Members() {
		if node.Name != self {
			go func(n *memberlist.Node) { _ = m.ml.SendReliable(n, msg) }(node)
		}
	}
}

func groupCheckMsg(c groupCheck) []byte {
	b, _ := json.Marshal(c)
	return append([]byte{checkMsgKind}, b...)
}

// sendOwnGroupChecks sends this node's last check of every group > 0 to
// member n again. It runs when n joins or rejoins gossip, and when this node
// finds n's digest differing from the majority's: a replica that restarted
// runs its first check at once, and the others' checks of that index may
// have been sent while gossip still had it down. Without them it could not
// see that its own digest is the one that differs, and would not be rebuilt
// until the group's next check.
func (m *members) sendOwnGroupChecks(n *memberlist.Node) {
	m.mu.Lock()
	var msgs [][]byte
	for _, c := range m.groupChecks[m.self.ID] {
		msgs = append(msgs, groupCheckMsg(c))
	}
	m.mu.Unlock()
	if len(msgs) == 0 || n.Name == m.self.ID {
		return
	}
	go func() {
		for _, msg := range msgs {
			_ = m.ml.SendReliable(n, msg)
		}
	}()
}

// resendGroupChecksTo is sendOwnGroupChecks to the live member named id.
func (m *members) resendGroupChecksTo(id string) {
	if m.ml == nil {
		return
	}
	for _, node := range m.ml.Members() {
		if node.Name == id {
			m.sendOwnGroupChecks(node)
		}
	}
}

// NotifyMsg is memberlist's delivery of a user message.
func (m *members) NotifyMsg(b []byte) {
	if len(b) < 2 || b[0] != checkMsgKind {
		return
	}
	var c groupCheck
	if json.Unmarshal(b[1:], &c) != nil || c.ID == "" || c.Group <= 0 || c.Group >= 64 {
		return
	}
	m.noteGroupCheck(c)
	m.mu.Lock()
	hook := m.onGroupCheck[c.Group]
	m.mu.Unlock()
	if hook != nil {
		hook()
	}
}

func (m *members) noteGroupCheck(c groupCheck) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.groupChecks == nil {
		m.groupChecks = map[string]map[int]groupCheck{}
	}
	if m.groupChecks[c.ID] == nil {
		m.groupChecks[c.ID] = map[int]groupCheck{}
	}
	m.groupChecks[c.ID][c.Group] = c
}

// watchGroupChecks has fn run (on memberlist's goroutine: it must not
// block) when another node's check of group g arrives.
func (m *members) watchGroupChecks(g int, fn func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.onGroupCheck == nil {
		m.onGroupCheck = map[int]func(){}
	}
	m.onGroupCheck[g] = fn
}

// checkOf is member mb's last state check of group g: group 0's from its
// metadata, another's from the messages it sent.
func (m *members) checkOf(mb Member, g int) (index uint64, digest string) {
	if g == 0 {
		return mb.Check, mb.CheckHash
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.groupChecks[mb.ID][g]
	return c.Index, c.Digest
}

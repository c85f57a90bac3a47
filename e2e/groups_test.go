package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/cluster"
	"github.com/queen-node/queen-node/tenant"
)

// groupsHealth is /health's groups array.
type groupsHealth struct {
	Groups []cluster.GroupStatus `json:"groups"`
}

// groupLeaders is every group's leader as node n sees it.
func groupLeaders(t *testing.T, n *node) []string {
	t.Helper()
	r, err := n.send(5*time.Second, http.MethodGet, "/health", nil, nil)
	if err != nil {
		return nil
	}
	var h groupsHealth
	if json.Unmarshal(r.Body, &h) != nil {
		return nil
	}
	out := make([]string, len(h.Groups))
	for i, g := range h.Groups {
		out[i] = g.Leader
	}
	return out
}

// spread reports whether every group has a leader, the nodes agree, and
// no live node leads more than ceil(groups/live) of them.
func spread(t *testing.T, live []*node, groups int) (bool, string) {
	var first []string
	for _, n := range live {
		ls := groupLeaders(t, n)
		if len(ls) != groups {
			return false, fmt.Sprintf("%s shows %v", n.ID(), ls)
		}
		if first == nil {
			first = ls
		} else if strings.Join(ls, ",") != strings.Join(first, ",") {
			return false, fmt.Sprintf("nodes disagree: %v and %v", first, ls)
		}
	}
	count := map[string]int{}
	for _, l := range first {
		if l == "" {
			return false, fmt.Sprintf("a group without a leader: %v", first)
		}
		count[l]++
	}
	most := (groups + len(live) - 1) / len(live)
	for id, c := range count {
		if c > most {
			return false, fmt.Sprintf("%s leads %d of %d groups: %v", id, c, groups, first)
		}
	}
	return true, fmt.Sprint(first)
}

// tenantsInGroups finds a tenant name of each group 1..n-1 (the default
// tenant is group 0's).
func tenantsInGroups(n int) []string {
	names := []string{tenant.Default}
	for g := 1; g < n; g++ {
		for i := 0; ; i++ {
			if name := fmt.Sprintf("team-%d", i); cluster.GroupOf(name, n) == g {
				names = append(names, name)
				break
			}
		}
	}
	return names
}

// Three Raft groups on three nodes (issue 26): the groups' leaders spread
// one per node, each tenant's pushes and exactly-once transactions go to
// its own group through any node, a node killed with SIGKILL leaves every
// group with a leader and every tenant writable, and once it is back the
// leaders spread over the three again.
func TestRaftGroupsSpreadLeadersAndSurviveAKill(t *testing.T) {
	const groups = 3
	c := startGroupsCluster(t, groups, "--default-subscription-mode", "all")
	tenants := tenantsInGroups(groups)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	charge := func(via *node, name string, order int) {
		t.Helper()
		cl, err := queen.New(via.URL(), queen.WithTenant(name), queen.WithLeaderRouting(false))
		must(t, err)
		defer cl.Close()
		id := fmt.Sprintf("order-%d", order)
		if _, err := cl.Queue("orders").Push(ctx, queen.Msg{Data: map[string]any{"tenant": name, "order": order}, TransactionID: id}); err != nil {
			t.Fatalf("%s via %s: push: %v", name, via.ID(), err)
		}
		msgs, err := cl.Queue("orders").Pop(ctx, queen.PopOptions{Batch: 1, Wait: 5 * time.Second})
		if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0].Data), `"`+name+`"`) {
			t.Fatalf("%s via %s: pop: %v %v", name, via.ID(), msgs, err)
		}
		res, err := cl.Transaction().Ack(msgs[0]).Once("charges", id, time.Hour).Commit(ctx)
		if err != nil || !res.Committed {
			t.Fatalf("%s via %s: the exactly-once commit: %+v %v", name, via.ID(), res, err)
		}
	}
	for i, name := range tenants {
		charge(c.nodes[i%len(c.nodes)], name, 1)
	}

	// kill the leader of group 1
	leaders := groupLeaders(t, c.nodes[0])
	var victim *node
	for _, n := range c.nodes {
		if n.ID() == leaders[1] {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("no node leads group 1: %v", leaders)
	}
	victim.kill9()
	live := c.others(victim)
	if ok, why := pollUntil(30*time.Second, 200*time.Millisecond, func() (bool, string) { return spread(t, live, groups) }); !ok {
		t.Fatalf("after %s was killed: %s", victim.ID(), why)
	}
	for i, name := range tenants {
		charge(live[i%len(live)], name, 2)
	}
	victim.restart()
	if ok, why := pollUntil(60*time.Second, 250*time.Millisecond, func() (bool, string) { return spread(t, c.nodes, groups) }); !ok {
		t.Fatalf("after %s came back: %s", victim.ID(), why)
	}
	for i, name := range tenants {
		charge(c.nodes[(i+1)%len(c.nodes)], name, 3)
	}
	checkPins(t, c, groups)
	// each tenant's queue is in its own group: the default tenant sees its
	// own three orders only
	cl, err := queen.New(c.nodes[0].URL(), queen.WithLeaderRouting(false))
	must(t, err)
	defer cl.Close()
	for i := 1; i <= 3; i++ {
		e, err := cl.KV().Get(ctx, "charges", fmt.Sprintf("order-%d", i))
		must(t, err)
		if !e.Found {
			t.Errorf("the default tenant's marker order-%d is missing", i)
		}
	}
}

// A data dir holds the number of groups it was first started with: a node
// started with another --raft-groups is refused, naming both, and the data
// dir is left as it was.
func TestRaftGroupsMismatchIsRefused(t *testing.T) {
	n := startNode(t, nodeOpts{})
	r, err := n.send(10*time.Second, http.MethodPost, "/api/v1/push",
		map[string]any{"items": []any{map[string]any{"queue": "q", "payload": map[string]any{}}}}, nil)
	must(t, err)
	if r.Status >= 300 {
		t.Fatalf("push: %s", r)
	}
	n.sigterm(10 * time.Second)
	before, _ := os.ReadFile(filepath.Join(n.DataDir(), "FORMAT"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, "--node-id", "n1", "--data-dir", n.DataDir(), "--raft-groups", "3",
		"--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0").CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("a data dir of one group started with --raft-groups 3 (err %v):\n%s", err, out)
	}
	for _, want := range []string{"holds 1 raft groups", "--raft-groups 3"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	after, _ := os.ReadFile(filepath.Join(n.DataDir(), "FORMAT"))
	if string(after) != string(before) {
		t.Fatalf("FORMAT changed: %s → %s", before, after)
	}
	if _, err := os.Stat(filepath.Join(n.DataDir(), "groups")); err == nil {
		t.Fatal("the refused start made group directories")
	}
}

// checkPins: an operator pins a tenant to a group before it writes, and
// its writes go there; a tenant that wrote in one group is never pinned to
// another (409, nothing changed); bad pins are 400s.
func checkPins(t *testing.T, c *testCluster, groups int) {
	t.Helper()
	var fresh string
	for i := 0; ; i++ {
		if fresh = fmt.Sprintf("pinned-%d", i); cluster.GroupOf(fresh, groups) == 1 {
			break
		}
	}
	pin := func(via *node, name string, group any) *response {
		t.Helper()
		r, err := via.send(10*time.Second, http.MethodPost, "/api/v1/system/tenants/"+name+"/pin", map[string]any{"group": group}, nil)
		must(t, err)
		return r
	}
	if r := pin(c.nodes[1], fresh, 2); r.Status != http.StatusOK {
		t.Fatalf("pinning %s (hash: group 1) to group 2: %s", fresh, r)
	}
	r, err := c.nodes[2].send(10*time.Second, http.MethodPost, "/api/v1/push",
		map[string]any{"items": []any{map[string]any{"queue": "pinned", "payload": map[string]any{}}}}, map[string]string{tenant.Header: fresh})
	must(t, err)
	if r.Status >= 300 {
		t.Fatalf("a push of the pinned tenant: %s", r)
	}
	var table struct {
		Groups     int                 `json:"groups"`
		Placements []cluster.Placement `json:"placements"`
	}
	if err := c.nodes[0].getJSON("/api/v1/system/tenants", 10*time.Second, &table); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range table.Placements {
		if p.Tenant == fresh {
			found = p.Group == 2 && p.Pinned && p.Written
		}
	}
	if table.Groups != groups || !found {
		t.Fatalf("the placement table after the pinned tenant's first write: %+v", table)
	}
	written := tenantsInGroups(groups)[1] // wrote in group 1 above
	if r := pin(c.nodes[0], written, 2); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "already has data in group 1") {
		t.Fatalf("pinning a tenant with data in group 1 to group 2: %s", r)
	}
	for _, bad := range []struct {
		name  string
		group any
	}{{fresh, groups}, {fresh, -1}, {fresh, "two"}, {"Not-A-Name", 1}, {"default", 1}} {
		if r := pin(c.nodes[0], bad.name, bad.group); r.Status != http.StatusBadRequest {
			t.Errorf("pin %s to %v: %s", bad.name, bad.group, r)
		}
	}
	var h struct {
		Placements []cluster.Placement `json:"placements"`
		Tenant     struct {
			Group int `json:"group"`
		} `json:"tenant"`
	}
	// /health shows the node's own copy of the table: a node that restarted
	// a moment ago may not have applied the pin yet (its leader retries a
	// follower it lost contact with after a backoff of up to 10 s).
	if ok, why := pollUntil(30*time.Second, 250*time.Millisecond, func() (bool, string) {
		r, err := c.nodes[1].send(5*time.Second, http.MethodGet, "/health", nil, map[string]string{tenant.Header: fresh})
		must(t, err)
		h.Placements = nil
		r.decode(t, &h)
		return len(h.Placements) > 0 && h.Tenant.Group == 2, string(r.Body)
	}); !ok {
		t.Fatalf("/health of the pinned tenant: %s", why)
	}
}

// One node started alone with --raft-groups (the README's one command plus
// the flag): every group bootstraps, a tenant of each group writes and
// reads its own, and a restart finds them all.
func TestRaftGroupsOnOneNode(t *testing.T) {
	const groups = 3
	n := startNode(t, nodeOpts{Extra: []string{"--raft-groups", fmt.Sprint(groups), "--trust-tenant-header", "--default-subscription-mode", "all"}})
	push := func(name string) {
		t.Helper()
		r, err := n.send(10*time.Second, http.MethodPost, "/api/v1/push",
			map[string]any{"items": []any{map[string]any{"queue": "q", "payload": map[string]any{"t": name}}}}, map[string]string{tenant.Header: name})
		must(t, err)
		if r.Status >= 300 {
			t.Fatalf("%s: push: %s", name, r)
		}
	}
	count := func(name string) int {
		t.Helper()
		r, err := n.send(10*time.Second, http.MethodGet, "/api/v1/resources/queues/q", nil, map[string]string{tenant.Header: name})
		must(t, err)
		var q struct {
			Totals struct {
				Total int `json:"total"`
			} `json:"totals"`
		}
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %s", name, r)
		}
		r.decode(t, &q)
		return q.Totals.Total
	}
	names := tenantsInGroups(groups)
	for i, name := range names {
		for range i + 1 {
			push(name)
		}
	}
	check := func(when string) {
		t.Helper()
		for i, name := range names {
			if got := count(name); got != i+1 {
				t.Errorf("%s: tenant %s holds %d messages in q, want %d", when, name, got, i+1)
			}
		}
	}
	check("after the pushes")
	if code, _ := n.sigterm(15 * time.Second); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	n.restart()
	check("after a restart")
	// Push maintenance is the node's: a tenant of another group is held too,
	// and appended when it ends.
	maintenance := func(on bool) {
		t.Helper()
		r, err := n.send(10*time.Second, http.MethodPost, "/api/v1/system/maintenance", map[string]any{"enabled": on}, nil)
		must(t, err)
		if r.Status != http.StatusOK {
			t.Fatalf("maintenance %v: %s", on, r)
		}
	}
	maintenance(true)
	r, err := n.send(10*time.Second, http.MethodPost, "/api/v1/push",
		map[string]any{"items": []any{map[string]any{"queue": "q", "payload": map[string]any{}}}}, map[string]string{tenant.Header: names[2]})
	must(t, err)
	if !strings.Contains(string(r.Body), "buffered") {
		t.Fatalf("a push of group 2's tenant during push maintenance: %s", r)
	}
	maintenance(false)
	if got := count(names[2]); got != 4 {
		t.Fatalf("after maintenance: %d messages, want 4", got)
	}
	// the state hash and a backup are one group's (?group=N)
	hashes := map[string]bool{}
	for g := range groups {
		r, err := n.send(10*time.Second, http.MethodGet, fmt.Sprintf("/api/v1/system/state-hash?group=%d", g), nil, nil)
		must(t, err)
		var h struct{ Hash string }
		r.decode(t, &h)
		if r.Status != http.StatusOK || h.Hash == "" {
			t.Fatalf("state hash of group %d: %s", g, r)
		}
		hashes[h.Hash] = true
	}
	if len(hashes) != groups {
		t.Fatalf("the groups' state hashes are not three: %v", hashes)
	}
	for _, path := range []string{"/api/v1/system/state-hash?group=3", "/api/v1/system/backup?group=x"} {
		if r, err := n.send(10*time.Second, http.MethodGet, path, nil, nil); err != nil || r.Status != http.StatusBadRequest {
			t.Fatalf("%s: %v %v", path, r, err)
		}
	}
	if r, err := n.send(30*time.Second, http.MethodGet, "/api/v1/system/backup?group=2", nil, nil); err != nil || r.Status != http.StatusOK || len(r.Body) < 1024 {
		t.Fatalf("a backup of group 2: %v %v", r, err)
	}
	if ls := groupLeaders(t, n); len(ls) != groups || ls[0] != n.ID() || ls[1] != n.ID() || ls[2] != n.ID() {
		t.Fatalf("the node leads %v", ls)
	}
}

// A fourth node joins a cluster of four groups on three nodes (issue 26,
// "rebalanced after ... a node joins"): it becomes a voter of every group,
// the balancer hands it one group's leadership (before, one node led two),
// and the tenant of that group writes through it with nothing refused.
func TestAJoiningNodeTakesItsShareOfTheLeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	const groups = 4
	c := startGroupsCluster(t, groups)
	pn, err := c.AddNode(context.Background())
	if err != nil {
		t.Fatalf("adding a node: %v", err)
	}
	n4 := testNode(t, pn)
	c.nodes = append(c.nodes, n4)
	ok, why := pollUntil(60*time.Second, 250*time.Millisecond, func() (bool, string) {
		for _, g := range groupStatuses(t, n4) {
			if g.Role != "leader" && g.Role != "follower" {
				return false, fmt.Sprintf("n4 in group %d: %s", g.Group, g.Role)
			}
		}
		ok, why := spread(t, c.nodes, groups) // four nodes, four groups: one each
		return ok, why
	})
	if !ok {
		t.Fatalf("the leaders did not spread over four nodes: %s", why)
	}
	leaders := groupLeaders(t, n4)
	mine := -1
	for g, id := range leaders {
		if id == n4.ID() {
			mine = g
		}
	}
	if mine < 0 {
		t.Fatalf("the new node leads no group: %v", leaders)
	}
	name := tenantsInGroups(groups)[mine]
	r, err := n4.send(10*time.Second, "PUT", "/api/v1/kv/charges/joined", map[string]any{"value": name, "forever": true},
		map[string]string{"x-queen-tenant": name})
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("%s (group %d) writing through the new leader: %v %v", name, mine, r, err)
	}
	t.Logf("leaders after the join: %v; n4 leads group %d", leaders, mine)
}

// A replica of a Raft group other than 0 whose state file is damaged is
// rebuilt from that group's leader, as group 0's is (before, it only
// stopped): gossip says which group is resyncing (meta.ResyncGroups), the
// group's leader demotes it and promotes it again once it caught up, and
// the node's other groups serve on. A flipped bit is found by the state
// check's record checksums; a record rewritten whole with a valid checksum
// only by comparing the replicas' digests of the group, which groups > 0
// send as gossip messages (groupchecks.go).
func TestADamagedReplicaOfAnotherGroupIsRebuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test; skipped with -short")
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path, needle, team string)
	}{
		{"a flipped bit", func(t *testing.T, path, needle, _ string) {
			if flipEvery(t, path, needle) == 0 {
				t.Fatalf("the value is not in %s", path)
			}
		}},
		{"a record rewritten with a valid checksum", rewriteKVOf},
	} {
		t.Run(tc.name, func(t *testing.T) { damagedReplicaOfGroupOne(t, tc.damage) })
	}
}

func damagedReplicaOfGroupOne(t *testing.T, damage func(t *testing.T, path, needle, team string)) {
	const groups = 2
	c := startGroupsCluster(t, groups)
	team := tenantsInGroups(groups)[1]
	hdr := map[string]string{"x-queen-tenant": team}
	const needle = "a-group-one-value-whose-bytes-the-disk-will-flip"
	l := c.leader(20 * time.Second)
	if r := c.sendRetry(l, 10*time.Second, "PUT", "/api/v1/kv/ledger/balance", map[string]any{"value": needle, "forever": true}, hdr); r.Status != http.StatusOK {
		t.Fatalf("put: %s", r)
	}
	// a replica of group 1 that does not lead it
	leaders := groupLeaders(t, c.nodes[0])
	var f *node
	for _, n := range c.nodes {
		if n.ID() != leaders[1] {
			f = n
			break
		}
	}
	dir := filepath.Join(f.DataDir(), "groups", "1")
	ok, why := pollUntil(20*time.Second, 200*time.Millisecond, func() (bool, string) {
		for _, g := range groupStatuses(t, f) {
			if g.Group == 1 && g.Applied >= 3 {
				return true, ""
			}
		}
		return false, fmt.Sprint(groupStatuses(t, f))
	})
	if !ok {
		t.Fatalf("%s did not apply group 1: %s", f.ID(), why)
	}
	f.sigterm(10 * time.Second)
	damage(t, filepath.Join(dir, "fsm.db"), needle, team)
	f.launch()
	ok, why = pollUntil(90*time.Second, 300*time.Millisecond, func() (bool, string) {
		gs := groupStatuses(t, f)
		if len(gs) != groups || gs[1].Resync != nil || gs[1].Leader == "" {
			return false, fmt.Sprintf("%+v", gs)
		}
		if _, err := os.Stat(filepath.Join(dir, "RESYNC")); !os.IsNotExist(err) {
			return false, "the RESYNC marker is there"
		}
		kept, _ := filepath.Glob(filepath.Join(dir, "damaged", "*", "fsm.db"))
		return len(kept) == 1, fmt.Sprint("set aside: ", kept)
	})
	if !ok {
		t.Fatalf("%s's group 1 was not rebuilt: %s", f.ID(), why)
	}
	if err := c.WaitVoters(context.Background(), 60*time.Second, c.Nodes()...); err != nil {
		t.Fatal(err)
	}
	r, err := f.send(10*time.Second, "GET", "/api/v1/kv/ledger/balance", nil, hdr)
	if err != nil || r.Status != http.StatusOK || !strings.Contains(string(r.Body), needle) {
		t.Fatalf("the rebuilt replica reads %v %v", r, err)
	}
	// group 0 on that node was never set aside
	if kept, _ := filepath.Glob(filepath.Join(f.DataDir(), "damaged", "*")); len(kept) != 0 {
		t.Fatalf("group 0's files were set aside too: %v", kept)
	}
}

// startGroupsCluster starts three nodes with --raft-groups groups and
// --trust-tenant-header (plus extra) and waits until the groups' leaders
// spread over them.
func startGroupsCluster(t *testing.T, groups int, extra ...string) *testCluster {
	t.Helper()
	c := startCluster(t, nodeOpts{Extra: append([]string{"--raft-groups", fmt.Sprint(groups), "--trust-tenant-header"}, extra...)})
	awaitSpread(t, c, groups)
	return c
}

// awaitSpread waits until the leaders of c's groups spread over its nodes
// and each group is led by its preferred voter (the (g mod k)-th of the k
// nodes in id order, cluster/balance.go). A spread the first elections
// happen to give is not enough: the balancer then moves leaders to their
// preferred voters within seconds, under a test that already relies on
// them (a Kafka group's coordinator moved under its member in a CI run).
func awaitSpread(t *testing.T, c *testCluster, groups int) {
	t.Helper()
	ids := votersInIDOrder(c)
	if ok, why := pollUntil(45*time.Second, 200*time.Millisecond, func() (bool, string) {
		ok, why := spread(t, c.nodes, groups)
		if !ok {
			return false, why
		}
		ls := groupLeaders(t, c.nodes[0])
		for g, l := range ls {
			if l != ids[g%len(ids)] {
				return false, fmt.Sprintf("group %d led by %s, its preferred voter is %s: %v", g, l, ids[g%len(ids)], ls)
			}
		}
		return true, ""
	}); !ok {
		t.Fatalf("the leaders did not settle on their preferred voters: %s", why)
	}
}

// votersInIDOrder is c's node ids sorted: group g's preferred voter is
// the (g mod k)-th of them.
func votersInIDOrder(c *testCluster) []string {
	ids := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		ids[i] = n.ID()
	}
	slices.Sort(ids)
	return ids
}

// groupStatuses is node n's /health groups.
func groupStatuses(t *testing.T, n *node) []cluster.GroupStatus {
	r, err := n.send(3*time.Second, http.MethodGet, "/health", nil, nil)
	if err != nil {
		return nil
	}
	var h groupsHealth
	if json.Unmarshal(r.Body, &h) != nil {
		return nil
	}
	return h.Groups
}

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queen-node/queen-node/backup"
)

// A whole-cluster backup with --raft-groups 3 (issue 26): `queen-node
// backup` holds one record per group, `queen-node restore` sends each to
// its group's leader, and every tenant gets back exactly what it had when
// the backup was taken. A record restored into another group, or a
// whole-cluster file posted to one node, is refused and changes nothing.
func TestBackupAndRestoreEveryRaftGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	const groups = 3
	c := startGroupsCluster(t, groups)
	tenants := tenantsInGroups(groups)
	via := c.nodes[1]
	put := func(name, key string) {
		t.Helper()
		r, err := via.send(20*time.Second, "PUT", "/api/v1/kv/charges/"+key, map[string]any{"value": name + ":" + key, "forever": true},
			map[string]string{"x-queen-tenant": name})
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("%s: put %s: %v %v", name, key, r, err)
		}
	}
	found := func(name, key string) bool {
		t.Helper()
		r, err := via.send(20*time.Second, "GET", "/api/v1/kv/charges/"+key, nil, map[string]string{"x-queen-tenant": name})
		if err != nil || (r.Status != http.StatusOK && r.Status != http.StatusNotFound) {
			t.Fatalf("%s: get %s: %v %v", name, key, r, err)
		}
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), name+":"+key)
	}
	for _, name := range tenants {
		put(name, "before")
	}
	file := filepath.Join(t.TempDir(), "cluster.backup")
	out, err := queenNode("backup", "--addr", c.nodes[2].URL(), "--out", file)
	if err != nil || !strings.Contains(out, `"groups"`) {
		t.Fatalf("queen-node backup: %v\n%s", err, out)
	}
	b, err := backup.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Records) != groups {
		t.Fatalf("%d records in a backup of %d groups", len(b.Records), groups)
	}
	one := filepath.Join(t.TempDir(), "group1.backup")
	rec, _ := os.Create(one)
	if _, err := rec.ReadFrom(b.RecordBytes(1)); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	b.Close()
	for _, name := range tenants {
		put(name, "after")
	}

	// refused: group 1's record into group 2, the whole file into one group
	for _, bad := range []struct{ file, query string }{{one, "?group=2"}, {file, "?group=0"}, {file, ""}} {
		body, _ := os.ReadFile(bad.file)
		refused := 0
		for _, n := range c.nodes { // the one that leads the group answers; the others send us there
			req, _ := http.NewRequest("POST", n.URL()+"/api/v1/system/restore"+bad.query, strings.NewReader(string(body)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || (resp.StatusCode != http.StatusConflict && resp.StatusCode != http.StatusBadRequest) {
				t.Fatalf("restore of %s%s on %s: %d", filepath.Base(bad.file), bad.query, n.ID(), resp.StatusCode)
			}
			if resp.StatusCode == http.StatusBadRequest {
				refused++
			}
		}
		if refused == 0 {
			t.Fatalf("restore of %s%s: no node refused it with 400 (only not-leader answers)", filepath.Base(bad.file), bad.query)
		}
	}
	for _, name := range tenants {
		if !found(name, "after") {
			t.Fatalf("%s: a refused restore changed the state", name)
		}
	}

	out, err = queenNode("restore", "--addr", c.nodes[0].URL(), "--in", file)
	if err != nil || strings.Count(out, `"restored": true`) < groups {
		t.Fatalf("queen-node restore: %v\n%s", err, out)
	}
	for _, name := range tenants {
		if !found(name, "before") || found(name, "after") {
			t.Fatalf("%s after the restore: before %v, after %v (want true, false)", name, found(name, "before"), found(name, "after"))
		}
		put(name, "again") // every group takes writes after its restore
	}
	t.Logf("a backup of %d groups restored; %d tenants back to the backup's state", groups, len(tenants))
}

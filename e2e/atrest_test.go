package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queen-node/queen-node/nodeproc"
)

// keyLine is one line of an --encryption-keys file: a name and a fresh key.
func keyLine(name string) string {
	k := make([]byte, 32)
	rand.Read(k)
	return name + " " + base64.StdEncoding.EncodeToString(k) + "\n"
}

// filesHolding lists the files under dir whose bytes contain s.
func filesHolding(t *testing.T, dir string, s []byte) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, s) {
			out = append(out, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	return out
}

// Encryption at rest (spec §5.12) on a three-node cluster: a queue with
// encryptionEnabled keeps ciphertext in every node's Raft log, message
// files, state file (timers, dead letters) and snapshots, and in a backup,
// and gives plaintext to pops and the DLQ; a queue without it is stored as
// pushed (the search that finds it shows the search works). The broker
// owns a timer's encrypted flag there. A newer key seals after a SIGHUP
// while the old one still opens; a node whose key file lacks a key its
// data needs refuses to start.
func TestEncryptionAtRest(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test; skipped with -short")
	}
	dir := t.TempDir()
	keyFiles := map[int]string{}
	first := keyLine("k1")
	c := startCluster(t, nodeOpts{SnapshotThreshold: 4, SnapshotInterval: 200 * time.Millisecond,
		Node: func(i int, s *nodeproc.Spec) error {
			keyFiles[i] = filepath.Join(dir, fmt.Sprintf("keys-n%d", i))
			s.Flags = append(s.Flags, "--encryption-keys", keyFiles[i])
			return os.WriteFile(keyFiles[i], []byte(first), 0o600)
		}})
	l := c.leader(30 * time.Second)
	api := func(n *node, method, path string, body any, want int) *response {
		t.Helper()
		r := c.sendRetry(n, 15*time.Second, method, path, body, nil)
		if r.Status != want {
			t.Fatalf("%s %s: %s, want %d", method, path, r, want)
		}
		return r
	}
	api(l, "POST", "/api/v1/configure", map[string]any{"queue": "vault", "options": map[string]any{"encryptionEnabled": true}}, 200)
	var items []map[string]any
	for i := range 30 {
		items = append(items, map[string]any{"queue": "vault", "transactionId": fmt.Sprint("v", i), "payload": map[string]any{"secret": fmt.Sprintf("VAULT-MARKER-%02d", i)}})
		items = append(items, map[string]any{"queue": "open", "transactionId": fmt.Sprint("o", i), "payload": map[string]any{"note": fmt.Sprintf("OPEN-MARKER-%02d", i)}})
	}
	api(c.others(l)[0], "POST", "/api/v1/push", map[string]any{"items": items}, 201)

	// Timers: one pending (its stored payload is ciphertext, marked
	// encrypted by the broker), one due now (fired into the queue).
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	api(l, "POST", "/api/v1/timers", map[string]any{"operations": []any{
		map[string]any{"op": "schedule", "queue": "vault", "timerKey": "later", "delayMs": 3600000, "txn": "t-later", "payload": b64(`{"secret":"TIMER-MARKER"}`)},
		map[string]any{"op": "schedule", "queue": "vault", "timerKey": "now", "delayMs": 0, "txn": "t-now", "payload": b64(`{"secret":"FIRED-MARKER"}`)},
	}}, 200)
	var peek struct {
		Found     bool   `json:"found"`
		Encrypted bool   `json:"encrypted"`
		Payload   string `json:"payload"`
	}
	api(l, "GET", "/api/v1/timers/vault/later", nil, 200).decode(t, &peek)
	raw, _ := base64.StdEncoding.DecodeString(peek.Payload)
	if !peek.Found || !peek.Encrypted || bytes.Contains(raw, []byte("TIMER-MARKER")) {
		t.Fatalf("the pending timer's stored payload: found %v encrypted %v payload %q", peek.Found, peek.Encrypted, raw)
	}
	// A client's own encrypted flag: the queue owns it (addendum §1.2).
	conflict := map[string]any{"op": "schedule", "queue": "vault", "timerKey": "c", "delayMs": 1000, "txn": "t-c", "payload": b64(`{}`), "encrypted": true}
	if r := api(l, "POST", "/api/v1/timers", map[string]any{"operations": []any{conflict}}, 400); errCode(r) != "timers_encrypted_conflict" && !strings.Contains(r.String(), "timers_encrypted_conflict") {
		t.Fatalf("a client-encrypted timer for an encrypting queue: %s", r)
	}
	var txn map[string]any
	api(l, "POST", "/api/v1/transaction", map[string]any{"operations": []any{}, "timers": []any{conflict},
		"kv": []any{map[string]any{"op": "put", "ns": "n", "key": "k", "value": 1, "forever": true}}}, 200).decode(t, &txn)
	if txn["success"] != false || txn["reason"] != "bad_request" {
		t.Fatalf("the same timer in a transaction: %v, want success false, reason bad_request", txn)
	}
	api(l, "POST", "/api/v1/timers", map[string]any{"operations": []any{map[string]any{"op": "schedule", "queue": "open", "timerKey": "c",
		"delayMs": 3600000, "txn": "t-c", "payload": b64(`{}`), "encrypted": true}}}, 200) // a queue that does not encrypt keeps the client's flag

	if ok, detail := pollUntil(20*time.Second, 50*time.Millisecond, func() (bool, string) {
		r := api(l, "GET", "/api/v1/timers/vault/now", nil, 200)
		return strings.Contains(r.String(), `"found":false`), r.String()
	}); !ok {
		t.Fatalf("the due timer did not fire: %s", detail)
	}
	// Consumers read plaintext, through a follower too.
	want := map[string]bool{"FIRED-MARKER": true}
	for i := range 30 {
		want[fmt.Sprintf("VAULT-MARKER-%02d", i)] = true
	}
	var got []string
	var leaseID, partitionID string
	for try := 0; try < 50 && len(got) < len(want); try++ {
		r := c.sendRetry(c.others(l)[1], 15*time.Second, "GET", "/api/v1/pop/queue/vault?batch=100&wait=true&timeout=2000", nil, nil)
		if r.Status != http.StatusOK {
			continue
		}
		var pop struct {
			Messages []struct {
				Data          map[string]any `json:"data"`
				TransactionID string         `json:"transactionId"`
				PartitionID   string         `json:"partitionId"`
				LeaseID       string         `json:"leaseId"`
			} `json:"messages"`
		}
		r.decode(t, &pop)
		for _, m := range pop.Messages {
			got = append(got, fmt.Sprint(m.Data["secret"]))
			if m.TransactionID == "v0" {
				leaseID, partitionID = m.LeaseID, m.PartitionID
			}
		}
	}
	for _, s := range got {
		delete(want, s)
	}
	if len(want) > 0 {
		t.Fatalf("popped %v; missing %v", got, want)
	}
	// A dead letter keeps ciphertext and reads as plaintext.
	api(l, "POST", "/api/v1/ack", map[string]any{"transactionId": "v0", "partitionId": partitionID, "leaseId": leaseID, "status": "dlq", "error": "test"}, 200)
	var dlq struct {
		Messages []struct {
			Data map[string]any `json:"data"`
		} `json:"messages"`
	}
	api(l, "GET", "/api/v1/dlq?queue=vault", nil, 200).decode(t, &dlq)
	if len(dlq.Messages) != 1 || dlq.Messages[0].Data["secret"] != "VAULT-MARKER-00" {
		t.Fatalf("dead letters of vault: %+v", dlq.Messages)
	}

	// Snapshots on every node past the pushes, then a backup.
	h, _ := l.Health(context.Background())
	for _, n := range c.nodes {
		ok, detail := pollUntil(30*time.Second, 100*time.Millisecond, func() (bool, string) {
			l.send(5*time.Second, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "filler"}}}, nil) // entries for the threshold
			s := snapshots(n.DataDir())
			return len(s) > 0 && s[0].Index >= h.Raft.Commit, fmt.Sprint(s)
		})
		if !ok {
			t.Fatalf("%s took no snapshot past %d: %s", n.ID(), h.Raft.Commit, detail)
		}
	}
	backup := filepath.Join(dir, "cluster.backup")
	if out, err := queenNode("backup", "--addr", l.URL(), "--out", backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	for _, marker := range []string{"VAULT-MARKER", "TIMER-MARKER", "FIRED-MARKER"} {
		for _, n := range c.nodes {
			if f := filesHolding(t, n.DataDir(), []byte(marker)); len(f) > 0 {
				t.Errorf("%s's data dir holds %s in plaintext: %v", n.ID(), marker, f)
			}
		}
		if f := filesHolding(t, dir, []byte(marker)); len(f) > 0 {
			t.Errorf("%s in plaintext in %v (the backup is %s)", marker, f, backup)
		}
	}
	for _, n := range c.nodes { // the search finds what is stored in plaintext
		files := strings.Join(filesHolding(t, n.DataDir(), []byte("OPEN-MARKER-07")), " ")
		if !strings.Contains(files, "/raft/wal/") || !strings.Contains(files, "messages") || !strings.Contains(files, "snapshots") {
			t.Errorf("%s: the plaintext queue's marker is in %q; want the Raft log, the message files and a snapshot", n.ID(), files)
		}
	}
	if f := filesHolding(t, dir, []byte("OPEN-MARKER-07")); !strings.Contains(strings.Join(f, " "), "cluster.backup") {
		t.Errorf("the backup lacks the plaintext queue's marker: %v", f)
	}

	// Rotation: k2 is added as the newest key and every node rereads its
	// file on SIGHUP; new messages are sealed with k2, old ones still open.
	second := keyLine("k2")
	for _, f := range keyFiles {
		os.WriteFile(f, []byte(first+second), 0o600)
	}
	const reloaded = "SIGHUP: reloaded the encryption keys"
	seen := map[string]int{}
	for _, n := range c.nodes {
		seen[n.ID()] = n.logCount(reloaded)
		syscall.Kill(n.PID(), syscall.SIGHUP)
	}
	for _, n := range c.nodes {
		waitFor(t, 15*time.Second, n.ID()+" rereads its key file on SIGHUP", func() bool { return n.logCount(reloaded) > seen[n.ID()] })
	}
	api(l, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "vault", "partition": "rotated", "transactionId": "after-rotation",
		"payload": map[string]any{"secret": "ROTATED-MARKER"}}}}, 201)
	r := api(l, "GET", "/api/v1/pop/queue/vault?batch=10&wait=true&timeout=3000", nil, 200)
	if !strings.Contains(r.String(), "ROTATED-MARKER") {
		t.Fatalf("pop after rotation: %s", r)
	}
	sealedWithK2 := []byte("\x00QNE\x01\x02k2")
	if f := filesHolding(t, l.DataDir(), sealedWithK2); len(f) == 0 {
		t.Fatal("no payload sealed with k2 after the rotation")
	}

	// A node whose key file lacks a key its data needs refuses to start.
	n3 := c.nodes[2]
	if code, _ := n3.sigterm(30 * time.Second); code != 0 {
		t.Fatalf("SIGTERM of %s: exit %d", n3.ID(), code)
	}
	try := func(what string, args []string, wantErr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), wantErr) {
			t.Fatalf("%s: %v, want an exit saying %q:\n%s", what, err, wantErr, out)
		}
	}
	onlyK2 := filepath.Join(dir, "only-k2")
	os.WriteFile(onlyK2, []byte(second), 0o600)
	args := n3.Args()
	for i := range args {
		if args[i] == keyFiles[3] {
			args[i] = onlyK2
		}
	}
	try("a key file without k1", args, `which the key file lacks`)
	var noKeys []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--encryption-keys" {
			i++
			continue
		}
		noKeys = append(noKeys, args[i])
	}
	try("no key file", noKeys, "start with --encryption-keys")
	n3.restart()
	c.waitRejoined(n3, 30*time.Second)
	if r := api(n3, "GET", "/api/v1/dlq?queue=vault&consistency=stale", nil, http.StatusOK); !strings.Contains(r.String(), "VAULT-MARKER-00") {
		t.Fatalf("the restarted node's own DLQ view: %s", r)
	}
}

// Without a key file, a queue with encryptionEnabled keeps plaintext and
// round-trips (spec §5.12), and the node says so once in its log.
func TestEncryptionEnabledWithoutKeysRoundTrips(t *testing.T) {
	n := startNode(t, nodeOpts{})
	for i := range 2 {
		if r, err := n.send(10*time.Second, "POST", "/api/v1/configure", map[string]any{"queue": fmt.Sprint("clear", i), "options": map[string]any{"encryptionEnabled": true}}, nil); err != nil || r.Status != 200 {
			t.Fatalf("configure: %v %v", r, err)
		}
	}
	if r, err := n.send(10*time.Second, "POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "clear0", "payload": map[string]any{"v": "PLAIN-MARKER"}}}}, nil); err != nil || r.Status != 201 {
		t.Fatalf("push: %v %v", r, err)
	}
	r, err := n.send(10*time.Second, "GET", "/api/v1/pop/queue/clear0?batch=1&wait=true&timeout=2000", nil, nil)
	if err != nil || r.Status != 200 || !strings.Contains(r.String(), "PLAIN-MARKER") {
		t.Fatalf("pop: %v %v", r, err)
	}
	if f := filesHolding(t, n.DataDir(), []byte("PLAIN-MARKER")); len(f) == 0 {
		t.Fatal("the payload is not stored as pushed")
	}
	if got := strings.Count(n.LogSince(0), "has encryptionEnabled, but this node has no --encryption-keys"); got != 1 {
		t.Fatalf("the node said %d times that it keeps such queues in plaintext, want once:\n%s", got, n.Tail(30))
	}
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Queen's own Go stream SDK (third_party/queen-client-go, pinned and
// unchanged) against queen-node: its integration suite, and a tumbling
// window count whose runtime is killed with SIGKILL mid-window, restarted,
// and whose window totals must match the pushes exactly (spec §4.16).

// goTool runs the go command in dir (the SDK's own module, or the
// program's), bounded in time.
func goTool(t *testing.T, dir string, timeout time.Duration, env []string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// TestQueenGoStreamSuite runs the SDK's tests/streams_integration against
// a node whose new groups start at the beginning (the server default the
// suite is written for: it pushes before its runtime subscribes).
func TestQueenGoStreamSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the SDK's suite (about 30 s)")
	}
	n := startNode(t, nodeOpts{DefaultSubscriptionMode: "all"})
	sdk, _ := filepath.Abs("../third_party/queen-client-go")
	out, err := goTool(t, sdk, 5*time.Minute, []string{"QUEEN_URL=" + n.URL()}, "test", "-count=1", "-v", "./tests/streams_integration/")
	if err != nil {
		t.Fatalf("the SDK's suite failed: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("skipping suite")) {
		t.Fatalf("the suite skipped itself (broker not reachable): %s", out)
	}
	if n := bytes.Count(out, []byte("--- PASS")); n != 9 || bytes.Contains(out, []byte("--- FAIL")) {
		t.Fatalf("%d tests passed, want 9:\n%s", n, out)
	}
}

// TestStreamSDKCountsEachMessageOnceAcrossAKill: three partitions fed for
// about 8 s; the SDK's runtime counts 1 s tumbling windows; it is killed
// with SIGKILL mid-window and started again; every (partition, window)
// count it emitted adds up to exactly the messages pushed into it.
func TestStreamSDKCountsEachMessageOnceAcrossAKill(t *testing.T) {
	n := startNode(t, nodeOpts{})
	bin := filepath.Join(t.TempDir(), "streamsdk")
	prog, _ := filepath.Abs("streamsdk")
	if out, err := goTool(t, prog, 3*time.Minute, nil, "build", "-o", bin, "."); err != nil {
		t.Fatalf("building the SDK program: %v\n%s", err, out)
	}
	// A short lease, so the killed runtime's run comes again soon.
	if r, err := n.send(5*time.Second, "POST", "/api/v1/configure", `{"queue":"events","options":{"leaseTime":2}}`, nil); err != nil || r.Status != 200 {
		t.Fatalf("configure: %v %v", r, err)
	}
	var logs []*bytes.Buffer
	start := func() *exec.Cmd {
		var log bytes.Buffer
		cmd := exec.Command(bin, "-url", n.URL(), "-src", "events", "-sink", "counts", "-query", "count-by-window")
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &log)
		return cmd
	}
	runtime := start()
	t.Cleanup(func() { runtime.Process.Kill(); runtime.Wait() })

	parts := []string{"a", "b", "c"}
	begin := time.Now()
	killed, restarted := false, false
	perPartition := 0
	for i := 0; time.Since(begin) < 8*time.Second; i++ {
		perPartition++
		for _, p := range parts {
			body := fmt.Sprintf(`{"items":[{"queue":"events","partition":%q,"transactionId":"%s-%d","payload":{"i":%d}}]}`, p, p, i, i)
			if r, err := n.send(5*time.Second, "POST", "/api/v1/push", body, nil); err != nil || r.Status != 201 {
				t.Fatalf("push: %v %v", r, err)
			}
		}
		time.Sleep(80 * time.Millisecond)
		switch since := time.Since(begin); {
		case !killed && since > 3300*time.Millisecond: // mid-window
			runtime.Process.Kill()
			runtime.Wait()
			killed = true
		case killed && !restarted && since > 4800*time.Millisecond:
			runtime = start()
			restarted = true
		}
	}
	if !killed || !restarted {
		t.Fatal("the pushes ended before the kill and the restart")
	}

	// What was pushed, by (partition, window), from the messages' createdAt.
	var listed struct {
		Messages []struct{ Partition, CreatedAt string }
	}
	if err := n.getJSON("/api/v1/messages?queue=events&limit=1000", 5*time.Second, &listed); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, m := range listed.Messages {
		at, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
		if err != nil {
			t.Fatalf("createdAt %q: %v", m.CreatedAt, err)
		}
		want[fmt.Sprintf("%s@%d", m.Partition, at.UnixMilli()/1000*1000)]++
	}
	if len(listed.Messages) != perPartition*len(parts) {
		t.Fatalf("listed %d source messages, want %d", len(listed.Messages), perPartition*len(parts))
	}

	// What the runtime emitted, until every message is counted (and a
	// little longer: a count past the total would show there).
	got := map[string]int{}
	total := 0
	var settled time.Time
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) && (settled.IsZero() || time.Since(settled) < 2*time.Second) {
		r, err := n.send(10*time.Second, "GET", "/api/v1/pop/queue/counts?consumerGroup=checker&subscriptionMode=all&batch=500&autoAck=true&wait=true&timeout=500", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == 200 {
			var pop struct {
				Messages []struct {
					Data struct {
						Count       float64
						WindowStart float64
						Partition   string
					}
				}
			}
			r.decode(t, &pop)
			for _, m := range pop.Messages {
				got[fmt.Sprintf("%s@%d", m.Data.Partition, int64(m.Data.WindowStart))] += int(m.Data.Count)
				total += int(m.Data.Count)
			}
		}
		if total >= perPartition*len(parts) && settled.IsZero() {
			settled = time.Now()
		}
	}
	var diffs []string
	for k, w := range want {
		if got[k] != w {
			diffs = append(diffs, fmt.Sprintf("%s: counted %d, pushed %d", k, got[k], w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: counted %d, pushed none", k, g))
		}
	}
	if len(diffs) > 0 || total != perPartition*len(parts) {
		t.Fatalf("window counts differ from the pushes (total %d, want %d):\n%s\nruntime logs:\n%s",
			total, perPartition*len(parts), strings.Join(diffs, "\n"), logs[len(logs)-1])
	}
	t.Logf("%d windows of 3 partitions counted exactly across a SIGKILL of the runtime", len(want))

	// The operator's view: ctl lists the query, and deletes it with its state.
	runtime.Process.Signal(os.Interrupt)
	runtime.Wait()
	if r := n.mustCtl(t, "streams"); !strings.Contains(r.stdout, "count-by-window") || !strings.Contains(r.stdout, "events") {
		t.Fatalf("ctl streams: %s", r)
	}
	n.mustCtl(t, "streams", "delete", "count-by-window", "--yes")
	if r := n.mustCtl(t, "streams", "-o", "json"); strings.Contains(r.stdout, "count-by-window") {
		t.Fatalf("ctl streams after the delete: %s", r)
	}
	wantFail(t, n.ctl(t, "streams", "delete", "count-by-window", "--yes"), 1, "stream query not found")
}

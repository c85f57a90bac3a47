package e2e

import (
	"context"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kcat is librdkafka's command-line client (Debian's kcat, installed by
// .ci/run). The test skips where it is not installed.
func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// librdkafka (kcat) produces, consumes from a group and reads by
// timestamp.
func TestKafkaWithKcat(t *testing.T) {
	_, addr := startKafkaNode(t, "--kafka-default-partitions", "2")
	var lines []string
	for i := 0; i < 10; i++ {
		lines = append(lines, "k"+strconv.Itoa(i)+":{\"n\":"+strconv.Itoa(i)+"}")
	}
	before := time.Now().UnixMilli()
	kcat(t, strings.Join(lines, "\n")+"\n", "-b", addr, "-t", "events", "-P", "-K:", "-X", "topic.request.required.acks=all")
	// the first 10 records: everything was appended after `before`
	time.Sleep(50 * time.Millisecond)
	mid := time.Now().UnixMilli()
	kcat(t, "late:{\"n\":99}\n", "-b", addr, "-t", "events", "-P", "-K:")

	out := kcat(t, "", "-q", "-b", addr, "-G", "kcat-group", "-c", "11", "-f", "%k=%s\n", "-X", "auto.offset.reset=earliest", "events")
	got := strings.Split(strings.TrimSpace(out), "\n")
	var recs []string
	for _, l := range got {
		if strings.Contains(l, "=") {
			recs = append(recs, l)
		}
	}
	sort.Strings(recs)
	if len(recs) != 11 || recs[0] != `k0={"n":0}` || recs[10] != `late={"n":99}` {
		t.Fatalf("kcat group consumer read %q", recs)
	}

	// by timestamp: from `mid` only the late record is left
	out = kcat(t, "", "-q", "-b", addr, "-C", "-t", "events", "-o", "s@"+strconv.FormatInt(mid, 10), "-e", "-f", "%k\n")
	if strings.TrimSpace(out) != "late" {
		t.Fatalf("kcat from timestamp %d (%d before the first) read %q, want only the late record", mid, before, out)
	}
}

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	wal "github.com/hashicorp/raft-wal"

	bolt "go.etcd.io/bbolt"
)

// ---------------------------------------------------------------------------
// The ledger: what the clients were told.

// pushed is an item the broker acknowledged: HTTP 201, status "queued".
type pushed struct {
	Partition string
	MessageID string
}

// ledger records the outcome of every pushed item. An item is acked (201
// queued: it must exist exactly once), maybe (the request failed in flight,
// typically because the node was killed: it may exist at most once), or was
// never sent (it must not exist).
type ledger struct {
	mu     sync.Mutex
	acked  map[string]pushed
	maybe  map[string]string // transactionId -> partition
	order  []string          // acked transactionIds in the order they were acked
	faults []string          // protocol violations seen by pushers (first 50)
	nFault int
	// counts of request outcomes, for the log
	req201, reqErr, reqOther int
}

func newLedger() *ledger {
	return &ledger{acked: map[string]pushed{}, maybe: map[string]string{}}
}

func (l *ledger) fault(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nFault++
	if len(l.faults) < 50 {
		l.faults = append(l.faults, fmt.Sprintf(format, args...))
	}
}

func (l *ledger) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// sample returns up to k acked transactionIds, chosen at random.
func (l *ledger) sample(rng *rand.Rand, k int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.order) == 0 {
		return nil
	}
	out := make([]string, 0, k)
	seen := map[string]bool{}
	for i := 0; i < 4*k && len(out) < k; i++ {
		id := l.order[rng.IntN(len(l.order))]
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// record files the outcome of one push request of items.
func (l *ledger) record(items []pushItem, r *response, err error) {
	if err != nil || r.Status != http.StatusCreated {
		l.mu.Lock()
		if err != nil {
			l.reqErr++
		} else {
			l.reqOther++
		}
		for _, it := range items {
			l.maybe[it.TransactionID] = it.Partition
		}
		l.mu.Unlock()
		if err == nil && r.Status < 500 {
			l.fault("push of %d fresh items answered %s", len(items), r)
		}
		return
	}
	var res []pushResult
	if derr := json.Unmarshal(r.Body, &res); derr != nil || len(res) != len(items) {
		l.fault("push of %d items: 201 with an unreadable or short body (%v): %s", len(items), derr, r)
		l.mu.Lock()
		for _, it := range items {
			l.maybe[it.TransactionID] = it.Partition
		}
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	l.req201++
	l.mu.Unlock()
	for i, it := range items {
		p := res[i]
		switch {
		case p.TransactionID != it.TransactionID:
			l.fault("push result %d names transactionId %q, want %q", i, p.TransactionID, it.TransactionID)
		case p.Status == "queued":
			l.mu.Lock()
			if _, dup := l.acked[it.TransactionID]; dup {
				l.mu.Unlock()
				l.fault("transactionId %s acked twice", it.TransactionID)
				continue
			}
			l.acked[it.TransactionID] = pushed{Partition: it.Partition, MessageID: p.MessageID}
			l.order = append(l.order, it.TransactionID)
			l.mu.Unlock()
		default:
			l.fault("fresh transactionId %s in %s answered status %q (error %s), want queued",
				it.TransactionID, it.Partition, p.Status, deref(p.Error))
		}
	}
}

// pushLoad runs workers goroutines that push unique items to queue until
// stop is set or ctx ends. Each request has 1 or 20 items (chosen at random
// when mixed, else always 1) spread over parts partitions named "p0"...
// transactionIds are "<prefix>-w<worker>-<request>-<item>", unique.
type pushLoad struct {
	n       *node
	queue   string
	prefix  string
	workers int
	parts   int
	mixed   bool
	led     *ledger
	seed    uint64

	stop   atomic.Bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (pl *pushLoad) start() {
	ctx, cancel := context.WithCancel(context.Background())
	pl.cancel = cancel
	for w := 0; w < pl.workers; w++ {
		pl.wg.Add(1)
		go func(w int) {
			defer pl.wg.Done()
			rng := rand.New(rand.NewPCG(pl.seed, uint64(w)))
			deadline := time.Now().Add(60 * time.Second)
			for i := 0; i < 200000 && !pl.stop.Load() && ctx.Err() == nil && time.Now().Before(deadline); i++ {
				size := 1
				if pl.mixed && rng.IntN(2) == 1 {
					size = 20
				}
				items := make([]pushItem, size)
				for j := range items {
					items[j] = pushItem{
						Queue: pl.queue, Partition: fmt.Sprintf("p%d", rng.IntN(pl.parts)),
						TransactionID: fmt.Sprintf("%s-w%d-%d-%d", pl.prefix, w, i, j),
						Payload:       map[string]any{"w": w, "i": i, "j": j},
					}
				}
				rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
				r, err := pl.n.do(rctx, "POST", "/api/v1/push", map[string]any{"items": items})
				rcancel()
				pl.led.record(items, r, err)
				if err != nil {
					// Node down (killed) or request cut: back off a little.
					if errors.Is(err, syscall.ECONNREFUSED) || pl.n.Exited() {
						time.Sleep(20 * time.Millisecond)
					}
				}
			}
		}(w)
	}
}

// halt stops the workers and waits for them.
func (pl *pushLoad) halt() {
	pl.stop.Store(true)
	pl.cancel()
	pl.wg.Wait()
}

// finish stops the workers but lets requests in flight complete.
func (pl *pushLoad) finish() {
	pl.stop.Store(true)
	pl.wg.Wait()
	pl.cancel()
}

// ---------------------------------------------------------------------------
// Reading everything back.

// drain pops every message of queue with a fresh consumer group (all from
// the beginning, batch 1000, several partitions per pop) and acks each pop
// in one /ack/batch, until a pop answers 204. It returns the messages in
// delivery order.
func drain(t testing.TB, c *api, queue, group string) []popMessage {
	t.Helper()
	var all []popMessage
	deadline := time.Now().Add(45 * time.Second)
	path := "/api/v1/pop/queue/" + queue
	q := qv("consumerGroup", group, "subscriptionMode", "all", "batch", "1000", "partitions", "16")
	for i := 0; ; i++ {
		if i >= 5000 || time.Now().After(deadline) {
			t.Fatalf("drain of %s: not empty after %d pops / 45 s (%d messages so far)", queue, i, len(all))
		}
		p := c.pop(path, q)
		if p == nil {
			break
		}
		all = append(all, p.Messages...)
		c.ackAll(p, &group)
	}
	return all
}

// checkExactlyOnce compares what drain read with the ledger: every acked
// item exactly once, in its partition; every maybe item at most once;
// nothing else. Per partition, each worker's items must come in push order.
// It returns the number of distinct items read.
func checkExactlyOnce(t testing.TB, led *ledger, got []popMessage) int {
	t.Helper()
	led.mu.Lock()
	defer led.mu.Unlock()
	count := map[string]int{}
	var missing, twice, phantom, misplaced, disorder []string
	type lane struct{ part, worker, prefix string }
	lastSeq := map[lane][3]int{}
	for _, m := range got {
		count[m.TransactionID]++
		if count[m.TransactionID] == 2 {
			twice = append(twice, m.TransactionID)
		}
		want, isAcked := led.acked[m.TransactionID]
		wantPart, isMaybe := led.maybe[m.TransactionID]
		switch {
		case isAcked:
			wantPart = want.Partition
			if m.ID != want.MessageID {
				misplaced = append(misplaced, fmt.Sprintf("%s: id %s, push answered %s", m.TransactionID, m.ID, want.MessageID))
			}
		case isMaybe:
		default:
			phantom = append(phantom, m.TransactionID)
			continue
		}
		if m.Partition != wantPart {
			misplaced = append(misplaced, fmt.Sprintf("%s: in partition %s, pushed to %s", m.TransactionID, m.Partition, wantPart))
		}
		// FIFO per (partition, worker): "<prefix>-w<w>-<i>-<j>".
		if parts := strings.Split(m.TransactionID, "-"); len(parts) >= 4 {
			k := len(parts)
			i, _ := strconv.Atoi(parts[k-2])
			j, _ := strconv.Atoi(parts[k-1])
			cyc := strings.Join(parts[:k-3], "-")
			ln := lane{m.Partition, parts[k-3], ""}
			rank := cycleRank(cyc)
			if rank < 0 {
				ln.prefix = cyc // not "c<N>": its own lane
			}
			seq := [3]int{rank, i, j}
			if prev, ok := lastSeq[ln]; ok && !less(prev, seq) {
				disorder = append(disorder, fmt.Sprintf("%s after %v in %s", m.TransactionID, prev, m.Partition))
			}
			lastSeq[ln] = seq
		}
	}
	for id := range led.acked {
		if count[id] == 0 {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	report := func(what string, ids []string) {
		if len(ids) == 0 {
			return
		}
		show := ids
		if len(show) > 20 {
			show = show[:20]
		}
		t.Errorf("%s: %d, e.g. %v", what, len(ids), show)
	}
	report("LOST: acknowledged (201 queued) items missing after restart", missing)
	report("DUPLICATED: items delivered more than once to one fresh group", twice)
	report("PHANTOM: items never pushed", phantom)
	report("MISPLACED: items with the wrong partition or message id", misplaced)
	report("OUT OF ORDER: items of one producer out of push order within a partition", disorder)
	return len(count)
}

// cycleRank orders transactionId prefixes "c1" < "c2" < ...; -1 for any
// other prefix.
func cycleRank(prefix string) int {
	if strings.HasPrefix(prefix, "c") {
		if n, err := strconv.Atoi(prefix[1:]); err == nil {
			return n
		}
	}
	return -1
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Looking at the files of a node.

type snapInfo struct {
	ID    string
	Index uint64
	Term  uint64
}

// snapshots lists the complete snapshots under DATA/raft/snapshots, newest
// (highest index) first.
func snapshots(dataDir string) []snapInfo {
	dir := filepath.Join(dataDir, "raft", "snapshots")
	ents, _ := os.ReadDir(dir)
	var out []snapInfo
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m snapInfo
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "state.bin")); err != nil {
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index > out[j].Index })
	return out
}

// raftLogBounds reads the first and last index of the Raft log in
// DATA/raft/wal (raft-wal) or DATA/raft/raft.db. The node must not be
// running (both hold a lock).
func raftLogBounds(dataDir string) (first, last uint64, err error) {
	if dir := filepath.Join(dataDir, "raft", "wal"); fileExists(dir) {
		w, err := wal.Open(dir)
		if err != nil {
			return 0, 0, err
		}
		defer w.Close()
		if first, err = w.FirstIndex(); err != nil {
			return 0, 0, err
		}
		last, err = w.LastIndex()
		return first, last, err
	}
	db, err := bolt.Open(filepath.Join(dataDir, "raft", "raft.db"), 0o600,
		&bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		if b == nil {
			return errors.New("no logs bucket")
		}
		c := b.Cursor()
		if k, _ := c.First(); len(k) == 8 {
			first = binary.BigEndian.Uint64(k)
		}
		if k, _ := c.Last(); len(k) == 8 {
			last = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return first, last, err
}

// metric reads one unlabelled sample from /metrics/prometheus.
func (a *api) metric(name string) float64 {
	a.t.Helper()
	r := a.mustStatus(200, "GET", "/metrics/prometheus", nil)
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				a.t.Fatalf("metric %s: %q", name, line)
			}
			return v
		}
	}
	a.t.Fatalf("metric %s not found in /metrics/prometheus", name)
	return 0
}

// copyDir copies a directory tree of regular files.
func copyDir(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
}

// repushDuplicates re-pushes acked items (same queue, partition and
// transactionId) and requires every one to answer "duplicate" with the
// original message_id. Transport errors are retried a few times (the push
// is idempotent by its transactionId).
func repushDuplicates(t testing.TB, n *node, led *ledger, queue string, ids []string) {
	t.Helper()
	if len(ids) == 0 {
		return
	}
	led.mu.Lock()
	items := make([]pushItem, len(ids))
	want := make([]pushed, len(ids))
	for i, id := range ids {
		want[i] = led.acked[id]
		items[i] = pushItem{Queue: queue, Partition: want[i].Partition, TransactionID: id, Payload: "again"}
	}
	led.mu.Unlock()
	var r *response
	var err error
	for try := 0; try < 5; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r, err = n.do(ctx, "POST", "/api/v1/push", map[string]any{"items": items})
		cancel()
		if err == nil && r.Status < 500 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("re-push of %d acked items: %v", len(items), err)
	}
	if r.Status != http.StatusCreated {
		t.Fatalf("re-push of %d acked items: %s", len(items), r)
	}
	var res []pushResult
	r.decode(t, &res)
	if len(res) != len(items) {
		t.Fatalf("re-push of %d items answered %d", len(items), len(res))
	}
	bad := 0
	for i, p := range res {
		if p.Status != "duplicate" || p.MessageID != want[i].MessageID {
			bad++
			if bad <= 10 {
				t.Errorf("re-push after restart of acked %s (partition %s): status %q message_id %s; want \"duplicate\" with the original message_id %s",
					ids[i], want[i].Partition, p.Status, p.MessageID, want[i].MessageID)
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d of %d re-pushed acked items were not answered duplicate", bad, len(items))
	}
	// Whatever a wrong answer stored must be accounted for: an item answered
	// "queued" again now exists twice, and the drain will say so.
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

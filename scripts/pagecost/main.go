package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	msgs := flag.Int("msgs", 2_000_000, "messages to write")
	batch := flag.Int("batch", 300, "messages a batch (one log write and fsync)")
	parts := flag.Int("parts", 16, "partitions the batch's messages are spread over")
	entry := flag.Int("entry", 400, "bytes a message takes in the log")
	record := flag.Int("record", 311, "bytes a message's record takes in its partition's file")
	cpuCap := flag.Float64("cap", 0, "run in a cgroup v1 cpu group capped at this many cores, 10 ms period (0: no cap)")
	dir := flag.String("dir", "", "write here and keep the files (default: a new temp dir under -tmp, removed at the end)")
	dir0 := flag.String("tmp", "", "where the temp dir goes (default: $TMPDIR or /tmp; put it on the disk the nodes use)")
	flag.Parse()
	if *batch < *parts || *msgs < *batch {
		fail(fmt.Errorf("-batch must be at least -parts and -msgs at least -batch"))
	}
	if *cpuCap > 0 {
		leave, err := capSelf(*cpuCap)
		if err != nil {
			fail(err)
		}
		defer leave()
	}
	work := *dir
	if work == "" {
		d, err := os.MkdirTemp(*dir0, "pagecost.")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		work = d
	}
	r, err := run(work, *msgs, *batch, *parts, *entry, *record)
	if err != nil {
		fail(err)
	}
	n := float64(r.msgs)
	fmt.Printf("pagecost: %d messages, %d a batch over %d partitions, %d+%d+32 bytes each\n", r.msgs, *batch, *parts, *entry, *record)
	fmt.Printf("  CPU %.2f µs/msg (writes %.2f, fsyncs %.2f); wall %.2f µs/msg\n",
		r.cpu.Seconds()*1e6/n, r.writeCPU.Seconds()*1e6/n, r.syncCPU.Seconds()*1e6/n, r.wall.Seconds()*1e6/n)
}

type result struct {
	msgs                   int
	cpu, writeCPU, syncCPU time.Duration
	wall                   time.Duration
}

func run(dir string, msgs, batch, parts, entry, record int) (result, error) {
	wal, err := os.Create(filepath.Join(dir, "wal"))
	if err != nil {
		return result{}, err
	}
	defer wal.Close()
	type part struct {
		log, idx     *os.File
		logAt, idxAt int64
	}
	ps := make([]part, parts)
	for i := range ps {
		base := filepath.Join(dir, strconv.Itoa(i))
		if ps[i].log, err = os.Create(base + ".log"); err != nil {
			return result{}, err
		}
		defer ps[i].log.Close()
		if ps[i].idx, err = os.Create(base + ".index"); err != nil {
			return result{}, err
		}
		defer ps[i].idx.Close()
	}
	walBuf := filled(entry * batch)
	recBuf := filled(record * batch / parts)
	idxBuf := filled(32 * batch / parts)
	var r result
	var walAt int64
	start, cpu0 := time.Now(), cpuTime()
	for r.msgs < msgs {
		c := cpuTime()
		if _, err := wal.WriteAt(walBuf, walAt); err != nil {
			return r, err
		}
		walAt += int64(len(walBuf))
		c2 := cpuTime()
		if err := wal.Sync(); err != nil {
			return r, err
		}
		c3 := cpuTime()
		for i := range ps {
			p := &ps[i]
			if _, err := p.log.WriteAt(recBuf, p.logAt); err != nil {
				return r, err
			}
			if _, err := p.idx.WriteAt(idxBuf, p.idxAt); err != nil {
				return r, err
			}
			p.logAt += int64(len(recBuf))
			p.idxAt += int64(len(idxBuf))
		}
		r.writeCPU += c2 - c + cpuTime() - c3
		r.syncCPU += c3 - c2
		r.msgs += batch
	}
	r.cpu, r.wall = cpuTime()-cpu0, time.Since(start)
	return r, nil
}

func filled(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// cpuTime is the process's user and system CPU so far.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// capSelf moves this process into a new cgroup v1 cpu group capped at
// cores, and returns how to leave and remove it.
func capSelf(cores float64) (func(), error) {
	g := filepath.Join("/sys/fs/cgroup/cpu", fmt.Sprintf("pagecost-%d", os.Getpid()))
	if err := os.Mkdir(g, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w (needs root and cgroup v1's cpu controller)", err)
	}
	write := func(file, v string) error { return os.WriteFile(filepath.Join(g, file), []byte(v), 0o644) }
	if err := write("cpu.cfs_period_us", "10000"); err != nil {
		os.Remove(g)
		return nil, err
	}
	if err := write("cpu.cfs_quota_us", strconv.Itoa(int(cores*10000))); err != nil {
		os.Remove(g)
		return nil, err
	}
	if err := write("cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
		os.Remove(g)
		return nil, err
	}
	return func() {
		os.WriteFile("/sys/fs/cgroup/cpu/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0o644)
		os.Remove(g)
	}, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pagecost:", err)
	os.Exit(1)
}

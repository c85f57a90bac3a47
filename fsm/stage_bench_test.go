package fsm

import (
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"

	"github.com/queen-node/queen-node/command"
)

// Per-stage budgets (issue 22), in CPU time (one fdatasync serves a whole
// entry, and a wait for the disk is not CPU):
//
//   BenchmarkStageAppendApplyPush100  one replica's log append (raft-wal,
//                                     fsynced) plus apply of a push entry of
//                                     100 messages of 256 bytes: ≤ 3 µs per message
//   BenchmarkApplyTransaction         a transaction of one ack and one KV
//                                     put, applied: ≤ 20 µs (its ns/txn)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkStageAppendApplyPush100(b *testing.B) {
	h := newHarness(&testing.T{})
	w, err := wal.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ReportAllocs()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		cmd := pushCmd("q", 100, i*100)
		cmd.StampUs = h.now
		data, err := command.Encode(cmd)
		if err != nil {
			b.Fatal(err)
		}
		h.index++
		l := &raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data}
		if err := w.StoreLogs([]*raft.Log{l}); err != nil {
			b.Fatal(err)
		}
		h.f.ApplyBatch([]*raft.Log{l})
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*100)/1000, "cpu-µs/msg")
}

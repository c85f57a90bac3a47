package httpapi

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
)

// Per-stage budgets (issue 22): what the node a client calls spends on a
// push of 100 messages of 256 bytes before and after the write path, in
// CPU: decoding, validating, shaping the command and writing the answer.
// The node's Apply is a canned answer here (the log and apply stages have
// their own benchmarks). Budget: 2 µs of CPU per message.

// stageBackend answers every Apply with one canned result.
type stageBackend struct {
	*fakeBackend
	res proto.Message
}

func (s *stageBackend) Apply(context.Context, *command.Command) (proto.Message, error) {
	return s.res, nil
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkStageFrontPush100(b *testing.B) {
	res := &command.PushResult{}
	var items []string
	for i := range 100 {
		res.Items = append(res.Items, &command.PushItemResult{Status: command.PushItemResult_QUEUED,
			MessageId: fakePartitionID[:], PartitionId: fakePartitionID[:], Offset: uint64(i)})
		items = append(items, fmt.Sprintf(`{"queue":"orders","partition":"p%d","transactionId":"t%d","payload":{"d":"%s"}}`,
			i%16, i, strings.Repeat("x", 248)))
	}
	body := `{"items":[` + strings.Join(items, ",") + `]}`
	api := New(Config{Backend: &stageBackend{fakeBackend: newFakeBackend(b), res: res}, Logger: discardLogger(), Version: "test"})
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	cpu := cpuTime()
	for b.Loop() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/api/v1/push", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		api.ServeHTTP(rec, req)
		if rec.Code != 201 {
			b.Fatalf("push: %d %s", rec.Code, rec.Body)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*100)/1000, "cpu-µs/msg")
}

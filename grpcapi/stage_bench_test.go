package grpcapi

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/grpcapi/internalpb"
)

// Per-stage budget (issue 22): forwarding a push of 100 messages of 256
// bytes from a follower to the leader (the internal Forward.Apply over
// loopback gRPC, both ends in this process, the leader's apply a canned
// answer), in CPU: ≤ 1 µs per message.

type cannedLeader struct{ res *command.Response }

func (l cannedLeader) ApplyLocal(context.Context, *command.Command) (proto.Message, error) {
	return l.res, nil
}
func (l cannedLeader) PopLocal(context.Context, *command.Pop, time.Duration) (*command.PopResult, error) {
	return nil, nil
}
func (l cannedLeader) ReadIndex(context.Context) (uint64, error) { return 0, nil }
func (l cannedLeader) QueryLocal(context.Context, *command.Query) (*command.QueryResult, error) {
	return nil, nil
}
func (l cannedLeader) RemoveServerLocal(context.Context, string, string) error { return nil }

func BenchmarkStageForwardPush100(b *testing.B) {
	items := make([]*command.PushItem, 100)
	res := &command.PushResult{}
	for i := range items {
		items[i] = &command.PushItem{Queue: "orders", Partition: fmt.Sprint("p", i%16), TransactionId: fmt.Sprint("t", i),
			Payload: []byte(`{"d":"` + strings.Repeat("x", 248) + `"}`), MessageId: make([]byte, 16)}
		res.Items = append(res.Items, &command.PushItemResult{Status: command.PushItemResult_QUEUED, MessageId: make([]byte, 16),
			PartitionId: make([]byte, 16), Offset: uint64(i)})
	}
	wrapped := command.Wrap(res)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	internalpb.RegisterForwardServer(srv, NewForwardServer(cannedLeader{res: wrapped}))
	go srv.Serve(ln)
	defer srv.Stop()
	fc := NewForwardClient(nil)
	defer fc.Close()
	cmd := &command.Command{Body: &command.Command_Push{Push: &command.Push{Items: items}}}
	ctx := context.Background()
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := fc.Apply(ctx, ln.Addr().String(), cmd); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*100)/1000, "cpu-µs/msg")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package queen_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
	pb "github.com/queen-node/queen-node/grpcapi/queenpb"
)

var fast = queen.WithRetry(queen.RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond})

const pushed = `[{"index":0,"status":"queued","transactionId":"t","messageId":"m","partitionId":"p"}]`

// fakeHTTP answers each request with the next status of script (the last
// one repeats) and counts the requests.
func fakeHTTP(t *testing.T, script ...int) (*queen.Client, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(calls.Add(1)) - 1
		code := script[min(i, len(script)-1)]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		switch {
		case code >= 500:
			w.Write([]byte(`{"error":"no leader: the cluster is electing one","code":"no_leader"}`))
		case code >= 400:
			w.Write([]byte(`{"error":"Queue must be a string"}`))
		default:
			w.Write([]byte(pushed))
		}
	}))
	t.Cleanup(srv.Close)
	c, err := queen.New(srv.URL, fast)
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

func TestHTTPRetryPolicy(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	c, calls := fakeHTTP(t, 503, 500, 201)
	if _, err := c.Queue("q").Push(ctx, queen.Msg{}); err != nil || calls.Load() != 3 {
		t.Fatalf("503, 500, 201: %v after %d calls, want success after 3", err, calls.Load())
	}
	c, calls = fakeHTTP(t, 400)
	_, err := c.Queue("q").Push(ctx, queen.Msg{})
	var qe *queen.Error
	if !errors.As(err, &qe) || qe.Status != 400 || queen.Code(err) != codes.InvalidArgument || qe.Retryable() || calls.Load() != 1 {
		t.Fatalf("400: %v after %d calls, want one call and INVALID_ARGUMENT", err, calls.Load())
	}
	c, calls = fakeHTTP(t, 503)
	_, err = c.Queue("q").Push(ctx, queen.Msg{})
	if queen.Code(err) != codes.Unavailable || calls.Load() != 4 {
		t.Fatalf("503 forever: %v after %d calls, want 4 (the policy's attempts)", err, calls.Load())
	}
	// Nothing listening: the connection cannot be made, which is retried.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c, _ = queen.New("http://"+addr, fast)
	if _, err := c.Queue("q").Push(ctx, queen.Msg{}); queen.Code(err) != codes.Unavailable {
		t.Fatalf("refused connection: %v", err)
	}
}

// fakeQueen answers Push with the next code of script.
type fakeQueen struct {
	pb.UnimplementedQueenServer
	script []codes.Code
	calls  atomic.Int32
}

func (f *fakeQueen) Push(ctx context.Context, in *pb.PushRequest) (*pb.PushResponse, error) {
	i := int(f.calls.Add(1)) - 1
	if c := f.script[min(i, len(f.script)-1)]; c != codes.OK {
		return nil, status.Error(c, "scripted "+c.String())
	}
	return &pb.PushResponse{Results: []*pb.PushResult{{Status: pb.PushStatus_PUSH_STATUS_QUEUED}}}, nil
}

func fakeGRPC(t *testing.T, script ...codes.Code) (*queen.Client, *fakeQueen) {
	f := &fakeQueen{script: script}
	return serveGRPC(t, f), f
}

// serveGRPC serves a fake queen.v1 and dials it.
func serveGRPC(t *testing.T, fake pb.QueenServer) *queen.Client {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterQueenServer(s, fake)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	c, err := queen.New("grpc://"+l.Addr().String(), fast)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGRPCRetryPolicy(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	c, f := fakeGRPC(t, codes.Unavailable, codes.OK)
	if _, err := c.Queue("q").Push(ctx, queen.Msg{}); err != nil || f.calls.Load() != 2 {
		t.Fatalf("UNAVAILABLE then OK: %v after %d calls", err, f.calls.Load())
	}
	for _, code := range []codes.Code{codes.InvalidArgument, codes.Internal, codes.DeadlineExceeded, codes.ResourceExhausted} {
		c, f := fakeGRPC(t, code, codes.OK)
		_, err := c.Queue("q").Push(ctx, queen.Msg{})
		if queen.Code(err) != code || f.calls.Load() != 1 {
			t.Fatalf("%v: %v after %d calls, want one call", code, err, f.calls.Load())
		}
	}
}

// The real broker's refusals arrive with the same code on both transports
// and are not retried.
func TestErrorMapping(t *testing.T) {
	transports(t, func(t *testing.T, c *queen.Client, _ *grpctest.Node) {
		ctx := ctxT(t, 10*time.Second)
		_, err := c.Queue("q").Push(ctx, queen.Msg{TraceID: "not-a-uuid"})
		var qe *queen.Error
		if !errors.As(err, &qe) || qe.Code != codes.InvalidArgument || qe.Retryable() {
			t.Fatalf("bad trace id: %v", err)
		}
		_, err = c.KV().Get(ctx, "Bad-NS", "k")
		if !errors.As(err, &qe) || qe.Code != codes.InvalidArgument || qe.Reason != "kv_bad_namespace" {
			t.Fatalf("bad namespace: %#v", err)
		}
	})
}

// hang answers nothing until the client goes away. (The body is read
// first: only then does the server notice a closed connection.)
func hang(r *http.Request) {
	io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

// server answers each request with handle(call number from 0).
func server(t *testing.T, handle func(i int, w http.ResponseWriter, r *http.Request)) string {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(int(calls.Add(1))-1, w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRetryRateLimited(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	c, calls := fakeHTTP(t, 429, 201)
	if _, err := c.Queue("q").Push(ctx, queen.Msg{}); queen.Code(err) != codes.ResourceExhausted || calls.Load() != 1 {
		t.Fatalf("429 without RateLimited: %v after %d calls, want one call", err, calls.Load())
	}
	var n atomic.Int32
	url := server(t, func(i int, w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if i == 0 {
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"KV read rate exceeded","code":"rate_limited"}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(pushed))
	})
	c, _ = queen.New(url, queen.WithRetry(queen.RetryPolicy{BaseDelay: time.Millisecond, RateLimited: true}))
	if _, err := c.Queue("q").Push(ctx, queen.Msg{}); err != nil || n.Load() != 2 {
		t.Fatalf("429 with RateLimited: %v after %d calls, want success after 2", err, n.Load())
	}
}

// MaxAttempts < 0 retries until the context ends, telling OnRetry each time.
func TestRetryUntilContextEnds(t *testing.T) {
	var calls atomic.Int32
	url := server(t, func(i int, w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	var retried atomic.Int32
	c, _ := queen.New(url, queen.WithRetry(queen.RetryPolicy{MaxAttempts: -1, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond,
		OnRetry: func(err error) { retried.Add(1) }}))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Queue("q").Push(ctx, queen.Msg{})
	if queen.Code(err) != codes.Unavailable || calls.Load() < 10 || retried.Load() < calls.Load()-1 {
		t.Fatalf("503 forever: %v after %d calls, %d retries told", err, calls.Load(), retried.Load())
	}
}

// An attempt that gets no answer within AttemptTimeout is retried, and the
// last one fails with DEADLINE_EXCEEDED; a connection that breaks before
// the answer is UNAVAILABLE and retried.
func TestRetryAttemptTimeoutAndLostConnection(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	url := server(t, func(i int, w http.ResponseWriter, r *http.Request) {
		switch i {
		case 0:
			hang(r) // never answers
			return
		case 1:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // breaks before the answer
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(pushed))
	})
	var told []codes.Code
	c, _ := queen.New(url, queen.WithRetry(queen.RetryPolicy{BaseDelay: time.Millisecond, AttemptTimeout: 200 * time.Millisecond,
		OnRetry: func(err error) { told = append(told, queen.Code(err)) }}))
	if _, err := c.Queue("q").Push(ctx, queen.Msg{}); err != nil || len(told) != 2 ||
		told[0] != codes.DeadlineExceeded || told[1] != codes.Unavailable {
		t.Fatalf("push: %v, retries told %v; want success after DEADLINE_EXCEEDED and UNAVAILABLE", err, told)
	}
	url = server(t, func(i int, w http.ResponseWriter, r *http.Request) { hang(r) })
	c, _ = queen.New(url, queen.WithRetry(queen.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, AttemptTimeout: 100 * time.Millisecond}))
	start := time.Now()
	_, err := c.Queue("q").Push(ctx, queen.Msg{})
	var qe *queen.Error
	if !errors.As(err, &qe) || qe.Code != codes.DeadlineExceeded || time.Since(start) > 2*time.Second {
		t.Fatalf("no answer ever: %v after %v", err, time.Since(start))
	}
}

package queen_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/queen-node/queen-node/auth"
	queen "github.com/queen-node/queen-node/client"
	"github.com/queen-node/queen-node/grpcapi/grpctest"
)

const clientSecret = "a-test-secret-of-enough-length-32b"

func clientToken(sub, role string) (string, error) {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(clientSecret)}, nil)
	if err != nil {
		return "", err
	}
	return jwt.Signed(s).Claims(map[string]any{"sub": sub, "role": role, "exp": time.Now().Add(time.Minute).Unix()}).Serialize()
}

// The client carries a token, static or from a callback, on both
// transports; without one the broker refuses it.
func TestTheClientCarriesAToken(t *testing.T) {
	v, err := auth.New(auth.Config{Enabled: true, Secret: clientSecret})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	n := grpctest.Start(t, grpctest.Options{Auth: v})
	for _, tr := range []string{"http", "grpc"} {
		t.Run(tr, func(t *testing.T) {
			ctx := ctxT(t, 20*time.Second)
			if _, err := dialNode(t, n, tr).Queue("tq").Push(ctx, queen.Msg{Data: 1}); err == nil {
				t.Fatal("a push without a token was taken")
			}
			static, err := clientToken("producer-"+tr, "write-only")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dialNode(t, n, tr, queen.WithToken(static)).Queue("tq-"+tr).Push(ctx, queen.Msg{Data: 1}); err != nil {
				t.Fatalf("push with a static token: %v", err)
			}
			var calls atomic.Int32
			src := func(context.Context) (string, error) { calls.Add(1); return clientToken("worker", "read-write") }
			msgs, err := dialNode(t, n, tr, queen.WithTokenSource(src)).Queue("tq-"+tr).Pop(ctx, queen.PopOptions{Batch: 5})
			if err != nil || len(msgs) != 1 || calls.Load() == 0 {
				t.Fatalf("pop with a token source: %v %v (called %d)", msgs, err, calls.Load())
			}
			failing := func(context.Context) (string, error) { return "", errors.New("vault is down") }
			if _, err := dialNode(t, n, tr, queen.WithTokenSource(failing)).Queue("tq").Push(ctx, queen.Msg{Data: 1}); err == nil {
				t.Fatal("a call whose token source failed was sent")
			}
		})
	}
}

package idempotency

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/queen-node/queen-node/command"
)

func TestNew(t *testing.T) {
	if idem, err := New("", "POST /x", []byte("{}"), time.Hour); idem != nil || err != nil {
		t.Fatalf("no key: %v %v", idem, err)
	}
	if _, err := New(strings.Repeat("k", MaxKeyBytes+1), "POST /x", nil, time.Hour); !errors.Is(err, ErrKeyTooLong) {
		t.Fatalf("long key: %v", err)
	}
	if _, err := New("k\n", "POST /x", nil, time.Hour); !errors.Is(err, ErrKeyNotPrintable) {
		t.Fatalf("control byte: %v", err)
	}
	a, _ := New("k", "POST /api/v1/push", []byte(`{"items":[]}`), 90*time.Minute)
	same, _ := New("k", "POST /api/v1/push", []byte(`{"items":[]}`), time.Hour)
	otherBody, _ := New("k", "POST /api/v1/push", []byte(`{"items":[ ]}`), time.Hour)
	otherRoute, _ := New("k", "POST /api/v1/kv", []byte(`{"items":[]}`), time.Hour)
	if a.TtlSeconds != 5400 || !bytes.Equal(a.RequestHash, same.RequestHash) {
		t.Fatalf("same request: %v %v", a, same)
	}
	if bytes.Equal(a.RequestHash, otherBody.RequestHash) || bytes.Equal(a.RequestHash, otherRoute.RequestHash) {
		t.Fatal("another request hashed the same")
	}
}

func TestInFlight(t *testing.T) {
	var f InFlight
	done, err := f.Begin("k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Begin("k"); !errors.Is(err, ErrInFlight) {
		t.Fatalf("second claim: %v", err)
	}
	if other, err := f.Begin("j"); err != nil {
		t.Fatal(err)
	} else {
		other()
	}
	done()
	if again, err := f.Begin("k"); err != nil {
		t.Fatalf("after release: %v", err)
	} else {
		again()
	}
	for i := 0; i < 3; i++ { // no key claims nothing
		if _, err := f.Begin(""); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOutcome(t *testing.T) {
	idem := &command.Idempotency{Key: "k", RequestHash: []byte("h")}
	fresh := &command.PushResult{Items: []*command.PushItemResult{{TransactionId: "t"}}}
	if out, replayed, err := Outcome(idem, fresh); err != nil || replayed || out != fresh {
		t.Fatalf("a fresh result: %v %v %v", out, replayed, err)
	}
	stored, _ := proto.Marshal(command.Wrap(fresh))
	rp := &command.Replay{Outcome: &command.StoredOutcome{RequestHash: []byte("h"), Result: stored}}
	out, replayed, err := Outcome(idem, rp)
	if err != nil || !replayed || !proto.Equal(out, fresh) {
		t.Fatalf("a replay: %v %v %v", out, replayed, err)
	}
	if _, _, err := Outcome(&command.Idempotency{Key: "k", RequestHash: []byte("other")}, rp); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("another request with the key: %v", err)
	}
	refusal := &command.Refusal{Kind: "invalid", Error: "bad"}
	res := Refused(idem, refusal)
	if res.Idempotency != idem || !proto.Equal(res.GetIdempotencyRecord().Refusal, refusal) {
		t.Fatalf("Refused: %v", res)
	}
}

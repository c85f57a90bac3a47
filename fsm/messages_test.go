package fsm

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/queen-node/queen-node/atrest"
	"github.com/queen-node/queen-node/command"
)

// Every read view of the message routes hands out plaintext: the message
// detail and list (with their dead letters), a dead letter by id, traces
// by name with their message's payload, and a replayed message.
func TestMessageViewsOpenSealedPayloads(t *testing.T) {
	h := newHarness(t)
	key := make([]byte, 32)
	rand.Read(key)
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("k1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kr, err := atrest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	h.f.opts.Keys = kr
	plain := []byte(`{"secret":"S-1"}`)
	it := item("vault", "", "v1")
	it.Payload = kr.Seal(plain)
	pid := h.push(it)[0].PartitionId
	pr := h.pop("vault", batch(1))
	h.ack(h.ackOf(pr, 0, command.AckStatus_DLQ))
	h.apply(&command.Command{Body: &command.Command_RecordTrace{RecordTrace: &command.RecordTrace{PartitionId: pid, Seq: 1,
		TransactionId: "v1", TraceNames: []string{"n"}, Data: []byte(`{}`), TraceId: newMsgID()}}})
	check := func(what string, got []byte) {
		t.Helper()
		if !bytes.Equal(got, plain) {
			t.Fatalf("%s: %q, want the plaintext", what, got)
		}
	}
	var id []byte
	h.read(func(rd *Reader) {
		if m := rd.Reader.Message(pid, 1); bytes.Contains(m.Payload, []byte("S-1")) {
			t.Fatal("the stored payload is not sealed: the test proves nothing")
		}
		d, err := rd.MessageDetail(pid, "v1", h.now)
		if err != nil || d == nil {
			t.Fatal(d, err)
		}
		check("detail", d.Message.Payload)
		check("detail's dead letter", d.DeadLetters[0].Payload)
		rows, _, err := rd.ListMessages(MessageFilter{Limit: 10, FromUs: 1, ToUs: h.now}, h.now)
		if err != nil || len(rows) != 1 {
			t.Fatal(rows, err)
		}
		check("list", rows[0].Message.Payload)
		id = d.DeadLetters[0].RecordId
		dl, err := rd.DeadLetterByID(id)
		if err != nil {
			t.Fatal(err)
		}
		check("dead letter by id", dl.Payload)
		trs, _, err := rd.TracesByName("n", nil, 0, 10)
		if err != nil || len(trs) != 1 {
			t.Fatal(trs, err)
		}
		check("trace by name", trs[0].Payload)
	})
	res := h.apply(&command.Command{Body: &command.Command_ReplayDeadLetter{ReplayDeadLetter: &command.ReplayDeadLetter{
		RecordId: id, SourceQueue: "vault", MessageId: newMsgID()}}}).(*command.ReplayResult)
	if res.Verdict != command.ReplayResult_MOVED {
		t.Fatalf("replay %v", res)
	}
	h.read(func(rd *Reader) {
		ms, err := rd.Messages(res.PartitionId, res.Offset, res.Offset)
		if err != nil || len(ms) != 1 {
			t.Fatal(ms, err)
		}
		check("replayed message", ms[0].Payload)
	})
}

package command

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Every arm of Response round-trips through Wrap and Unwrap: a new
// command's result needs nothing but its arm in results.proto.
func TestWrapUnwrapEveryResultArm(t *testing.T) {
	fields := (&Response{}).ProtoReflect().Descriptor().Oneofs().ByName("result").Fields()
	if fields.Len() == 0 {
		t.Fatal("Response has no result arms")
	}
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		mt, err := protoregistry.GlobalTypes.FindMessageByName(fd.Message().FullName())
		if err != nil {
			t.Fatal(err)
		}
		m := mt.New().Interface()
		w := Wrap(m)
		if got := w.ProtoReflect().WhichOneof(fd.ContainingOneof()); got == nil || got.Number() != fd.Number() {
			t.Fatalf("%s wrapped into arm %v", fd.Message().FullName(), got)
		}
		b, err := proto.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		back := &Response{}
		if err := proto.Unmarshal(b, back); err != nil {
			t.Fatal(err)
		}
		if u := Unwrap(back); u.ProtoReflect().Descriptor().FullName() != fd.Message().FullName() {
			t.Fatalf("%s unwrapped as %s", fd.Message().FullName(), u.ProtoReflect().Descriptor().FullName())
		}
	}
	if r := (&Response{InternalError: "x"}); Unwrap(r) != r {
		t.Fatal("a Response without a result does not unwrap to itself")
	}
	if w := Wrap(nil); w == nil || w.Result != nil {
		t.Fatalf("Wrap(nil) = %v", w)
	}
}

func TestWrapPanicsOnAResultWithoutAnArm(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Wrap of a message that is no result did not panic")
		}
	}()
	Wrap(&PushItem{})
}

// The values clients read are the enums' names in lower case; the zero
// reasons read as nothing.
func TestTextOfEnums(t *testing.T) {
	for got, want := range map[string]string{
		AckStatus_COMPLETED.Text(): "completed", AckStatus_DLQ.Text(): "dlq",
		Reason_REJECTED_ACK.Text(): "rejected_ack", Reason_KV_PRECONDITION.Text(): "kv_precondition", Reason_NONE.Text(): "",
		TimerResult_ABSENT.Text(): "absent", TxnItemResult_TIMER.Text(): "timer", PushItemResult_DUPLICATE.Text(): "duplicate",
		KVResult_VERSION.Text(): "version", KVResult_APPLIED.Text(): "",
		AckStatus(99).Text(): "unknown",
	} {
		if got != want {
			t.Errorf("text %q, want %q", got, want)
		}
	}
}

// Encode stamps the format; Decode refuses another one, and an entry written
// before formats were recorded reads as format 1.
func TestEncodeDecodeFormat(t *testing.T) {
	b, err := Encode(&Command{StampUs: 5, Body: &Command_Noop{Noop: &Noop{}}})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := Decode(b, "entry 1")
	if err != nil || cmd.StampUs != 5 || cmd.Format != LogFormat {
		t.Fatalf("round trip: %v %v", cmd, err)
	}
	old, _ := proto.Marshal(&Command{StampUs: 5, Body: &Command_Noop{Noop: &Noop{}}}) // no format field
	var fe *FormatError
	if _, err := Decode(old, "entry 2"); !errors.As(err, &fe) || fe.Found != 1 || fe.Supported != LogFormat {
		t.Fatalf("an unversioned entry: %v", err)
	}
	newer, _ := proto.Marshal(&Command{Format: LogFormat + 1})
	if _, err := Decode(newer, "entry 3"); !errors.As(err, &fe) || fe.Found != LogFormat+1 {
		t.Fatalf("a newer entry: %v", err)
	}
	if _, err := Decode([]byte{0xff, 0xff}, "entry 4"); err == nil || errors.As(err, &fe) {
		t.Fatalf("garbage: %v", err)
	}
}

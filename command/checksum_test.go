package command

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
)

func sampleEntry(t *testing.T) []byte {
	t.Helper()
	b, err := Encode(&Command{StampUs: 1_700_000_000_000_000, Actor: "svc-payments", Body: &Command_Push{Push: &Push{
		Items: []*PushItem{{Queue: "orders", Partition: "p1", TransactionId: "t-1", Payload: []byte(`{"amount":42}`),
			MessageId: make([]byte, 16)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// One flipped bit anywhere in an entry, its checksum included, never
// decodes to a command: the checksum catches every single-bit error.
func TestEveryFlippedBitOfAnEntryIsRefused(t *testing.T) {
	b := sampleEntry(t)
	if cmd, err := Decode(b, "entry 1"); err != nil || cmd.GetPush().Items[0].Queue != "orders" || cmd.Crc == nil {
		t.Fatalf("intact entry: %v %v", cmd, err)
	}
	if err := CheckEntry(b); err != nil {
		t.Fatalf("CheckEntry of an intact entry: %v", err)
	}
	for i := range len(b) * 8 {
		bad := append([]byte(nil), b...)
		bad[i/8] ^= 1 << (i % 8)
		cmd, err := Decode(bad, "entry 1")
		if err == nil {
			t.Fatalf("bit %d flipped: decoded %v", i, cmd)
		}
		var fe *FormatError
		if !errors.Is(err, ErrCorruptEntry) && !errors.As(err, &fe) {
			t.Fatalf("bit %d flipped: %v, want ErrCorruptEntry", i, err)
		}
		if CheckEntry(bad) == nil {
			t.Fatalf("bit %d flipped: CheckEntry passes it", i)
		}
	}
	if _, err := Decode(b[:len(b)-1], "entry 1"); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("a torn entry: %v", err)
	}
}

// Entries of format 2 carry no checksum and still read (a log written
// before checksums); a checksummed entry whose format field says 2 is
// damaged, not old.
func TestFormatTwoEntriesReadWithoutAChecksum(t *testing.T) {
	old, _ := proto.Marshal(&Command{StampUs: 5, Format: 2, Body: &Command_Noop{Noop: &Noop{}}})
	cmd, err := Decode(old, "entry 7")
	if err != nil || cmd.StampUs != 5 {
		t.Fatalf("a format-2 entry: %v %v", cmd, err)
	}
	if err := CheckEntry(old); err != nil {
		t.Fatalf("CheckEntry of a format-2 entry: %v", err)
	}
	crc := uint32(7)
	mislabeled, _ := proto.Marshal(&Command{StampUs: 5, Format: 2, Crc: &crc})
	if _, err := Decode(mislabeled, "entry 8"); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("format 2 with a crc field: %v, want ErrCorruptEntry", err)
	}
	if CheckEntry(mislabeled) == nil {
		t.Fatal("CheckEntry passes format 2 with a crc field")
	}
	// An older node reads only the formats before: what this code writes
	// says LogFormat, so that node refuses it with a FormatError naming it.
	cmd, _ = Decode(sampleEntry(t), "entry 9")
	if cmd.Format != LogFormat || !ReadsLogFormat(2) || !ReadsLogFormat(3) || ReadsLogFormat(LogFormat+1) || !ReadsStateFormat(3) || ReadsStateFormat(2) {
		t.Fatalf("formats: entry %d, reads log 2 %v", cmd.Format, ReadsLogFormat(2))
	}
}

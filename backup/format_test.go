package backup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "b")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sample(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	body := strings.Repeat("snapshot bytes ", 100)
	if err := Write(&buf, Header{Index: 42, Term: 3, Size: int64(len(body)), StateFormat: 3}, strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestABackupRoundTrips(t *testing.T) {
	f, err := Open(writeFile(t, sample(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got bytes.Buffer
	got.ReadFrom(f.Snapshot())
	if f.Header.Index != 42 || f.Header.FormatVersion != FormatVersion || got.String() != strings.Repeat("snapshot bytes ", 100) {
		t.Fatalf("header %+v, body %q", f.Header, got.String()[:20])
	}
}

func TestBadBackupsAreRefusedWithTheirReason(t *testing.T) {
	good := sample(t)
	hl := int(binary.BigEndian.Uint32(good[len(Magic):]))
	otherVersion := bytes.Replace(append([]byte(nil), good...), []byte(`"formatVersion":1`), []byte(`"formatVersion":9`), 1)
	cases := []struct {
		name string
		file []byte
		want error
		text string
	}{
		{"empty", nil, ErrNotBackup, ""},
		{"another file", []byte("PK\x03\x04 a zip file, not a backup"), ErrNotBackup, ""},
		{"cut in the header", good[:len(Magic)+4+hl/2], ErrTruncated, ""},
		{"cut in the snapshot", good[:len(good)/2], ErrTruncated, ""},
		{"no checksum", good[:len(good)-32], ErrTruncated, ""},
		{"a flipped bit", func() []byte { b := append([]byte(nil), good...); b[len(b)-100] ^= 1; return b }(), ErrChecksum, ""},
		{"bytes after its end", append(append([]byte(nil), good...), 0), ErrNotBackup, ""},
		{"another format version", otherVersion, nil, "format version 9"},
	}
	for _, c := range cases {
		_, err := Open(writeFile(t, c.file))
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) || (c.text != "" && !strings.Contains(err.Error(), c.text)) {
			t.Errorf("%s: %v, want %v %q", c.name, err, c.want, c.text)
		}
	}
}

func TestWriteRefusesAShortSnapshot(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, Header{Size: 100}, strings.NewReader("short")); err == nil {
		t.Fatal("a snapshot shorter than its size was written")
	}
}

// groupRecord is a backup record of group g of a cluster of n groups.
func groupRecord(t *testing.T, g, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	body := strings.Repeat(fmt.Sprint("group ", g, " "), 50)
	if err := Write(&buf, Header{Index: uint64(10 + g), Size: int64(len(body)), StateFormat: 6, Group: g, Groups: n}, strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A whole-cluster backup with --raft-groups: one record per group, each
// read back on its own; anything else is refused with its reason.
func TestABackupOfEveryGroupHoldsOneRecordPerGroup(t *testing.T) {
	var all []byte
	for g := range 3 {
		all = append(all, groupRecord(t, g, 3)...)
	}
	f, err := Open(writeFile(t, all))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Records) != 3 {
		t.Fatalf("%d records", len(f.Records))
	}
	for i, r := range f.Records {
		var got bytes.Buffer
		got.ReadFrom(f.SnapshotOf(i))
		if r.Header.Group != i || !strings.HasPrefix(got.String(), fmt.Sprint("group ", i, " ")) {
			t.Fatalf("record %d: %+v %q", i, r.Header, got.String()[:10])
		}
		// a record alone is a backup file of one group
		var one bytes.Buffer
		one.ReadFrom(f.RecordBytes(i))
		single, err := Open(writeFile(t, one.Bytes()))
		if err != nil || single.Header.Group != i {
			t.Fatalf("record %d alone: %v", i, err)
		}
		single.Close()
	}
	r0, r1, r2 := groupRecord(t, 0, 3), groupRecord(t, 1, 3), groupRecord(t, 2, 3)
	join := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	flipped := join(r0, r1, r2)
	flipped[len(r0)+len(r1)-40] ^= 1
	for _, c := range []struct {
		name string
		file []byte
		want error
	}{
		{"a group missing", join(r0, r2), ErrTruncated},
		{"a group twice", join(r0, r1, r1), ErrNotBackup},
		{"groups of two clusters", join(r0, r1, groupRecord(t, 2, 4)), ErrNotBackup},
		{"a flipped bit in the second", flipped, ErrChecksum},
		{"bytes after the last", append(join(r0, r1, r2), "junk"...), ErrNotBackup},
		{"a one-group backup followed by another", join(sample(t), sample(t)), ErrNotBackup},
	} {
		if _, err := Open(writeFile(t, c.file)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

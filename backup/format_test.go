package backup

import (
	"bytes"
	"encoding/binary"
	"errors"
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

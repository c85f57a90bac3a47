package atrest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/queen-node/queen-node/command"
)

func newKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, KeySize)
	rand.Read(k)
	return base64.StdEncoding.EncodeToString(k)
}

func writeKeys(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "keys")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadRefusesABadKeyFile(t *testing.T) {
	dir := t.TempDir()
	good := newKey(t)
	for name, text := range map[string]string{
		"empty":          "# nothing\n\n",
		"no key":         "k1\n",
		"three fields":   "k1 " + good + " extra\n",
		"bad name":       "k/1 " + good + "\n",
		"long name":      strings.Repeat("n", 65) + " " + good + "\n",
		"not base64":     "k1 !!!!\n",
		"short key":      "k1 " + base64.StdEncoding.EncodeToString(make([]byte, 16)) + "\n",
		"named twice":    "k1 " + good + "\nk1 " + newKey(t) + "\n",
		"no file at all": "",
	} {
		p := writeKeys(t, dir, text)
		if name == "no file at all" {
			p = filepath.Join(dir, "absent")
		}
		if _, err := Load(p); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	k, err := Load(writeKeys(t, dir, "# oldest first\nold "+good+"\n\n  new "+newKey(t)+"  \n"))
	if err != nil {
		t.Fatal(err)
	}
	if k.Newest() != "new" || !k.Has("old") || k.Has("other") {
		t.Fatalf("newest %q, has old %v", k.Newest(), k.Has("old"))
	}
	if m := k.Missing([]string{"old", "gone", "new"}); len(m) != 1 || m[0] != "gone" {
		t.Fatalf("missing %v", m)
	}
}

func TestSealOpenAndRotation(t *testing.T) {
	dir := t.TempDir()
	first := "k1 " + newKey(t) + "\n"
	p := writeKeys(t, dir, first)
	k, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(`{"card":"4111 1111 1111 1111"}`)
	s1 := k.Seal(plain)
	if !Sealed(s1) || bytes.Contains(s1, []byte("4111")) {
		t.Fatalf("sealed: %q", s1)
	}
	if name, ok := KeyOf(s1); !ok || name != "k1" {
		t.Fatalf("KeyOf = %q %v", name, ok)
	}
	if len(s1) > len(plain)+Overhead {
		t.Fatalf("overhead %d > %d", len(s1)-len(plain), Overhead)
	}
	if again := k.Seal(plain); bytes.Equal(again, s1) {
		t.Fatal("two seals of one payload are equal: the nonce repeats")
	}
	if twice := k.Seal(s1); !bytes.Equal(twice, s1) {
		t.Fatal("a sealed payload was sealed again")
	}
	// Rotation: a newer key seals, the old one still opens.
	os.WriteFile(p, []byte(first+"k2 "+newKey(t)+"\n"), 0o600)
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	s2 := k.Seal(plain)
	if name, _ := KeyOf(s2); name != "k2" {
		t.Fatalf("after rotation sealed with %q", name)
	}
	for _, s := range [][]byte{s1, s2} {
		got, err := k.Open(s)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("open: %q %v", got, err)
		}
	}
	// A broken file keeps the keys loaded before.
	os.WriteFile(p, []byte("garbage\n"), 0o600)
	if err := k.Reload(); err == nil || k.Newest() != "k2" {
		t.Fatalf("reload of a broken file: %v, newest %q", err, k.Newest())
	}
	// Plaintext passes through; nil keyrings open plaintext only.
	var none *Keyring
	if got, err := none.Open(plain); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("nil keyring, plaintext: %q %v", got, err)
	}
	if _, err := none.Open(s1); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("nil keyring, sealed: %v", err)
	}
	if got := none.Seal(plain); !bytes.Equal(got, plain) {
		t.Fatal("a nil keyring sealed")
	}
	// A key the file lacks, a flipped bit, a renamed key: errors, never bytes.
	other, _ := Load(writeKeys(t, t.TempDir(), "k9 "+newKey(t)+"\n"))
	var missing *MissingKeyError
	if _, err := other.Open(s1); !errors.As(err, &missing) || missing.Name != "k1" {
		t.Fatalf("missing key: %v", err)
	}
	for i := range s1 {
		bad := bytes.Clone(s1)
		bad[i] ^= 0x40
		if got, err := k.Open(bad); err == nil && i >= 4 {
			t.Fatalf("byte %d flipped: opened to %q", i, got)
		}
	}
	renamed := bytes.Replace(bytes.Clone(s2), []byte("k2"), []byte("k1"), 1)
	if _, err := k.Open(renamed); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a payload moved under another key's name: %v", err)
	}
	if _, err := k.Open(s1[:len(magic)+3]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a truncated envelope: %v", err)
	}
}

func TestSealPayloadsSealsWhatGoesToEncryptingQueues(t *testing.T) {
	k, err := Load(writeKeys(t, t.TempDir(), "k1 "+newKey(t)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	encrypts := func(q string) bool { return strings.HasPrefix(q, "secret") }
	push := &command.PushItem{Queue: "secret", Payload: []byte(`{"a":1}`)}
	plainPush := &command.PushItem{Queue: "open", Payload: []byte(`{"a":2}`)}
	timer := &command.TimerOp{Queue: "secret-t", Payload: []byte(`{"t":1}`)}
	clientSealed := &command.TimerOp{Queue: "secret-t", TimerKey: "c", Payload: []byte(`"client"`), Encrypted: true}
	each := func(p func(*command.PushItem), tm func(*command.TimerOp)) {
		p(push)
		p(plainPush)
		tm(timer)
		tm(clientSealed)
	}
	if !k.SealPayloads(each, encrypts) {
		t.Fatal("nothing sealed")
	}
	if !Sealed(push.Payload) || Sealed(plainPush.Payload) || !Sealed(timer.Payload) || !timer.Encrypted {
		t.Fatalf("sealed: push %v, plain push %v, timer %v/%v", Sealed(push.Payload), Sealed(plainPush.Payload), Sealed(timer.Payload), timer.Encrypted)
	}
	if Sealed(clientSealed.Payload) {
		t.Fatal("a client-encrypted timer was sealed")
	}
	before := bytes.Clone(push.Payload)
	if k.SealPayloads(each, encrypts) || !bytes.Equal(before, push.Payload) {
		t.Fatal("a retried proposal was sealed twice")
	}
	var names []string
	if added := NoteKeys(each, &names); len(added) != 1 || added[0] != "k1" {
		t.Fatalf("noted %v", added)
	}
	if added := NoteKeys(each, &names); len(added) != 0 || len(names) != 1 {
		t.Fatalf("noted again %v, names %v", added, names)
	}
	var none Keyring
	if (*Keyring)(nil).SealPayloads(each, encrypts) || none.SealPayloads(func(func(*command.PushItem), func(*command.TimerOp)) {}, encrypts) {
		t.Fatal("sealed with no keyring, or with no payloads")
	}
}

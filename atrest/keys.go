package atrest

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
)

// KeySize is the length of every key: AES-256.
const KeySize = 32

var keyName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Keyring is the keys of a key file: the newest (the file's last) seals,
// every one opens. A nil *Keyring is a node without a key file: it seals
// nothing and opens only plaintext.
type Keyring struct {
	path string
	set  atomic.Pointer[keySet]
}

type keySet struct {
	newest string
	aeads  map[string]cipher.AEAD
}

// Load reads a key file. Each line is a key's name, a space, and the key
// in base64 (32 bytes); blank lines and lines starting with # are skipped.
// The last key is the newest: it seals. Names are 1..64 of [A-Za-z0-9._-]
// and unique.
//
//	# queen-node encryption keys, oldest first
//	2026-01 q3R1...=
//	2026-07 Zk8a...=
func Load(path string) (*Keyring, error) {
	k := &Keyring{path: path}
	if err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload rereads the key file; on an error the keys loaded before stay.
// Keys a node may already have sealed with must stay in the file: take
// one out only when no data sealed with it is left.
func (k *Keyring) Reload() error {
	b, err := os.ReadFile(k.path)
	if err != nil {
		return fmt.Errorf("encryption keys: %w", err)
	}
	set, err := parse(b)
	if err != nil {
		return fmt.Errorf("encryption keys %s: %w", k.path, err)
	}
	k.set.Store(set)
	return nil
}

func parse(b []byte) (*keySet, error) {
	set := &keySet{aeads: map[string]cipher.AEAD{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want a name and a base64 key", line)
		}
		name := f[0]
		if !keyName.MatchString(name) {
			return nil, fmt.Errorf("line %d: key name %q: 1 to 64 of A-Z a-z 0-9 . _ -", line, name)
		}
		if _, dup := set.aeads[name]; dup {
			return nil, fmt.Errorf("line %d: key %q is named twice", line, name)
		}
		raw, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q is not base64: %v", line, name, err)
		}
		if len(raw) != KeySize {
			return nil, fmt.Errorf("line %d: key %q is %d bytes, want %d (AES-256)", line, name, len(raw), KeySize)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		set.aeads[name], set.newest = aead, name
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if set.newest == "" {
		return nil, fmt.Errorf("no key in the file")
	}
	return set, nil
}

// Newest is the name of the key that seals ("" for a nil Keyring).
func (k *Keyring) Newest() string {
	if k == nil {
		return ""
	}
	return k.set.Load().newest
}

// Has reports whether the keyring holds the named key.
func (k *Keyring) Has(name string) bool {
	if k == nil {
		return false
	}
	_, ok := k.set.Load().aeads[name]
	return ok
}

// Missing lists the names that the keyring does not hold.
func (k *Keyring) Missing(names []string) []string {
	var out []string
	for _, n := range names {
		if !k.Has(n) {
			out = append(out, n)
		}
	}
	return out
}

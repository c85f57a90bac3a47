package atrest

import (
	"crypto/rand"
	"errors"
	"fmt"
)

// The envelope of a sealed payload:
//
//	magic "\x00QNE" | version 1 | name length (1 byte) | key name |
//	nonce (12 bytes) | AES-256-GCM ciphertext and tag
//
// Everything before the nonce is the header, authenticated as additional
// data: a payload cannot be moved under another key's name.
const (
	magic       = "\x00QNE"
	version     = 1
	nonceSize   = 12
	tagSize     = 16
	headerFixed = len(magic) + 2
)

// Overhead is what sealing adds to a payload, at most (a 64-byte name).
const Overhead = headerFixed + 64 + nonceSize + tagSize

var (
	// ErrNoKeys: a sealed payload on a node without a key file.
	ErrNoKeys = errors.New("atrest: a payload is encrypted and this node has no encryption keys (--encryption-keys)")
	// ErrCorrupt: an envelope that does not parse or does not authenticate.
	ErrCorrupt = errors.New("atrest: an encrypted payload does not decrypt (corrupt, or sealed under another key of the same name)")
)

// MissingKeyError: a sealed payload names a key the keyring lacks.
type MissingKeyError struct{ Name string }

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("atrest: a payload is encrypted with key %q, which this node's key file lacks", e.Name)
}

// Sealed reports whether b is an envelope (and not plaintext).
func Sealed(b []byte) bool { return len(b) >= len(magic) && string(b[:len(magic)]) == magic }

// KeyOf is the name of the key that sealed b; ok is false for plaintext
// or an envelope that does not parse.
func KeyOf(b []byte) (name string, ok bool) {
	if !Sealed(b) || len(b) < headerFixed || b[len(magic)] != version {
		return "", false
	}
	n := int(b[len(magic)+1])
	if n == 0 || len(b) < headerFixed+n+nonceSize+tagSize {
		return "", false
	}
	return string(b[headerFixed : headerFixed+n]), true
}

// Seal encrypts plain under the newest key. A nil Keyring, or a payload
// that is sealed already (a proposal retried on a new leader), is returned
// as it is.
func (k *Keyring) Seal(plain []byte) []byte {
	if k == nil || Sealed(plain) {
		return plain
	}
	set := k.set.Load()
	name := set.newest
	out := make([]byte, 0, headerFixed+len(name)+nonceSize+len(plain)+tagSize)
	out = append(out, magic...)
	out = append(out, version, byte(len(name)))
	out = append(out, name...)
	header := len(out)
	out = out[:header+nonceSize]
	if _, err := rand.Read(out[header:]); err != nil {
		panic("atrest: no randomness for a nonce: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return set.aeads[name].Seal(out, out[header:header+nonceSize], plain, out[:header])
}

// Open returns the plaintext of b: b itself when it is not sealed.
func (k *Keyring) Open(b []byte) ([]byte, error) {
	if !Sealed(b) {
		return b, nil
	}
	name, ok := KeyOf(b)
	if !ok {
		return nil, ErrCorrupt
	}
	if k == nil {
		return nil, ErrNoKeys
	}
	aead, ok := k.set.Load().aeads[name]
	if !ok {
		return nil, &MissingKeyError{Name: name}
	}
	header := headerFixed + len(name)
	plain, err := aead.Open(nil, b[header:header+nonceSize], b[header+nonceSize:], b[:header])
	if err != nil {
		return nil, ErrCorrupt
	}
	return plain, nil
}

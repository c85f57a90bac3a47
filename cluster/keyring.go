package cluster

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// LoadGossipKeyring reads a gossip keyring file: one base64 key per line
// (16, 24 or 32 bytes: AES-128/192/256), blank lines and # comments
// ignored; the first key encrypts, every key decrypts.
func LoadGossipKeyring(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip keyring: %w", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("gossip keyring %s line %d: not base64: %w", path, i+1, err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("gossip keyring %s line %d: a key is 16, 24 or 32 bytes, this one %d", path, i+1, n)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip keyring %s: no key", path)
	}
	return keys, nil
}

// ReloadGossipKeys installs a new keyring on a running node: new keys are
// added, the first becomes the one that encrypts, keys no longer listed
// are removed. The rotation in the README: add the new key second on every
// node, reload; move it first, reload; drop the old, reload.
func (n *Node) ReloadGossipKeys(keys [][]byte) error {
	if n.members == nil || len(keys) == 0 {
		return errors.New("cluster: no gossip keyring to reload")
	}
	kr := n.members.keyring
	if kr == nil {
		return errors.New("cluster: gossip runs without a keyring; a keyring needs a restart")
	}
	for _, k := range keys {
		if err := kr.AddKey(k); err != nil {
			return err
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, k := range keys {
		keep[string(k)] = true
	}
	for _, k := range kr.GetKeys() {
		if !keep[string(k)] {
			if err := kr.RemoveKey(k); err != nil {
				return err
			}
		}
	}
	return nil
}

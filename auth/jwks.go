package auth

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// JWKS documents: a file, reread when its modification time changes (a
// stat before each token that needs a public key), or a URL, fetched at
// start and refreshed.

func parseJWKS(b []byte) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS document: %w", err)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("the JWKS document holds no key")
	}
	for _, k := range set.Keys {
		if b, oct := k.Key.([]byte); oct {
			if err := checkHMACKey(fmt.Sprintf("the oct key %q", k.KeyID), b); err != nil {
				return nil, err
			}
		}
	}
	return &set, nil
}

// MinHMACKeyBytes is the shortest HMAC key HS256 takes: RFC 7518 §3.2
// asks for a key of at least the hash's size, 256 bits (go-jose refuses
// shorter ones when it verifies, so a node given one would answer every
// token with 401).
const MinHMACKeyBytes = 32

func checkHMACKey(what string, key []byte) error {
	if len(key) < MinHMACKeyBytes {
		return fmt.Errorf("auth: %s is %d bytes; HS256 needs a key of at least %d bytes (RFC 7518 §3.2)", what, len(key), MinHMACKeyBytes)
	}
	return nil
}

func (v *Verifier) loadJWKSFile() error {
	st, err := os.Stat(v.cfg.JWKSFile)
	if err != nil {
		return fmt.Errorf("auth: JWT_JWKS_FILE: %w", err)
	}
	b, err := os.ReadFile(v.cfg.JWKSFile)
	if err != nil {
		return fmt.Errorf("auth: JWT_JWKS_FILE: %w", err)
	}
	set, err := parseJWKS(b)
	if err != nil {
		return fmt.Errorf("auth: JWT_JWKS_FILE %s: %w", v.cfg.JWKSFile, err)
	}
	v.mu.Lock()
	v.jwks, v.jwksMod = set, st.ModTime()
	v.mu.Unlock()
	return nil
}

// reloadJWKSFileIfChanged rereads the JWKS file when it changed; a file
// that does not read or parse keeps the keys already loaded (and says so).
func (v *Verifier) reloadJWKSFileIfChanged() {
	if v.cfg.JWKSFile == "" {
		return
	}
	st, err := os.Stat(v.cfg.JWKSFile)
	v.mu.RLock()
	same := err == nil && st.ModTime().Equal(v.jwksMod)
	v.mu.RUnlock()
	if same || err != nil {
		return
	}
	if err := v.loadJWKSFile(); err != nil {
		v.cfg.Logger.Warn("JWKS file changed but does not load; keeping the keys loaded before", "err", err)
		v.mu.Lock()
		v.jwksMod = st.ModTime() // do not retry on every request
		v.mu.Unlock()
		return
	}
	v.cfg.Logger.Info("reloaded the JWKS file", "path", v.cfg.JWKSFile)
}

func (v *Verifier) fetchJWKS() error {
	resp, err := v.cfg.HTTPClient.Get(v.cfg.JWKSURL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	set, err := parseJWKS(b)
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.jwks = set
	v.mu.Unlock()
	return nil
}

func (v *Verifier) refreshJWKS() {
	t := time.NewTicker(v.cfg.JWKSRefresh)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
		}
		if err := v.fetchJWKS(); err != nil {
			v.cfg.Logger.Warn("JWKS refresh failed; keeping the keys fetched before", "url", v.cfg.JWKSURL, "err", err)
		}
	}
}

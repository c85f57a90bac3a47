package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/queen-node/queen-node/tlsfiles/tlstest"
)

// clientTLS, when set (-secure), is the bench clients' TLS: they trust the
// CA that signed the nodes' certificates.
var clientTLS *tls.Config

// secureSetup (-secure) makes what a node needs to run with every link
// encrypted and JWT on, in dir: a CA and one certificate for 127.0.0.1
// (used for HTTPS and gRPC, and between nodes), a gossip key, an HS256
// secret. It returns the node flags, the client TLS, and an admin token.
func secureSetup(dir string) (flags []string, client *tls.Config, token string, err error) {
	ca, err := tlstest.Generate("queen-node bench CA")
	if err != nil {
		return nil, nil, "", err
	}
	cert, key, err := ca.WriteCert(dir, "node", 2)
	if err != nil {
		return nil, nil, "", err
	}
	caFile := filepath.Join(dir, "ca.pem")
	gossip := make([]byte, 32)
	secret := make([]byte, 32)
	rand.Read(gossip)
	rand.Read(secret)
	keyring := filepath.Join(dir, "gossip.keys")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		return nil, nil, "", err
	}
	if err := os.WriteFile(keyring, []byte(base64.StdEncoding.EncodeToString(gossip)+"\n"), 0o600); err != nil {
		return nil, nil, "", err
	}
	s := hex.EncodeToString(secret)
	flags = []string{"--tls-cert", cert, "--tls-key", key, "--peer-tls-cert", cert, "--peer-tls-key", key, "--peer-tls-ca", caFile,
		"--gossip-keyring", keyring, "--jwt-enabled", "--jwt-algorithm", "HS256", "--jwt-secret", s}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(s)}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, nil, "", err
	}
	token, err = jwt.Signed(signer).Claims(map[string]any{"sub": "bench", "role": "admin",
		"exp": time.Now().Add(24 * time.Hour).Unix()}).Serialize()
	if err != nil {
		return nil, nil, "", fmt.Errorf("bench: a token: %w", err)
	}
	return flags, &tls.Config{RootCAs: ca.Pool()}, token, nil
}

// Package tlstest makes certificate authorities and certificates for
// tests and benchmarks: a cluster CA, certificates it signs (for
// 127.0.0.1, server and client use), and self-signed ones, written as PEM
// files. NewCA, Issue and IssueSerial fail the test on an error; Generate
// and WriteCert return it.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate
}

// Generate makes a CA valid for a day.
func Generate(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// NewCA is Generate for a test.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	c, err := Generate(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Pool is a certificate pool holding the CA.
func (c *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// WriteCA writes the CA certificate into dir as name and returns its path.
func (c *CA) WriteCA(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, c.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue writes a certificate the CA signs for 127.0.0.1 (server and
// client use, a random serial) into dir as name.pem and name.key.
func (c *CA) Issue(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	return c.IssueSerial(t, dir, name, serial.Int64())
}

// IssueSerial is Issue with a given serial; a nil CA makes the certificate
// self-signed.
func (c *CA) IssueSerial(t testing.TB, dir, name string, serial int64) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, err := c.WriteCert(dir, name, serial)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// WriteCert is IssueSerial returning its error.
func (c *CA) WriteCert(dir, name string, serial int64) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	parent, signer := tmpl, key
	if c != nil {
		parent, signer = c.Cert, c.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T) *ca {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &ca{cert: c, key: key}
}

// issue writes a certificate signed by c (self-signed when c is nil) and
// its key into dir.
func (c *ca) issue(t *testing.T, dir, name string, serial int64) (string, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	parent, signer := tmpl, key
	if c != nil {
		parent, signer = c.cert, c.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	cf, kf := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	os.WriteFile(cf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return cf, kf
}

func serialOf(t *testing.T, c *tls.Certificate) int64 {
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x.SerialNumber.Int64()
}

func TestAPairFollowsItsFilesAndKeepsAGoodOne(t *testing.T) {
	dir := t.TempDir()
	cf, kf := (*ca)(nil).issue(t, dir, "srv", 1)
	p, err := Load(cf, kf, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.interval = 0 // check the files on every handshake
	if s := serialOf(t, p.current()); s != 1 {
		t.Fatalf("serial %d", s)
	}
	(*ca)(nil).issue(t, dir, "srv", 2)
	later := time.Now().Add(2 * time.Second)
	os.Chtimes(cf, later, later)
	if s := serialOf(t, p.current()); s != 2 {
		t.Fatalf("after the files changed: serial %d", s)
	}
	os.WriteFile(cf, []byte("garbage"), 0o600)
	later = later.Add(time.Second)
	os.Chtimes(cf, later, later)
	if s := serialOf(t, p.current()); s != 2 {
		t.Fatalf("after a broken file: serial %d", s)
	}
	if err := p.Reload(); err == nil {
		t.Fatal("a broken pair reloaded")
	}
	if _, err := Load(filepath.Join(dir, "none.pem"), kf, nil); err == nil {
		t.Fatal("a missing certificate loaded")
	}
}

func TestPeersAreCheckedAgainstTheClusterCA(t *testing.T) {
	dir := t.TempDir()
	cluster, other := newCA(t), newCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cluster.cert.Raw}), 0o600)
	cf, kf := cluster.issue(t, dir, "n1", 10)
	p, err := LoadPeer(cf, kf, caFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	member, _ := cluster.issue(t, dir, "n2", 11)
	stranger, _ := other.issue(t, dir, "n9", 12)
	selfSigned, _ := (*ca)(nil).issue(t, dir, "n8", 13)
	raw := func(path string) [][]byte {
		b, _ := os.ReadFile(path)
		blk, _ := pem.Decode(b)
		return [][]byte{blk.Bytes}
	}
	if err := p.verify(raw(member)); err != nil {
		t.Fatalf("a member's certificate: %v", err)
	}
	for name, c := range map[string]string{"another CA": stranger, "self-signed": selfSigned} {
		if err := p.verify(raw(c)); err == nil {
			t.Fatalf("%s was accepted", name)
		}
	}
	if err := p.verify(nil); err == nil {
		t.Fatal("no certificate was accepted")
	}
	if _, err := LoadPeer(cf, kf, filepath.Join(dir, "n1.key"), nil); err == nil {
		t.Fatal("a CA file without a certificate loaded")
	}
}

package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/queen-node/queen-node/tlsfiles/tlstest"
)

func serialOf(t *testing.T, c *tls.Certificate) int64 {
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x.SerialNumber.Int64()
}

func TestAPairFollowsItsFilesAndKeepsAGoodOne(t *testing.T) {
	dir := t.TempDir()
	cf, kf := (*tlstest.CA)(nil).IssueSerial(t, dir, "srv", 1)
	p, err := Load(cf, kf, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.interval = 0 // check the files on every handshake
	if s := serialOf(t, p.current()); s != 1 {
		t.Fatalf("serial %d", s)
	}
	(*tlstest.CA)(nil).IssueSerial(t, dir, "srv", 2)
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
	cluster, other := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "other")
	caFile := cluster.WriteCA(t, dir, "ca.pem")
	cf, kf := cluster.IssueSerial(t, dir, "n1", 10)
	p, err := LoadPeer(cf, kf, caFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	member, _ := cluster.IssueSerial(t, dir, "n2", 11)
	stranger, _ := other.IssueSerial(t, dir, "n9", 12)
	selfSigned, _ := (*tlstest.CA)(nil).IssueSerial(t, dir, "n8", 13)
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

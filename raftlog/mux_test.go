package raftlog

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Each group's layer accepts only the connections dialled for it; a
// connection that names no group of the node is closed.
func TestMuxHandsEachConnectionToItsGroup(t *testing.T) {
	m, err := NewMux("127.0.0.1:0", "127.0.0.1:1", 3, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	addr := raft.ServerAddress(m.ln.Addr().String())
	for _, g := range []int{2, 0, 1} {
		c, err := m.Layer(g).Dial(addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{byte('a' + g)})
		in, err := m.Layer(g).Accept()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(in, b); err != nil || b[0] != byte('a'+g) {
			t.Fatalf("group %d read %q %v", g, b, err)
		}
		c.Close()
		in.Close()
	}
	bad, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	bad.Write([]byte{muxMagic, 9})
	bad.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := bad.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection naming group 9 of 3: %v, want it closed", err)
	}
	if _, err := NewMux("127.0.0.1:0", "0.0.0.0:1", 2, nil, nil, nil); err == nil {
		t.Fatal("an unreachable advertise address was taken")
	}
	closed := m.Layer(1)
	closed.Close()
	if _, err := closed.Accept(); err == nil {
		t.Fatal("a closed layer accepted")
	}
	// a group's stores opened again (damage found at open) take a new
	// layer of the same group, which still accepts
	again := m.Layer(1)
	c, err := again.Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if in, err := again.Accept(); err != nil {
		t.Fatalf("a new layer after a closed one: %v", err)
	} else {
		in.Close()
	}
}

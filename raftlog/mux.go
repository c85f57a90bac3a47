package raftlog

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Mux carries several Raft groups over one Raft port (--raft-groups): every
// connection a group's transport dials starts with a two-byte header, 'G'
// and the group's number, which the listening side reads before it hands
// the connection to that group's transport. Under mutual TLS the header
// travels inside the TLS session, so a peer must present the cluster's
// certificate before it can name a group. With one group there is no mux
// and no header: the wire is what it always was.
type Mux struct {
	ln        net.Listener
	advertise net.Addr
	clientTLS *tls.Config
	log       hclog.Logger
	layers    []*groupLayer
	closeOnce sync.Once
	done      chan struct{}
}

// muxMagic opens every connection of a mux.
const muxMagic = 'G'

// headerTimeout bounds how long an accepted connection may take to name
// its group.
const headerTimeout = 10 * time.Second

// NewMux listens on bind for groups Raft groups; advertise is the address
// the other nodes dial (checked as Open checks it).
func NewMux(bind, advertise string, groups int, serverTLS, clientTLS *tls.Config, logger hclog.Logger) (*Mux, error) {
	if groups < 1 || groups > 255 {
		return nil, fmt.Errorf("raftlog: %d raft groups: between 1 and 255", groups)
	}
	if advertise == "" {
		advertise = bind
	}
	if err := reachable(advertise); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raftlog: transport on %s: %w", bind, err)
	}
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	m := &Mux{ln: ln, advertise: hostAddr(advertise), clientTLS: clientTLS, log: logger.Named("mux"), done: make(chan struct{})}
	for g := range groups {
		m.layers = append(m.layers, &groupLayer{m: m, group: byte(g), conns: make(chan net.Conn)})
	}
	go m.accept()
	return m, nil
}

// Layer is a new stream layer of group g, for Config.Layer: one per
// transport, since a transport closes its layer when it closes (a group's
// stores are opened again after damage found at open, on the same mux).
func (m *Mux) Layer(g int) raft.StreamLayer {
	return &layerHandle{groupLayer: m.layers[g], closed: make(chan struct{})}
}

// Close stops listening; each group's transport closes its own layer.
func (m *Mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.done)
		err = m.ln.Close()
	})
	return err
}

func (m *Mux) accept() {
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			m.log.Warn("accept failed", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go m.route(conn)
	}
}

// route reads a connection's header and hands it to its group.
func (m *Mux) route(conn net.Conn) {
	var hdr [2]byte
	conn.SetReadDeadline(time.Now().Add(headerTimeout))
	if _, err := io.ReadFull(conn, hdr[:]); err != nil || hdr[0] != muxMagic || int(hdr[1]) >= len(m.layers) {
		if errors.Is(err, io.EOF) { // a probe (a TLS handshake check) that sent nothing
			conn.Close()
			return
		}
		m.log.Warn("a connection that names no raft group of this node was closed", "remote", conn.RemoteAddr(),
			"header", fmt.Sprintf("%q", hdr[:]), "err", err)
		conn.Close()
		return
	}
	conn.SetReadDeadline(time.Time{})
	l := m.layers[hdr[1]]
	select {
	case l.conns <- conn:
	case <-time.After(headerTimeout): // no transport of that group accepts (it is being reopened)
		conn.Close()
	case <-m.done:
		conn.Close()
	}
}

// groupLayer is one group's side of the mux: where its connections wait
// for its transport's Accept.
type groupLayer struct {
	m     *Mux
	group byte
	conns chan net.Conn
}

// layerHandle is one transport's raft.StreamLayer of a group.
type layerHandle struct {
	*groupLayer
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *layerHandle) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.m.done:
		return nil, net.ErrClosed
	}
}

func (l *layerHandle) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *groupLayer) Addr() net.Addr { return l.m.advertise }

func (l *groupLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	var conn net.Conn
	var err error
	if l.m.clientTLS != nil {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), l.m.clientTLS)
	} else {
		conn, err = net.DialTimeout("tcp", string(address), timeout)
	}
	if err != nil {
		return nil, err
	}
	conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte{muxMagic, l.group}); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// PeerServerName is the name a node asks for when it dials another node's
// gRPC port: the listener answers it with the peer certificate, and any
// other name (a client of the public API) with the public one.
const PeerServerName = "queen-node-peer"

// Peer is the mutual TLS of the links between nodes (Raft, forwarding): a
// node's certificate and key, and the cluster CA that must have signed the
// certificate of every node it talks to. All three files are reread when
// they change. Names are not checked, the CA is: a certificate the cluster
// CA did not sign cannot join, vote, replicate or forward.
type Peer struct {
	pair   *Pair
	caFile string
	log    *slog.Logger

	mu      sync.Mutex
	pool    *x509.CertPool
	caMod   time.Time
	checked time.Time
}

// LoadPeer reads the node's pair and the cluster CA.
func LoadPeer(certFile, keyFile, caFile string, log *slog.Logger) (*Peer, error) {
	pair, err := Load(certFile, keyFile, log)
	if err != nil {
		return nil, err
	}
	p := &Peer{pair: pair, caFile: caFile, log: pair.log}
	if err := p.loadCA(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Peer) loadCA() error {
	mod := modTime(p.caFile)
	b, err := os.ReadFile(p.caFile)
	if err != nil {
		return fmt.Errorf("tls: cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return fmt.Errorf("tls: cluster CA %s holds no PEM certificate", p.caFile)
	}
	p.mu.Lock()
	p.pool, p.caMod = pool, mod
	p.mu.Unlock()
	return nil
}

// Reload rereads all three files; what does not load keeps what was
// loaded before.
func (p *Peer) Reload() error {
	return errors.Join(p.pair.Reload(), p.loadCA())
}

func (p *Peer) currentPool() *x509.CertPool {
	p.mu.Lock()
	due := time.Since(p.checked) >= time.Second
	if due {
		p.checked = time.Now()
	}
	changed := due && !modTime(p.caFile).Equal(p.caMod)
	p.mu.Unlock()
	if changed {
		if err := p.loadCA(); err != nil {
			p.log.Error("the cluster CA changed but does not load; keeping the one loaded before", "err", err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pool
}

// Certificate is the node's current peer certificate.
func (p *Peer) Certificate() *tls.Certificate { return p.pair.current() }

// verify checks a presented chain against the cluster CA (no name check).
func (p *Peer) verify(raw [][]byte) error {
	if len(raw) == 0 {
		return errors.New("tls: the peer presented no certificate")
	}
	certs := make([]*x509.Certificate, 0, len(raw))
	for _, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return fmt.Errorf("tls: peer certificate: %w", err)
		}
		certs = append(certs, c)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: p.currentPool(), Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("tls: the peer's certificate is not signed by the cluster CA: %w", err)
	}
	return nil
}

// Verified reports whether a connection's client presented a certificate
// the cluster CA signed (the forwarding service's check).
func (p *Peer) Verified(st tls.ConnectionState) bool {
	raw := make([][]byte, len(st.PeerCertificates))
	for i, c := range st.PeerCertificates {
		raw[i] = c.Raw
	}
	return p.verify(raw) == nil
}

// ServerConfig is for a listener only nodes use (Raft): a client
// certificate the cluster CA signed is required.
func (p *Peer) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		ClientAuth:     tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.Certificate(), nil },
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return p.verify(raw)
		},
	}
}

// SharedServerConfig is for a listener nodes share with clients (gRPC):
// a client certificate is asked for but not required (the forwarding
// service checks it per call, with Verified); a node is answered with the
// peer certificate, anyone else with public (the peer one when nil).
func (p *Peer) SharedServerConfig(public *Pair) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName == PeerServerName || public == nil {
				return p.Certificate(), nil
			}
			return public.current(), nil
		},
	}
}

// ClientConfig is how a node dials another: its own certificate, and the
// other's checked against the cluster CA.
func (p *Peer) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS12,
		ServerName:           PeerServerName,
		InsecureSkipVerify:   true, // replaced by the CA check below (names are not checked)
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return p.Certificate(), nil },
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return p.verify(raw)
		},
	}
}

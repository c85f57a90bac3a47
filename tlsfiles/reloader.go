package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Pair is a certificate and key file pair, loaded and kept fresh.
type Pair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	certMod  time.Time
	keyMod   time.Time
	checked  time.Time
	interval time.Duration
}

// Load reads the pair; it fails when it does not load now.
func Load(certFile, keyFile string, log *slog.Logger) (*Pair, error) {
	if log == nil {
		log = slog.Default()
	}
	p := &Pair{certFile: certFile, keyFile: keyFile, log: log, interval: time.Second}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// Reload rereads the pair now; on an error the pair loaded before stays.
func (p *Pair) Reload() error {
	cm, km := modTime(p.certFile), modTime(p.keyFile)
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.certMod, p.keyMod = cm, km
	if err != nil {
		return fmt.Errorf("tls: %s / %s: %w", p.certFile, p.keyFile, err)
	}
	p.cert = &cert
	return nil
}

// current returns the pair, rereading it first when a file changed (a
// stat at most once per interval).
func (p *Pair) current() *tls.Certificate {
	p.mu.Lock()
	due := time.Since(p.checked) >= p.interval
	if due {
		p.checked = time.Now()
	}
	changed := due && (!modTime(p.certFile).Equal(p.certMod) || !modTime(p.keyFile).Equal(p.keyMod))
	p.mu.Unlock()
	if changed {
		if err := p.Reload(); err != nil {
			p.log.Error("the TLS certificate changed but does not load; serving the one loaded before", "err", err)
		} else {
			p.log.Info("reloaded the TLS certificate", "cert", p.certFile)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cert
}

// ServerConfig is a TLS server configuration that always serves the
// current pair (TLS 1.2 at least).
func (p *Pair) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.current(), nil },
	}
}

// ClientConfig is how a node dials another node's gRPC port when that port
// serves the public pair and no peer TLS is configured: the other node's
// certificate must name the host dialed and chain to a system root or to a
// certificate in this node's own certificate file (its chain: a cluster
// whose nodes share one CA, or one certificate, trusts itself). Checked
// against the pair as it is now, so a renewed file is followed.
func (p *Pair) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection below, which also checks the name
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("tls: the node presented no certificate")
			}
			roots, err := x509.SystemCertPool()
			if err != nil || roots == nil {
				roots = x509.NewCertPool()
			}
			for _, der := range p.current().Certificate {
				if c, err := x509.ParseCertificate(der); err == nil {
					roots.AddCert(c)
				}
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: cs.ServerName, Roots: roots, Intermediates: inter})
			return err
		},
	}
}

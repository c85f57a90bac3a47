package auth

import (
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/queen-node/queen-node/tenant"
)

// Level is what a route needs.
type Level int

// Levels, lowest first. Public routes need no token.
const (
	Public Level = iota
	ReadOnly
	ReadWrite
	Admin
	// Operator: what spans every tenant of the log (the switches and
	// maintenance, backup and restore, the voters, the state hash): an
	// admin of the default tenant (no tenant claim) or of every tenant
	// ("*"), never a tenant's own admin.
	Operator
)

// Config is the JWT configuration of spec §4.17 (JWT_* variables) plus
// JWT_ROLE_WRITE_ONLY and JWT_JWKS_FILE.
type Config struct {
	Enabled   bool
	Algorithm string // HS256 | RS256 | EdDSA | auto
	Secret    string // HS256
	// PublicKey is a PEM public key (RS256 or EdDSA), or the path of a file
	// holding one.
	PublicKey string
	JWKSFile  string // a JWKS document, reread when it changes
	JWKSURL   string // a JWKS document fetched at start and every JWKSRefresh
	Issuer    string
	Audience  string
	ClockSkew time.Duration
	SkipPaths []string // matched exactly; "/" is the root alone
	// Claims holding the roles: a string and an array of strings.
	RolesClaim, RolesArrayClaim string
	// The role names.
	RoleAdmin, RoleReadWrite, RoleReadOnly, RoleWriteOnly string
	JWKSRefresh                                           time.Duration // 0 = 5 minutes
	HTTPClient                                            *http.Client  // for JWKSURL; nil = a 10 s client
	Logger                                                *slog.Logger
}

// Defaults fills what the spec defaults.
func (c *Config) defaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Algorithm, "auto")
	def(&c.RolesClaim, "role")
	def(&c.RolesArrayClaim, "roles")
	def(&c.RoleAdmin, "admin")
	def(&c.RoleReadWrite, "read-write")
	def(&c.RoleReadOnly, "read-only")
	def(&c.RoleWriteOnly, "write-only")
	if c.ClockSkew == 0 {
		c.ClockSkew = 30 * time.Second
	}
	if c.JWKSRefresh == 0 {
		c.JWKSRefresh = 5 * time.Minute
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// DefaultSkipPaths are the paths served without a token (spec §4.17).
var DefaultSkipPaths = []string{"/health", "/metrics/prometheus", "/metrics", "/"}

// Identity is who a token says the caller is.
type Identity struct {
	Sub string
	// Tenant is the token's tenant claim (package tenant): a name, or
	// tenant.All for an admin that may read across tenants; "" = none.
	Tenant    string
	scopes    []string // the queues claim: name prefixes; nil = not scoped
	admin     bool
	readWrite bool
	readOnly  bool
	writeOnly bool
}

// Allows reports whether the identity may call a route of level l;
// producer marks the routes a write-only token may call (push, timer
// schedule).
func (id *Identity) Allows(l Level, producer bool) bool {
	switch {
	case l == Public:
		return true
	case l == Operator:
		return id.admin && (id.Tenant == "" || id.Tenant == tenant.Default || id.Tenant == tenant.All)
	case id.admin:
		return true
	case l == Admin:
		return false
	case id.readWrite:
		return true
	case l == ReadOnly && id.readOnly:
		return true
	}
	return producer && id.writeOnly
}

// WriteOnly reports whether the identity is a producer's only.
func (id *Identity) WriteOnly() bool {
	return id.writeOnly && !id.admin && !id.readWrite && !id.readOnly
}

// Error is a refusal with the spec's status and text.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// The spec's refusals.
var (
	ErrNoToken      = &Error{http.StatusUnauthorized, "Authentication required"}
	ErrSignature    = &Error{http.StatusUnauthorized, "Invalid token signature"}
	ErrExpired      = &Error{http.StatusUnauthorized, "Token has expired"}
	ErrIssuer       = &Error{http.StatusUnauthorized, "Invalid token issuer"}
	ErrAudience     = &Error{http.StatusUnauthorized, "Invalid token audience"}
	ErrInvalid      = &Error{http.StatusUnauthorized, "Invalid token"}
	ErrInsufficient = &Error{http.StatusForbidden, "Insufficient permissions"}
)

// Verifier checks tokens against the configured keys.
type Verifier struct {
	cfg    Config
	algs   []jose.SignatureAlgorithm
	secret []byte
	pub    crypto.PublicKey
	skip   map[string]bool

	mu       sync.RWMutex
	jwks     *jose.JSONWebKeySet // from the file or the URL
	jwksMod  time.Time           // the file's mtime when read
	stop     chan struct{}
	stopOnce sync.Once
}

// New builds a verifier; nil when auth is off.
func New(cfg Config) (*Verifier, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	cfg.defaults()
	v := &Verifier{cfg: cfg, skip: map[string]bool{}, stop: make(chan struct{})}
	paths := cfg.SkipPaths
	if paths == nil {
		paths = DefaultSkipPaths
	}
	for _, p := range paths {
		if p = strings.TrimSpace(p); p != "" {
			v.skip[p] = true
		}
	}
	if cfg.Secret != "" {
		if err := checkHMACKey("JWT_SECRET", []byte(cfg.Secret)); err != nil {
			return nil, err
		}
		v.secret = []byte(cfg.Secret)
	}
	if cfg.PublicKey != "" {
		pub, err := parsePublicKey(cfg.PublicKey)
		if err != nil {
			return nil, err
		}
		v.pub = pub
	}
	if cfg.JWKSFile != "" {
		if err := v.loadJWKSFile(); err != nil {
			return nil, err
		}
	}
	if cfg.JWKSURL != "" {
		if err := v.fetchJWKS(); err != nil {
			return nil, fmt.Errorf("auth: JWKS at %s: %w", cfg.JWKSURL, err)
		}
		go v.refreshJWKS()
	}
	algs, err := v.algorithms()
	if err != nil {
		return nil, err
	}
	v.algs = algs
	return v, nil
}

// Close stops the JWKS refresh.
func (v *Verifier) Close() {
	if v != nil {
		v.stopOnce.Do(func() { close(v.stop) })
	}
}

func (v *Verifier) algorithms() ([]jose.SignatureAlgorithm, error) {
	hasKeys := v.pub != nil || v.cfg.JWKSFile != "" || v.cfg.JWKSURL != ""
	switch strings.ToUpper(v.cfg.Algorithm) {
	case "HS256":
		if v.secret == nil && !hasKeys {
			return nil, errors.New("auth: JWT_ALGORITHM=HS256 needs JWT_SECRET (or oct keys in JWT_JWKS_FILE or JWT_JWKS_URL)")
		}
		return []jose.SignatureAlgorithm{jose.HS256}, nil
	case "RS256":
		if !hasKeys {
			return nil, errors.New("auth: JWT_ALGORITHM=RS256 needs JWT_PUBLIC_KEY, JWT_JWKS_FILE or JWT_JWKS_URL")
		}
		return []jose.SignatureAlgorithm{jose.RS256}, nil
	case "EDDSA":
		if !hasKeys {
			return nil, errors.New("auth: JWT_ALGORITHM=EdDSA needs JWT_PUBLIC_KEY, JWT_JWKS_FILE or JWT_JWKS_URL")
		}
		return []jose.SignatureAlgorithm{jose.EdDSA}, nil
	case "AUTO":
		var algs []jose.SignatureAlgorithm
		if v.secret != nil || v.cfg.JWKSFile != "" || v.cfg.JWKSURL != "" {
			algs = append(algs, jose.HS256) // a JWKS may hold oct keys
		}
		if hasKeys {
			algs = append(algs, jose.RS256, jose.EdDSA)
		}
		if len(algs) == 0 {
			return nil, errors.New("auth: JWT is enabled without a key: set JWT_SECRET, JWT_PUBLIC_KEY, JWT_JWKS_FILE or JWT_JWKS_URL")
		}
		return algs, nil
	}
	return nil, fmt.Errorf("auth: JWT_ALGORITHM %q: want HS256, RS256, EdDSA or auto", v.cfg.Algorithm)
}

// parsePublicKey reads a PEM public key given inline or as a file path.
func parsePublicKey(s string) (crypto.PublicKey, error) {
	data := []byte(s)
	if !strings.Contains(s, "-----BEGIN") {
		b, err := os.ReadFile(s)
		if err != nil {
			return nil, fmt.Errorf("auth: JWT_PUBLIC_KEY is neither a PEM key nor a readable file: %w", err)
		}
		data = b
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("auth: JWT_PUBLIC_KEY holds no PEM block")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		if cert, cerr := x509.ParseCertificate(block.Bytes); cerr == nil {
			return cert.PublicKey, nil
		}
		return nil, fmt.Errorf("auth: JWT_PUBLIC_KEY: %w", err)
	}
	return pub, nil
}

// Skip reports whether path is served without a token.
func (v *Verifier) Skip(path string) bool { return v.skip[path] }

// Authenticate checks the Authorization header value: "Bearer <token>"
// (prefix matched case-insensitively) or the bare token.
func (v *Verifier) Authenticate(header string) (*Identity, *Error) {
	token := strings.TrimSpace(header)
	if len(token) >= 6 && strings.EqualFold(token[:6], "bearer") && (len(token) == 6 || token[6] == ' ') {
		token = strings.TrimSpace(token[6:])
	}
	if token == "" {
		return nil, ErrNoToken
	}
	tok, err := jwt.ParseSigned(token, v.algs)
	if err != nil || len(tok.Headers) != 1 {
		return nil, ErrSignature // malformed, alg none, or an algorithm not configured
	}
	var std jwt.Claims
	var rest map[string]json.RawMessage
	verified := false
	for _, key := range v.keysFor(tok.Headers[0]) {
		if err := tok.Claims(key, &std, &rest); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, ErrSignature
	}
	exp := jwt.Expected{Issuer: v.cfg.Issuer, Time: time.Now()}
	if v.cfg.Audience != "" {
		exp.AnyAudience = jwt.Audience{v.cfg.Audience}
	}
	switch err := std.ValidateWithLeeway(exp, v.cfg.ClockSkew); {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, ErrExpired
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, ErrIssuer
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, ErrAudience
	default:
		return nil, ErrInvalid
	}
	id := &Identity{Sub: std.Subject}
	if raw, ok := rest["queues"]; ok {
		var qs []string
		if json.Unmarshal(raw, &qs) != nil {
			return nil, ErrInvalid // a scope that does not read must not widen into none
		}
		id.scopes = append([]string{}, qs...)
	}
	var roles []string
	if raw, ok := rest[v.cfg.RolesClaim]; ok {
		var r string
		if json.Unmarshal(raw, &r) == nil {
			roles = append(roles, r)
		}
	}
	if raw, ok := rest[v.cfg.RolesArrayClaim]; ok {
		var rs []string
		if json.Unmarshal(raw, &rs) == nil {
			roles = append(roles, rs...)
		}
	}
	for _, r := range roles {
		switch r {
		case v.cfg.RoleAdmin:
			id.admin = true
		case v.cfg.RoleReadWrite:
			id.readWrite = true
		case v.cfg.RoleReadOnly:
			id.readOnly = true
		case v.cfg.RoleWriteOnly:
			id.writeOnly = true
		}
	}
	if raw, ok := rest["tenant"]; ok {
		if err := id.setTenant(raw); err != nil {
			return nil, err
		}
	}
	return id, nil
}

// keysFor lists the keys that may have signed a token with header h.
func (v *Verifier) keysFor(h jose.Header) []any {
	var keys []any
	switch jose.SignatureAlgorithm(h.Algorithm) {
	case jose.HS256:
		if v.secret != nil {
			keys = append(keys, v.secret)
		}
	default:
		if v.pub != nil {
			keys = append(keys, v.pub)
		}
	}
	v.reloadJWKSFileIfChanged()
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.jwks != nil {
		var ks []jose.JSONWebKey
		if h.KeyID != "" {
			ks = v.jwks.Key(h.KeyID)
		} else {
			ks = v.jwks.Keys
		}
		hmac := jose.SignatureAlgorithm(h.Algorithm) == jose.HS256
		for _, k := range ks {
			_, oct := k.Key.([]byte) // its length was checked when the set was loaded
			if hmac && oct || !hmac && !oct && k.Valid() && k.IsPublic() {
				keys = append(keys, k.Key)
			}
		}
	}
	return keys
}

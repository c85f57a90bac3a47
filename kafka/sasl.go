package kafka

import (
	"bytes"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/queen-node/queen-node/auth"
	"github.com/queen-node/queen-node/tenant"
)

// SASL: PLAIN (the password is a queen-node JWT; the user name is only
// logged) and OAUTHBEARER (the bearer token is one), both checked by the
// node's own verifier, so a Kafka call holds the token's role and queues
// scope as an HTTP call does. The connection acts as that identity, in
// the tenant its tenant claim names, from then on. Only the framed form
// (SaslHandshake v1 + SaslAuthenticate) is served.

var mechanisms = []string{"PLAIN", "OAUTHBEARER"}

func (c *conn) saslHandshake(r *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = mechanisms
	for _, m := range mechanisms {
		if strings.EqualFold(r.Mechanism, m) {
			c.mech = m
			return resp
		}
	}
	resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	return resp
}

// saslAuthenticate checks the token; a failure is answered and the
// connection closed, as a Kafka broker does.
func (c *conn) saslAuthenticate(r *kmsg.SASLAuthenticateRequest) (kmsg.Response, bool) {
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	fail := func(msg string) (kmsg.Response, bool) {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(msg)
		c.s.log.Warn("kafka: SASL authentication failed", "remote", c.remote, "mechanism", c.mech, "reason", msg)
		return resp, false
	}
	var token string
	switch c.mech {
	case "PLAIN":
		parts := bytes.Split(r.SASLAuthBytes, []byte{0})
		if len(parts) != 3 {
			return fail("a PLAIN message is authzid NUL user NUL password")
		}
		token = string(parts[2])
	case "OAUTHBEARER":
		// RFC 7628: gs2-header, then kvpairs separated by 0x01.
		for _, kv := range bytes.Split(r.SASLAuthBytes, []byte{1}) {
			if v, ok := bytes.CutPrefix(kv, []byte("auth=")); ok {
				token = string(v)
			}
		}
		if token == "" {
			return fail("an OAUTHBEARER message without auth=Bearer <token>")
		}
	default:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, false
	}
	if c.s.cfg.Auth == nil { // JWT off: every caller is let in, as over HTTP
		c.authed = true
		return resp, true
	}
	id, aerr := c.s.cfg.Auth.Authenticate(token)
	if aerr != nil {
		return fail(aerr.Msg)
	}
	// The token's tenant claim names the connection's tenant (the one rule
	// of every front end; a Kafka client has no header, so an admin token
	// of every tenant, "*", is the default tenant's here). The verifier has
	// refused a claim that is not a tenant name; checked again, never
	// served as the default tenant.
	name, _, terr := tenant.Resolve(tenant.Source{Claim: id.Tenant})
	if terr == nil {
		terr = tenant.Valid(name)
	}
	if terr != nil {
		return fail("the token's tenant claim: " + terr.Error())
	}
	c.ctx = tenant.With(auth.WithIdentity(c.ctx, id), name)
	c.authed = true
	return resp, true
}

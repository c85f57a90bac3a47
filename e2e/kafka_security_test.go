package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/queen-node/queen-node/kafka"
	"github.com/queen-node/queen-node/nodeproc"
	"github.com/queen-node/queen-node/tlsfiles/tlstest"
)

// The Kafka listener's security: SASL PLAIN and OAUTHBEARER carrying a
// queen-node JWT, the token's role and queues scope on produce, a bad
// token closing the connection, no way in without SASL when JWT is on
// (unless --kafka-trusted-network), TLS, and the start-up refusals of
// --require-secure and of an advertised address clients cannot reach.

// kafkaToken signs claims with the secret the JWT nodes of these tests
// take (ctlJWTSecret); exp defaults to ten minutes from now.
func kafkaToken(t testing.TB, secret string, claims map[string]any) string {
	t.Helper()
	if _, ok := claims["exp"]; !ok {
		claims["exp"] = time.Now().Add(10 * time.Minute).Unix()
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(secret)}, nil)
	must(t, err)
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	must(t, err)
	return tok
}

// startJWTKafkaNode starts a node with JWT on (HS256, ctlJWTSecret) and
// its Kafka listener; nodeproc's own HTTP calls carry an admin token.
func startJWTKafkaNode(t testing.TB, extra ...string) (*node, string) {
	t.Helper()
	dir := t.TempDir()
	admin := kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "ops", "role": "admin"})
	pn, err := nodeproc.NewNode(nodeproc.Spec{Bin: binPath, ID: "n1", DataDir: filepath.Join(dir, "data"),
		LogPath: filepath.Join(dir, "node.log"), Kafka: true, Token: admin,
		Flags: append([]string{"--default-subscription-mode", "all", "--jwt-enabled", "--jwt-secret", ctlJWTSecret}, extra...)})
	must(t, err)
	n := testNode(t, pn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must(t, n.Start(ctx))
	return n, n.Addrs().Kafka
}

func plainSASL(tok string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: "alice", Pass: tok}.AsMechanism())
}

func oauthSASL(tok string) kgo.Opt {
	return kgo.SASL(oauth.Auth{Token: tok}.AsMechanism())
}

// consumeN reads n records of topic from the start with a direct
// (groupless) consumer.
func consumeN(t testing.TB, ctx context.Context, seeds []string, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := kafkaClient(t, seeds, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	var got []*kgo.Record
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && ctx.Err() == nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		got = append(got, fs.Records()...)
	}
	if len(got) < n {
		t.Fatalf("consume %s: %d of %d records", topic, len(got), n)
	}
	return got
}

// endOffsets is every partition's end offset of topic.
func endOffsets(t testing.TB, ctx context.Context, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	res, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	must(t, err)
	out := map[int32]int64{}
	res.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	if len(out) == 0 {
		t.Fatalf("no end offsets of %s", topic)
	}
	return out
}

// 1. SASL/PLAIN with a JWT as the password, and SASL/OAUTHBEARER with the
// JWT as the bearer token: a producer writes, a consumer reads.
func TestKafkaSASLPlainAndOAuthBearerWithAJWT(t *testing.T) {
	_, addr := startJWTKafkaNode(t)
	seeds := []string{addr}
	tok := kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "alice", "role": "read-write"})
	for _, c := range []struct {
		mech string
		opt  kgo.Opt
	}{{"PLAIN", plainSASL(tok)}, {"OAUTHBEARER", oauthSASL(tok)}} {
		t.Run(c.mech, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			topic := "sasl-" + strings.ToLower(c.mech)
			cl := kafkaClient(t, seeds, c.opt)
			createTopic(t, cl, topic, 2)
			var sent []*kgo.Record
			for i := range 6 {
				sent = append(sent, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: []byte(fmt.Sprintf(`{"i":%d}`, i))})
			}
			if err := cl.ProduceSync(ctx, sent...).FirstErr(); err != nil {
				t.Fatalf("produce over SASL/%s: %v", c.mech, err)
			}
			got := consumeN(t, ctx, seeds, topic, len(sent), c.opt)
			want := map[string]string{}
			for _, r := range sent {
				want[string(r.Key)] = string(r.Value)
			}
			for _, r := range got {
				if want[string(r.Key)] != string(r.Value) {
					t.Fatalf("record %s: got %q, sent %q", r.Key, r.Value, want[string(r.Key)])
				}
				delete(want, string(r.Key))
			}
			if len(want) != 0 {
				t.Fatalf("never consumed: %v", want)
			}
		})
	}
}

// 2. A token scoped to the queues prefix "team-a-" (the claim is a list of
// name prefixes, auth/scope.go) produces to team-a-orders; its produce to
// team-b-orders is TOPIC_AUTHORIZATION_FAILED, both through franz-go (the
// topic's metadata) and as a raw Produce request (the produce path's own
// check), and team-b-orders stays empty. The scoped token's metadata
// listing leaves team-b out.
func TestKafkaScopedTokenReachesOnlyItsTopics(t *testing.T) {
	_, addr := startJWTKafkaNode(t)
	seeds := []string{addr}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kafkaClient(t, seeds, plainSASL(kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "ops", "role": "admin"})))
	createTopic(t, admin, "team-a-orders", 1)
	createTopic(t, admin, "team-b-orders", 1)
	before := endOffsets(t, ctx, admin, "team-b-orders")

	scoped := kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "team-a", "role": "read-write", "queues": []string{"team-a-"}})
	cl := kafkaClient(t, seeds, plainSASL(scoped))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "team-a-orders", Value: []byte(`{"ok":1}`)}).FirstErr(); err != nil {
		t.Fatalf("produce to team-a-orders with a team-a- token: %v", err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	err := cl.ProduceSync(pctx, &kgo.Record{Topic: "team-b-orders", Value: []byte(`{"no":1}`)}).FirstErr()
	pcancel()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to team-b-orders with a team-a- token: got %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// The raw request: the produce path refuses it before it decodes a
	// batch, whatever the client learnt from metadata.
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = -1, 5000
	for _, topic := range []string{"team-b-orders", "team-a-orders"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = kafka.AppendBatch(nil, []kafka.FetchedRecord{{Record: kafka.Record{Value: []byte(`{"raw":1}`), Timestamp: time.Now().UnixMilli()}}})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	raw, err := cl.Request(ctx, req)
	must(t, err)
	codes := map[string]int16{}
	for _, rt := range raw.(*kmsg.ProduceResponse).Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["team-b-orders"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("raw produce to team-b-orders: code %d (%v), want TOPIC_AUTHORIZATION_FAILED", codes["team-b-orders"], kerr.ErrorForCode(codes["team-b-orders"]))
	}
	if codes["team-a-orders"] != 0 {
		t.Fatalf("raw produce to team-a-orders beside it: %v", kerr.ErrorForCode(codes["team-a-orders"]))
	}

	// A listing leaves out what the token does not reach.
	meta, err := kadm.NewClient(cl).Metadata(ctx)
	must(t, err)
	if _, ok := meta.Topics["team-b-orders"]; ok {
		t.Fatalf("the team-a- token's metadata listing names team-b-orders: %v", meta.Topics.Names())
	}
	if _, ok := meta.Topics["team-a-orders"]; !ok {
		t.Fatalf("the team-a- token's metadata listing misses team-a-orders: %v", meta.Topics.Names())
	}

	// Nothing reached team-b; team-a got both records.
	after := endOffsets(t, ctx, admin, "team-b-orders")
	if after[0] != before[0] {
		t.Fatalf("team-b-orders end offset moved %d -> %d: a refused produce was written", before[0], after[0])
	}
	got := consumeN(t, ctx, seeds, "team-a-orders", 2, plainSASL(scoped))
	if len(got) != 2 {
		t.Fatalf("team-a-orders: %d records", len(got))
	}
}

// rawConn is a Kafka connection written and read by hand, to see exactly
// what the listener answers and when it closes.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(15 * time.Second))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes req at version v.
func (rc *rawConn) send(req kmsg.Request, v int16) {
	rc.t.Helper()
	req.SetVersion(v)
	rc.corr++
	b := make([]byte, 4, 128)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(v))
	b = binary.BigEndian.AppendUint32(b, uint32(rc.corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "raw"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write %s: %v", kmsg.NameForKey(req.Key()), err)
	}
}

// recv reads the answer to the last request sent; an error is the
// connection's (io.EOF: the listener closed it).
func (rc *rawConn) recv(req kmsg.Request) (kmsg.Response, error) {
	var size [4]byte
	if _, err := io.ReadFull(rc.r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.r, body); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != rc.corr {
		rc.t.Fatalf("correlation id %d, want %d", corr, rc.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // no tagged fields in our listener's headers
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decode %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// closed asserts the listener closed the connection without answering.
func (rc *rawConn) closed(what string, req kmsg.Request) {
	rc.t.Helper()
	resp, err := rc.recv(req)
	if err == nil {
		rc.t.Fatalf("%s: answered %+v, want the connection closed", what, resp)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "connection reset") {
		rc.t.Fatalf("%s: %v, want the connection closed (EOF)", what, err)
	}
}

// saslAuth runs SaslHandshake v1 for mech and SaslAuthenticate v1 with
// authBytes; it returns the authenticate answer.
func (rc *rawConn) saslAuth(mech string, authBytes []byte) *kmsg.SASLAuthenticateResponse {
	rc.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech
	rc.send(hs, 1)
	resp, err := rc.recv(hs)
	must(rc.t, err)
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		rc.t.Fatalf("SaslHandshake %s: %v", mech, kerr.ErrorForCode(code))
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SASLAuthBytes = authBytes
	rc.send(au, 1)
	ar, err := rc.recv(au)
	must(rc.t, err)
	return ar.(*kmsg.SASLAuthenticateResponse)
}

func plainBytes(tok string) []byte { return []byte("\x00alice\x00" + tok) }

// 3. A token the node did not sign, an expired one and one whose queues
// claim does not read fail SASL authentication (SASL_AUTHENTICATION_FAILED)
// and the listener closes the connection; a read-only token authenticates
// and reads but cannot produce.
func TestKafkaBadTokensAndAReadOnlyRole(t *testing.T) {
	n, addr := startJWTKafkaNode(t)
	seeds := []string{addr}
	bad := map[string]string{
		"signed with another secret":        kafkaToken(t, "another-secret-of-enough-length-for-hs256", map[string]any{"sub": "eve", "role": "admin"}),
		"expired":                           kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "old", "role": "admin", "exp": time.Now().Add(-time.Hour).Unix()}),
		"not a JWT":                         "not.a.token",
		"a queues claim that does not read": kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "x", "role": "admin", "queues": "team-a-"}),
	}
	for what, tok := range bad {
		for _, mech := range []string{"PLAIN", "OAUTHBEARER"} {
			t.Run(what+"/"+mech, func(t *testing.T) {
				// franz-go sees the broker's SASL error.
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				opt := plainSASL(tok)
				if mech == "OAUTHBEARER" {
					opt = oauthSASL(tok)
				}
				cl := kafkaClient(t, seeds, opt, kgo.RetryTimeout(2*time.Second))
				if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("ping with a token %s: %v, want SASL_AUTHENTICATION_FAILED", what, err)
				}
				// By hand: the failure is answered, then the connection closed.
				rc := dialRaw(t, addr)
				authBytes := plainBytes(tok)
				if mech == "OAUTHBEARER" {
					authBytes = []byte("n,,\x01auth=Bearer " + tok + "\x01\x01")
				}
				ar := rc.saslAuth(mech, authBytes)
				if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
					t.Fatalf("SaslAuthenticate with a token %s: code %d (%v)", what, ar.ErrorCode, kerr.ErrorForCode(ar.ErrorCode))
				}
				md := kmsg.NewPtrMetadataRequest()
				rc.send(md, 1)
				rc.closed("metadata after a failed authentication", md)
			})
		}
	}
	if !strings.Contains(n.Tail(200000), "kafka: SASL authentication failed") {
		t.Error("the node's log does not say SASL authentication failed")
	}

	// A read-only token: in, reads, never writes.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := kafkaClient(t, seeds, plainSASL(kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "ops", "role": "admin"})))
	createTopic(t, admin, "ro-topic", 1)
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "ro-topic", Value: []byte(`{"by":"admin"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := endOffsets(t, ctx, admin, "ro-topic")
	ro := plainSASL(kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "viewer", "role": "read-only"}))
	if got := consumeN(t, ctx, seeds, "ro-topic", 1, ro); string(got[0].Value) != `{"by":"admin"}` {
		t.Fatalf("read-only consume: %q", got[0].Value)
	}
	// Plain (non-idempotent) produce: the Produce answer.
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	err := kafkaClient(t, seeds, ro, kgo.DisableIdempotentWrite()).ProduceSync(pctx, &kgo.Record{Topic: "ro-topic", Value: []byte(`{"by":"viewer"}`)}).FirstErr()
	pcancel()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("read-only produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Idempotent produce: InitProducerId is refused first, as Kafka
	// refuses a non-transactional one (CLUSTER_AUTHORIZATION_FAILED).
	pctx, pcancel = context.WithTimeout(ctx, 20*time.Second)
	err = kafkaClient(t, seeds, ro).ProduceSync(pctx, &kgo.Record{Topic: "ro-topic", Value: []byte(`{"by":"viewer"}`)}).FirstErr()
	pcancel()
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("read-only idempotent produce: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if after := endOffsets(t, ctx, admin, "ro-topic"); after[0] != before[0] {
		t.Fatalf("ro-topic end offset moved %d -> %d under a read-only token", before[0], after[0])
	}
}

// 4. JWT on and no SASL: ApiVersions is answered (a client learns what to
// speak), anything else before SaslAuthenticate closes the connection, and
// so does a SaslAuthenticate without a handshake (ILLEGAL_SASL_STATE);
// franz-go without SASL fails. There is no setting that turns SASL off
// with JWT on: --kafka-trusted-network is the only way in without it, and
// with it the same client works.
func TestKafkaJWTOnWithoutSASL(t *testing.T) {
	_, addr := startJWTKafkaNode(t)
	rc := dialRaw(t, addr)
	av := kmsg.NewPtrApiVersionsRequest()
	rc.send(av, 3)
	resp, err := rc.recv(av)
	must(t, err)
	if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 || len(resp.(*kmsg.ApiVersionsResponse).ApiKeys) == 0 {
		t.Fatalf("ApiVersions before SASL: code %d, %d keys", code, len(resp.(*kmsg.ApiVersionsResponse).ApiKeys))
	}
	md := kmsg.NewPtrMetadataRequest()
	rc.send(md, 9)
	rc.closed("metadata without SASL", md)

	rc = dialRaw(t, addr)
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = append(ct.Topics, kmsg.CreateTopicsRequestTopic{Topic: "sneaky", NumPartitions: 1, ReplicationFactor: -1})
	rc.send(ct, 4)
	rc.closed("CreateTopics without SASL", ct)

	rc = dialRaw(t, addr)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SASLAuthBytes = plainBytes(kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "ops", "role": "admin"}))
	rc.send(au, 1)
	ar, err := rc.recv(au)
	must(t, err)
	if code := ar.(*kmsg.SASLAuthenticateResponse).ErrorCode; code != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate without a handshake: %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(code))
	}
	rc.send(md, 9)
	rc.closed("metadata after an illegal SASL state", md)

	rc = dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "SCRAM-SHA-256"
	rc.send(hs, 1)
	hr, err := rc.recv(hs)
	must(t, err)
	if h := hr.(*kmsg.SASLHandshakeResponse); h.ErrorCode != kerr.UnsupportedSaslMechanism.Code ||
		strings.Join(h.SupportedMechanisms, ",") != "PLAIN,OAUTHBEARER" {
		t.Fatalf("SaslHandshake SCRAM: %v, mechanisms %v", kerr.ErrorForCode(h.ErrorCode), h.SupportedMechanisms)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{addr}, kgo.RetryTimeout(2*time.Second))
	if _, err := kadm.NewClient(cl).Metadata(ctx); err == nil {
		t.Fatal("franz-go without SASL read metadata of a JWT node")
	} else if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); !ok && !errors.Is(err, io.EOF) {
		t.Logf("franz-go without SASL: %v", err)
	}

	// --kafka-trusted-network: the same client, no SASL, is let in.
	tn, taddr := startJWTKafkaNode(t, "--kafka-trusted-network")
	tcl := kafkaClient(t, []string{taddr})
	createTopic(t, tcl, "trusted", 1)
	if err := tcl.ProduceSync(ctx, &kgo.Record{Topic: "trusted", Value: []byte(`{"t":1}`)}).FirstErr(); err != nil {
		t.Fatalf("produce on a trusted network: %v", err)
	}
	if !strings.Contains(tn.Tail(200000), "--kafka-trusted-network lets Kafka clients in without SASL") {
		t.Error("a trusted-network node with JWT on does not warn that Kafka clients come in without SASL")
	}
}

// runRefused runs the binary with args and expects it to exit non-zero,
// saying each of want.
func runRefused(t *testing.T, what string, args []string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := []string{"--node-id", "refused", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}
	cmd := exec.CommandContext(ctx, binPath, append(base, args...)...)
	cmd.Env = callerEnvForRefusal()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s: the node started (still running after 30s):\n%s", what, out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("%s: want a non-zero exit, got %v:\n%s", what, err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("%s: the exit does not say %q:\n%s", what, w, out)
		}
	}
}

// callerEnvForRefusal is the environment without queen-node's variables
// (so that a QUEEN_* of the caller's does not change the flags).
func callerEnvForRefusal() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEEN_") && !strings.HasPrefix(kv, "JWT_") {
			env = append(env, kv)
		}
	}
	return env
}

// 5. The Kafka listener over TLS with its own pair (--kafka-tls-cert/key),
// here on every address under --require-secure with JWT on and SASL:
// franz-go trusting the CA round-trips a record; a plaintext client and a
// client that does not trust the CA fail. --require-secure refuses the
// same node with --kafka-trusted-network (clients without SASL) or
// without the Kafka TLS pair.
func TestKafkaTLSListener(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "kafka test CA")
	certFile, keyFile := ca.Issue(t, dir, "kafka")
	addrs, err := nodeproc.FreeAddrs(1, nil)
	must(t, err)
	a := addrs[0]
	_, port, _ := net.SplitHostPort(a.Kafka)
	wild := "0.0.0.0:" + port
	secure := []string{"--jwt-enabled", "--jwt-secret", ctlJWTSecret, "--require-secure",
		"--kafka-addr", wild, "--kafka-advertised-addr", a.Kafka}
	tlsFlags := []string{"--kafka-tls-cert", certFile, "--kafka-tls-key", keyFile}

	runRefused(t, "--require-secure with --kafka-trusted-network", append(append(append([]string{}, secure...), tlsFlags...), "--kafka-trusted-network"),
		"--require-secure: refusing to start", "lets clients in without SASL (--kafka-trusted-network)")
	runRefused(t, "--require-secure without Kafka TLS", secure,
		"--require-secure: refusing to start", "the Kafka listener serves "+wild+" without TLS")

	admin := kafkaToken(t, ctlJWTSecret, map[string]any{"sub": "ops", "role": "admin"})
	pn, err := nodeproc.NewNode(nodeproc.Spec{Bin: binPath, ID: "n1", DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "node.log"),
		Addrs: a, Token: admin, Flags: append(append([]string{"--default-subscription-mode", "all"}, secure...), tlsFlags...)})
	must(t, err)
	n := testNode(t, pn)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	must(t, n.Start(ctx))
	if log := n.Tail(200000); !strings.Contains(log, "kafka listener started") || !strings.Contains(log, "tls=true sasl=true") {
		t.Fatalf("the Kafka listener's start line does not say tls=true sasl=true:\n%s", n.Tail(4000))
	}

	seeds := []string{a.Kafka}
	auth := plainSASL(admin)
	cl := kafkaClient(t, seeds, auth, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool()}))
	createTopic(t, cl, "tls-topic", 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tls-topic", Key: []byte("k"), Value: []byte(`{"over":"tls"}`)}).FirstErr(); err != nil {
		t.Fatalf("produce over TLS: %v", err)
	}
	got := consumeN(t, ctx, seeds, "tls-topic", 1, auth, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool()}))
	if string(got[0].Key) != "k" || string(got[0].Value) != `{"over":"tls"}` {
		t.Fatalf("consumed over TLS: %q %q", got[0].Key, got[0].Value)
	}

	for _, c := range []struct {
		what string
		opts []kgo.Opt
	}{
		{"a plaintext client", nil},
		{"a client that does not trust the CA", []kgo.Opt{kgo.DialTLSConfig(&tls.Config{})}},
	} {
		pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
		pc := kafkaClient(t, seeds, append([]kgo.Opt{auth, kgo.RetryTimeout(2 * time.Second)}, c.opts...)...)
		if err := pc.Ping(pctx); err == nil {
			t.Errorf("%s reached the TLS listener", c.what)
		} else {
			t.Logf("%s: %v", c.what, err)
		}
		pcancel()
	}
	// By hand, a plaintext ApiVersions is not answered.
	rc := dialRaw(t, a.Kafka)
	rc.c.SetDeadline(time.Now().Add(5 * time.Second))
	av := kmsg.NewPtrApiVersionsRequest()
	rc.send(av, 3)
	if resp, err := rc.recv(av); err == nil {
		t.Fatalf("the TLS listener answered a plaintext ApiVersions: %+v", resp)
	}
}

// 6. An advertised Kafka address clients cannot reconnect to is refused at
// start: a wildcard host (given, or --kafka-addr's when nothing else says
// where), no port, port 0.
func TestKafkaAdvertisedAddrRefused(t *testing.T) {
	for _, c := range []struct {
		what string
		args []string
		want string
	}{
		{"a wildcard --kafka-advertised-addr", []string{"--kafka-addr", "127.0.0.1:0", "--kafka-advertised-addr", "0.0.0.0:9092"}, `--kafka-advertised-addr="0.0.0.0:9092" is a wildcard`},
		{"an IPv6 wildcard", []string{"--kafka-addr", "127.0.0.1:0", "--kafka-advertised-addr", "[::]:9092"}, `is a wildcard`},
		{"an empty host", []string{"--kafka-addr", "127.0.0.1:0", "--kafka-advertised-addr", ":9092"}, `is a wildcard`},
		{"no port", []string{"--kafka-addr", "127.0.0.1:0", "--kafka-advertised-addr", "kafka.example.com"}, `clients need a host and a port`},
		{"port 0", []string{"--kafka-addr", "127.0.0.1:0", "--kafka-advertised-addr", "kafka.example.com:0"}, `clients need a host and a port`},
		{"--kafka-addr on every address, nothing advertised", []string{"--kafka-addr", "0.0.0.0:19092"}, `is a wildcard`},
	} {
		t.Run(c.what, func(t *testing.T) { runRefused(t, c.what, c.args, c.want) })
	}
}

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The fuzzer writes its requests on the wire itself (a method, a request
// target and headers exactly as generated; a body with Content-Length or
// chunked) over one keep-alive connection, and reads the answer with
// net/http's response parser.

// req is one request as sent.
type req struct {
	Method string
	Target string     // path and query, as written on the request line
	Header [][]string // name, value pairs in order (Host and the body framing are added)
	Body   []byte
	// Chunked sends the body with Transfer-Encoding: chunked.
	Chunked bool

	// What the generator meant, for the checks and the report.
	Pattern  string   // the route the request was made from
	Reached  string   // the route it reached ("no route": the node's 404)
	Token    string   // the token kind's name
	Valid    bool     // a request of the spec's shape, sent to build state
	Keyed    bool     // carries a valid Idempotency-Key on a route that takes one
	Mutation []string // what was changed
	Seq      int
	Scope    string // a scoped transaction: "outside" its scope (403, nothing written) or "inside"
	undo     bool   // the fuzzer's own request putting the switches back
}

func (r *req) header(name string) string {
	for _, h := range r.Header {
		if strings.EqualFold(h[0], name) {
			return h[1]
		}
	}
	return ""
}

// resp is an answer.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// errNoAnswer is a request that got no answer before its deadline.
var errNoAnswer = errors.New("no answer before the deadline")

// errSend is a request that could not be written whole: the server closed
// the connection while it was being sent.
var errSend = errors.New("the connection closed while the request was being sent")

type client struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	used bool // the connection has carried a request
}

func (c *client) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.br = nil, nil
	}
}

func (c *client) dial() error {
	conn, err := net.DialTimeout("tcp", c.addr, 3*time.Second)
	if err != nil {
		return err
	}
	c.conn, c.br, c.used = conn, bufio.NewReaderSize(conn, 64<<10), false
	return nil
}

// do sends r and reads its answer within timeout. A reused connection the
// server closed in the meantime (no byte of an answer came) is redialled
// once.
func (c *client) do(r *req, timeout time.Duration) (*resp, error) {
	for attempt := 0; ; attempt++ {
		if c.conn == nil {
			if err := c.dial(); err != nil {
				return nil, err
			}
		}
		reused := c.used
		c.used = true
		out, gotBytes, err := c.roundTrip(r, timeout)
		if err == nil {
			return out, nil
		}
		c.close()
		if reused && !gotBytes && attempt == 0 && !errors.Is(err, errNoAnswer) {
			continue
		}
		return nil, err
	}
}

func (c *client) roundTrip(r *req, timeout time.Duration) (*resp, bool, error) {
	c.conn.SetDeadline(time.Now().Add(timeout))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.Method, r.Target, c.addr)
	for _, h := range r.Header {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	switch {
	case r.Chunked:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		for rest := r.Body; len(rest) > 0; {
			n := min(len(rest), 1+len(rest)/3)
			fmt.Fprintf(&b, "%x\r\n", n)
			b.Write(rest[:n])
			b.WriteString("\r\n")
			rest = rest[n:]
		}
		b.WriteString("0\r\n\r\n")
	case r.Body != nil:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(r.Body))
		b.Write(r.Body)
	default:
		b.WriteString("\r\n")
	}
	if _, err := c.conn.Write(b.Bytes()); err != nil {
		return nil, false, fmt.Errorf("%w: %w", errSend, timeoutAs(err))
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, false, timeoutAs(err)
	}
	hr, err := http.ReadResponse(c.br, &http.Request{Method: r.Method})
	if err != nil {
		return nil, true, timeoutAs(err)
	}
	body, err := io.ReadAll(io.LimitReader(hr.Body, 256<<20))
	hr.Body.Close()
	if err != nil {
		return nil, true, timeoutAs(err)
	}
	if hr.Close {
		c.close()
	}
	return &resp{Status: hr.StatusCode, Header: hr.Header, Body: body}, true, nil
}

func timeoutAs(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errNoAnswer
	}
	return err
}

// curl is the request as a command line that sends it again (bash).
func (r *req) curl(base string) string {
	var b strings.Builder
	b.WriteString("curl -sS -i -X " + shellQuote(r.Method))
	for _, h := range r.Header {
		b.WriteString(" -H " + shellQuote(h[0]+": "+h[1]))
	}
	if r.Chunked {
		b.WriteString(" -H 'Transfer-Encoding: chunked'")
	}
	if r.Body != nil {
		if len(r.Body) > 4096 {
			fmt.Fprintf(&b, " --data-binary @body.bin   # %d bytes; body.bin starts %s", len(r.Body), shellQuote(string(r.Body[:256])))
		} else {
			b.WriteString(" --data-binary " + shellQuote(string(r.Body)))
		}
	}
	b.WriteString(" --path-as-is " + shellQuote(base+r.Target))
	return b.String()
}

// shellQuote quotes s for bash: '...' when it is printable ASCII, else
// $'...' with \xHH escapes.
func shellQuote(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			plain = false
			break
		}
	}
	if plain {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteString(`\x` + strconv.FormatUint(uint64(c)>>4, 16) + strconv.FormatUint(uint64(c)&0xf, 16))
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("'")
	return b.String()
}

package main

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// keyedRoutes take an Idempotency-Key.
var keyedRoutes = map[string]bool{"POST /api/v1/push": true, "POST /api/v1/kv": true, "POST /api/v1/timers": true,
	"POST /api/v1/transaction": true, "POST /api/v1/locks": true}

// togglePatterns are the operator's switches: a change is undone a few
// requests later, so that the run does not spend itself in maintenance.
var togglePatterns = map[string]bool{"POST /api/v1/system/maintenance": true, "POST /api/v1/system/maintenance/pop": true,
	"POST /api/v1/system/kv-timers": true}

// writeRoute reports whether a route pattern (or a request that matched no
// route) may change state: every method but GET, HEAD and OPTIONS, and the
// pops, which take leases.
func writeRoute(method, pattern string) bool {
	if strings.HasPrefix(pattern, "GET /api/v1/pop") {
		return true
	}
	return method != "GET" && method != "HEAD" && method != "OPTIONS"
}

// build writes a base out as the request of pattern.
func build(pattern string, b base) *req {
	method, path, _ := strings.Cut(pattern, " ")
	r := &req{Method: method, Pattern: pattern}
	r.Target = fillPath(path, b.params, false) + encodeQuery(b.query, false)
	switch {
	case b.rawBod != nil:
		r.Body = b.rawBod
	case b.body != nil:
		r.Body = encode(b.body)
	case method == "POST" || method == "PUT":
		if !b.noBody {
			r.Body = []byte("{}")
		}
	}
	if r.Body != nil {
		r.Header = append(r.Header, []string{"Content-Type", "application/json"})
	}
	return r
}

// fillPath puts the parameters in the pattern's path. raw leaves a value
// unescaped (bytes as they are on the request line).
func fillPath(path string, params [][2]string, raw bool) string {
	for _, p := range params {
		for _, form := range []string{"{" + p[0] + "...}", "{" + p[0] + "}"} {
			if !strings.Contains(path, form) {
				continue
			}
			v := p[1]
			if !raw {
				if strings.HasSuffix(form, "...}") {
					segs := strings.Split(v, "/")
					for i, s := range segs {
						segs[i] = url.PathEscape(s)
					}
					v = strings.Join(segs, "/")
				} else {
					v = url.PathEscape(v)
				}
			}
			path = strings.Replace(path, form, v, 1)
			break
		}
	}
	return path
}

func encodeQuery(q [][2]string, raw bool) string {
	if len(q) == 0 {
		return ""
	}
	var b strings.Builder
	for i, kv := range q {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		if raw {
			b.WriteString(kv[0] + "=" + kv[1])
		} else {
			b.WriteString(url.QueryEscape(kv[0]) + "=" + url.QueryEscape(kv[1]))
		}
	}
	return b.String()
}

// Mutations of a whole request.

var (
	methods     = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "get", "FOO", "M-SEARCH"}
	queryNames  = []string{"batch", "wait", "timeout", "consumerGroup", "partitions", "autoAck", "leaseSeconds", "subscriptionMode", "subscriptionFrom", "conflation", "limit", "offset", "after", "mode", "prefix", "minLagSeconds", "deleteMetadata", "consistency", "txn", "queue", "namespace", "task", "from", "to", "before", "partition", "status", "ns", "group"}
	queryValues = []string{"-1", "0", "1", "true", "false", "TRUE", "yes", "", "1e99", "99999999999999999999", "9223372036854775807", "-9223372036854775808", "0x10", " 1", "1.5", "now", "stale", "linearizable", "count", "list", "__QUEUE_MODE__", "pending", "dead_letter", "2026-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "2026-13-45T99:99:99Z", "garbage", "ü", "%00", "\u0000"}
	rawQueries  = []string{"?", "?&&==&", "?a=%zz", "?%", "?batch=%ff%fe", "?wait=true&timeout=", "?=1", "?a;b=c", "?timeout=100&timeout=-5&wait=true&wait=false"}
)

// mutateRequest changes the request in one way: its body (as a tree or as
// bytes), query, path, method, Idempotency-Key or framing.
func (g *gen) mutateRequest(r *req, b base, maxBody int) {
	r2 := g.r
	hasJSON := b.body != nil
	for tries := 0; tries < 4; tries++ {
		switch k := r2.IntN(100); {
		case k < 35 && hasJSON:
			v, what := mutateTree(r2, b.body)
			r.Body = encode(v)
			r.Mutation = append(r.Mutation, what...)
		case k < 52:
			body := r.Body
			if body == nil {
				body = []byte("{}")
			}
			var what string
			r.Body, what = mutateText(r2, body, maxBody)
			r.Mutation = append(r.Mutation, what)
		case k < 64:
			r.Target = strings.SplitN(r.Target, "?", 2)[0] + g.mutateQuery(b.query)
			r.Mutation = append(r.Mutation, "query")
		case k < 76:
			var what string
			r.Target, what = g.mutatePath(r.Pattern, b, r.Target)
			r.Mutation = append(r.Mutation, what)
		case k < 84:
			r.Method = pick(r2, methods)
			r.Mutation = append(r.Mutation, "method "+r.Method)
		case k < 94:
			if !keyedRoutes[r.Pattern] {
				continue
			}
			r.Mutation = append(r.Mutation, g.idemKey(r))
		default:
			if r.Body == nil {
				continue
			}
			switch r2.IntN(3) {
			case 0:
				r.Chunked = true
				r.Mutation = append(r.Mutation, "chunked")
			case 1:
				r.Header = dropHeader(r.Header, "Content-Type")
				r.Header = append(r.Header, []string{"Content-Type", pick(r2, []string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-16", "multipart/form-data; boundary=x"})})
				r.Mutation = append(r.Mutation, "content type")
			default:
				r.Header = dropHeader(r.Header, "Content-Type")
				r.Mutation = append(r.Mutation, "no content type")
			}
		}
		if r2.IntN(3) != 0 {
			break
		}
	}
	// A body far past the node's limit proves nothing more than one just
	// past it (413), and costs the run its time.
	if len(r.Body) > maxBody+8<<10 {
		n := maxBody + 1 + r2.IntN(4096)
		r.Body = r.Body[:n:n]
		r.Mutation = append(r.Mutation, "cut to "+strconv.Itoa(len(r.Body))+" bytes")
	}
}

func dropHeader(h [][]string, name string) [][]string {
	var out [][]string
	for _, kv := range h {
		if !strings.EqualFold(kv[0], name) {
			out = append(out, kv)
		}
	}
	return out
}

func (g *gen) mutateQuery(q [][2]string) string {
	r := g.r
	if r.IntN(5) == 0 {
		return pick(r, rawQueries)
	}
	out := append([][2]string(nil), q...)
	for range 1 + r.IntN(3) {
		name := pick(r, queryNames)
		if len(out) > 0 && r.IntN(2) == 0 {
			name = out[r.IntN(len(out))][0]
		}
		out = append(out, [2]string{name, pick(r, queryValues)})
	}
	if r.IntN(10) == 0 {
		out = append(out, [2]string{"pad", strings.Repeat("q", 5000)})
	}
	return encodeQuery(out, false)
}

func (g *gen) mutatePath(pattern string, b base, target string) (string, string) {
	r := g.r
	_, path, _ := strings.Cut(pattern, " ")
	query := ""
	if i := strings.IndexByte(target, '?'); i >= 0 {
		query = target[i:]
	}
	switch k := r.IntN(10); {
	case k < 5 && len(b.params) > 0:
		params := append([][2]string(nil), b.params...)
		j := r.IntN(len(params))
		v := pick(r, append(oddStrings, strings.Repeat("p", 600), strings.Repeat("ü", 300), "."))
		rawV := r.IntN(4) == 0
		if rawV {
			v = pick(r, []string{"%zz", "%", "a%2", "%00", "%2e%2e", "ü", "a%2Fb", "%ff", "..", "~", "a;b", "%20"})
		}
		if params[j][0] == "id" && v == g.w.nodeID {
			v = "not-" + v
		}
		params[j][1] = v
		return fillPath(path, params, rawV) + query, "path parameter " + params[j][0] + "=" + strconv.QuoteToASCII(v)
	case k < 7:
		return strings.SplitN(target, "?", 2)[0] + pick(r, []string{"/", "/x", "//", "/..", "/%2e", "/ü"}) + query, "path suffix"
	case k < 8:
		return strings.Replace(target, "/api/v1/", pick(r, []string{"/API/v1/", "/api/v2/", "/api//v1/", "/api/v1/../v1/", "/api/./v1/"}), 1), "path prefix"
	}
	words := []string{"api", "v1", "queues", "kv", "timers", "system", "pop", "queue", "x", "..", "%00", "ü", "", "streams", "messages", "traces", "status", "analytics", "locks"}
	var p strings.Builder
	for range 1 + r.IntN(5) {
		p.WriteString("/" + pick(r, words))
	}
	return p.String() + query, "random path"
}

// idemKey gives a request an Idempotency-Key: a new one, one used before
// (with this body or another), or one that is not a key (too long, not
// printable, empty).
func (g *gen) idemKey(r *req) string {
	var k string
	switch g.r.IntN(8) {
	case 0, 1, 2:
		g.seq++
		k = fmt.Sprintf("fz-key-%d-%d", g.r.Uint32(), g.seq)
	case 3, 4:
		if len(g.w.keys) == 0 {
			return "no key yet"
		}
		k = pick(g.r, g.w.keys)
	case 5:
		k = strings.Repeat("k", 256+g.r.IntN(100))
	case 6:
		k = pick(g.r, []string{"k\x80ey", "ü", "k\xff"})
	default:
		k = pick(g.r, []string{"", " ", "a key", "\t"})
	}
	r.Header = append(r.Header, []string{"Idempotency-Key", k})
	if validKey(k) {
		g.w.keys = keepLast(append(g.w.keys, k), 20)
	}
	return "Idempotency-Key " + strconv.QuoteToASCII(k)
}

// validKey reports whether the node takes k (as the header arrives, trimmed)
// as an Idempotency-Key (package idempotency's rule).
func validKey(k string) bool {
	k = strings.Trim(k, " \t")
	if k == "" || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

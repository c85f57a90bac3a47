package main

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The request bodies are built as a small JSON tree that keeps member order
// and may hold a name twice, so that a mutation can drop, duplicate or
// retype any member, and written out by hand, so that numbers and strings
// can be anything the wire can carry (1e400, invalid UTF-8).

// obj is a JSON object: members in order, names may repeat.
type obj struct {
	keys []string
	vals []any
}

// o builds an object from name, value pairs.
func o(kv ...any) *obj {
	x := &obj{}
	for i := 0; i+1 < len(kv); i += 2 {
		x.keys = append(x.keys, kv[i].(string))
		x.vals = append(x.vals, kv[i+1])
	}
	return x
}

func (x *obj) set(k string, v any) *obj {
	for i, kk := range x.keys {
		if kk == k {
			x.vals[i] = v
			return x
		}
	}
	x.keys, x.vals = append(x.keys, k), append(x.vals, v)
	return x
}

func (x *obj) clone() *obj {
	return &obj{keys: append([]string(nil), x.keys...), vals: append([]any(nil), x.vals...)}
}

// raw is JSON text written as it is (a number such as 1e400, a string
// literal holding bytes that are not UTF-8, a deliberately broken token).
type raw string

// encode writes v as JSON text.
func encode(v any) []byte { return appendJSON(nil, v) }

func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case string:
		return appendString(b, x)
	case raw:
		return append(b, x...)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case *obj:
		b = append(b, '{')
		for i, k := range x.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendJSON(b, x.vals[i])
		}
		return append(b, '}')
	}
	panic("fuzzhttp: cannot encode " + strconv.Quote(strings.TrimSpace(typeName(v))))
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case int, int64, uint64, float64:
		return "number"
	case string:
		return "string"
	case raw:
		return "raw"
	case []any:
		return "array"
	case *obj:
		return "object"
	}
	return "?"
}

// appendString writes s as a JSON string; bytes that are not UTF-8 go out
// as they are (the only way to put them on the wire).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		b = append(b, s[i:i+n]...)
		i += n
	}
	return append(b, '"')
}

// count is the number of values in the tree (every member and element).
func count(v any) int {
	n := 1
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			n += count(e)
		}
	case *obj:
		for _, e := range x.vals {
			n += count(e)
		}
	}
	return n
}

// at applies f to the target-th value of the tree (pre-order, the root is
// 0) and returns the tree with f's result in its place. Objects and arrays
// on the way are copied, so the tree given is never changed.
func at(v any, target int, f func(any) any) any {
	i := 0
	var walk func(v any) any
	walk = func(v any) any {
		if i == target {
			i++
			return f(v)
		}
		i++
		switch x := v.(type) {
		case []any:
			out := append([]any(nil), x...)
			for j := range out {
				if i > target {
					break
				}
				out[j] = walk(out[j])
			}
			return out
		case *obj:
			out := x.clone()
			for j := range out.vals {
				if i > target {
					break
				}
				out.vals[j] = walk(out.vals[j])
			}
			return out
		}
		return v
	}
	return walk(v)
}

// Values a mutation puts in place of another.
var (
	hugeNumbers = []raw{"1e400", "-1e400", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
		"18446744073709551616", "1e308", "9007199254740993", "123456789012345678901234567890", "4294967296",
		"2147483648", "1E+2", "0.5", "-0", "-0.0", "1.0", "1e-400", "0x10", "01", "NaN", "Infinity", "+1", ".5"}
	negativeNumbers = []raw{"-1", "-2147483649", "-9223372036854775808", "-0.001", "-60", "-3600"}
	oddStrings      = []string{"", " ", "\u0000", "a\u0000b", "ü", "日本語", "🙂🙂", "\u202eRTL", "e\u0301", "\ufeffbom",
		"__QUEUE_MODE__", "__timer__", "../..", "a/b", "%00", "%2F", "null", "true", "0", "-1", "\\", "\"", "\n\t",
		"'; DROP TABLE queues; --", "${jndi:ldap://x}", "<script>", "Default", "now", "2026-01-01T00:00:00Z",
		"0000-00-00T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "not-a-uuid", "00000000-0000-0000-0000-000000000000"}
	// invalidUTF8 are string literals (quotes included) that are not UTF-8.
	invalidUTF8 = []raw{"\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\"", "\"\xf8\x88\x80\x80\x80\"",
		`"\ud800"`, `"\udc00x"`, `"\ud83d"`}
)

// mutateValue is one change of one value: another type, a huge, negative
// or odd number, an odd or invalid string, deep nesting, and for objects
// and arrays a member dropped, repeated (a duplicate name) or added.
func mutateValue(r *rand.Rand, v any) (any, string) {
	switch x := v.(type) {
	case *obj:
		switch r.IntN(6) {
		case 0:
			if len(x.keys) > 0 {
				y, j := x.clone(), r.IntN(len(x.keys))
				name := y.keys[j]
				y.keys = append(y.keys[:j], y.keys[j+1:]...)
				y.vals = append(y.vals[:j], y.vals[j+1:]...)
				return y, "drop member " + strconv.Quote(name)
			}
		case 1:
			if len(x.keys) > 0 {
				y, j := x.clone(), r.IntN(len(x.keys))
				dup, _ := mutateValue(r, y.vals[j])
				if r.IntN(2) == 0 {
					dup = y.vals[j]
				}
				y.keys, y.vals = append(y.keys, y.keys[j]), append(y.vals, dup)
				return y, "duplicate member " + strconv.Quote(x.keys[j])
			}
		case 2:
			y := x.clone()
			name := pick(r, []string{"producerSub", "_tenant", "tenant", "messageId", "deliverAt", "attempts", "__proto__",
				"constructor", "", "Queue", "QUEUE", "op", "ns", "key", "\u0000", "unknownMember"})
			y.keys, y.vals = append(y.keys, name), append(y.vals, randomScalar(r))
			return y, "add member " + strconv.Quote(name)
		case 3:
			return &obj{}, "empty object"
		}
	case []any:
		switch r.IntN(5) {
		case 0:
			return []any{}, "empty array"
		case 1:
			if len(x) > 0 {
				j := r.IntN(len(x))
				return append(append([]any(nil), x[:j]...), x[j+1:]...), "drop element"
			}
		case 2:
			if len(x) > 0 {
				n := pick(r, []int{2, 10, 300, 3000})
				out := make([]any, 0, n)
				for range n {
					out = append(out, x[r.IntN(len(x))])
				}
				return out, "repeat elements x" + strconv.Itoa(n)
			}
		case 3:
			return append(append([]any(nil), x...), randomScalar(r)), "add a scalar element"
		}
	case int, int64, float64, uint64:
		switch r.IntN(3) {
		case 0:
			n := pick(r, hugeNumbers)
			return n, "number " + string(n)
		case 1:
			n := pick(r, negativeNumbers)
			return n, "number " + string(n)
		}
	case string:
		switch r.IntN(4) {
		case 0:
			s := pick(r, oddStrings)
			return s, "string " + strconv.QuoteToASCII(s)
		case 1:
			s := pick(r, invalidUTF8)
			return s, "string " + strconv.QuoteToASCII(string(s))
		case 2:
			n := pick(r, []int{513, 1025, 4096, 65537, 100000})
			return strings.Repeat(pick(r, []string{"a", "ü", "/", "\u0000"}), n), "long string x" + strconv.Itoa(n)
		}
	}
	switch r.IntN(3) {
	case 0:
		d := pick(r, []int{64, 1000, 10001, 100000})
		return nest(r.IntN(2) == 0, d), "nesting depth " + strconv.Itoa(d)
	}
	w := otherType(r, v)
	return w, "type " + typeName(v) + " -> " + typeName(w)
}

// nest is d levels of arrays (or objects) around a null.
func nest(arrays bool, d int) raw {
	var b strings.Builder
	open, close := "[", "]"
	if !arrays {
		open, close = `{"a":`, "}"
	}
	b.WriteString(strings.Repeat(open, d))
	b.WriteString("null")
	b.WriteString(strings.Repeat(close, d))
	return raw(b.String())
}

// otherType is a value of another JSON type than v.
func otherType(r *rand.Rand, v any) any {
	for {
		w := pick(r, []any{nil, true, false, 0, 1, -1, 1.5, "", "x", []any{}, []any{1}, &obj{}, o("a", 1), raw("1e999")})
		if typeName(w) != typeName(v) {
			return w
		}
	}
}

func randomScalar(r *rand.Rand) any {
	return pick(r, []any{nil, true, 0, -1, "x", pick(r, oddStrings), pick(r, hugeNumbers), []any{}, &obj{}})
}

// mutateTree changes 1 to 3 values of the tree.
func mutateTree(r *rand.Rand, v any) (any, []string) {
	var what []string
	for range 1 + r.IntN(3) {
		target := r.IntN(count(v))
		var desc string
		v = at(v, target, func(x any) any {
			y, d := mutateValue(r, x)
			desc = d
			return y
		})
		what = append(what, desc)
	}
	return v, what
}

// mutateText changes the encoded body as bytes: cut short, emptied,
// grown past the node's body limit, given garbage around it, a byte that is
// not UTF-8, or replaced by random bytes.
func mutateText(r *rand.Rand, b []byte, maxBody int) ([]byte, string) {
	switch r.IntN(10) {
	case 0:
		if len(b) > 1 {
			n := 1 + r.IntN(len(b)-1)
			return append([]byte(nil), b[:n]...), "truncated at " + strconv.Itoa(n)
		}
	case 1:
		return nil, "empty body"
	case 2:
		return []byte(pick(r, []string{" ", "\n\t ", "null", "[]", "{}", "0", `"x"`, "true", "[{}]", "{{}}"})), "body replaced"
	case 3:
		pad := maxBody + 1 + r.IntN(4096)
		if len(b) > 1 && b[0] == '{' {
			out := append([]byte(`{"pad":"`), []byte(strings.Repeat("x", pad))...)
			out = append(out, `",`...)
			return append(out, b[1:]...), "oversized body (" + strconv.Itoa(len(out)+len(b)) + " bytes)"
		}
		return append(append([]byte(nil), b...), []byte(strings.Repeat(" ", pad))...), "oversized body"
	case 4:
		return append(append([]byte(nil), b...), pick(r, []string{"}", "]", ",", "{}", " x", "\x00", "\xff", `,"a":1}`})...), "trailing garbage"
	case 5:
		return append([]byte("\xef\xbb\xbf"), b...), "BOM prefix"
	case 6:
		if len(b) > 0 {
			out := append([]byte(nil), b...)
			out[r.IntN(len(out))] = pick(r, []byte{0xff, 0xc3, 0x80, 0x00, '"', '\\', '{', '}', '[', ',', ':'})
			return out, "byte replaced"
		}
	case 7:
		out := make([]byte, 1+r.IntN(256))
		for i := range out {
			out[i] = byte(r.IntN(256))
		}
		return out, "random bytes"
	case 8:
		return append(append([]byte(nil), b...), b...), "body twice"
	}
	return append(append([]byte("["), b...), ']'), "body wrapped in an array"
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/queen-node/queen-node/jepsen/client"
	"github.com/queen-node/queen-node/jepsen/history"
)

// kvWL: single-key registers under get, put, putIfAbsent and cas (put with
// "expect": version) through POST /api/v1/kv, several clients with one op
// in flight each, every written value unique. The history is checked for
// linearizability with porcupine, partitioned by key, against a
// non-deterministic model: a write whose outcome is unknown may or may not
// have happened (it gets the maximal return time and the model forks);
// definitely failed ops are dropped.
//
// Versions are opaque increasing numbers minted by the broker (the Raft
// index of the writing entry). The model keeps the current version when it
// is known, and after a write whose answer was lost only a lower bound for
// it, until a read or a refusal reveals it. Every write must mint a version
// above the one it replaced.
type kvWL struct {
	ns      string
	keys    []string
	clients int
	// checkTimeout bounds porcupine; a timeout is reported as unknown.
	checkTimeout time.Duration
}

func newKV() *kvWL {
	return &kvWL{keys: []string{"k0", "k1", "k2", "k3", "k4"}, clients: 5, checkTimeout: 60 * time.Second}
}

func (k *kvWL) Name() string { return "kv" }

// kvKind is the history kind of every kv op.
const kvKind = "kv"

// kvIn is what a kv op asked for.
type kvIn struct {
	Key    string `json:"key"`
	Op     string `json:"op"` // get | put | putIfAbsent | cas
	Value  string `json:"value,omitempty"`
	Expect uint64 `json:"expect,omitempty"` // cas only
}

// kvOut is what the broker answered (one KV result).
type kvOut struct {
	Found   bool    `json:"found,omitempty"`   // get
	Applied bool    `json:"applied,omitempty"` // writes
	Value   *string `json:"value,omitempty"`   // the current value (get, applied write, refusal)
	Version uint64  `json:"version,omitempty"`
	Reason  string  `json:"reason,omitempty"` // refusal: exists | absent | version
}

func (k *kvWL) Setup(ctx context.Context, env *Env) error {
	k.ns = fmt.Sprintf("jepsen-kv-%d-%d", env.Seed, time.Now().Unix())
	return nil
}

func (k *kvWL) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	for i := 0; i < k.clients; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); k.work(ctx, env, i) }(i)
	}
	wg.Wait()
}

// work is one client: random ops on random keys, one at a time.
func (k *kvWL) work(ctx context.Context, env *Env, i int) {
	c := env.Client()
	rng := env.Rand(400 + i)
	known := map[string]uint64{} // key → the latest version this client saw
	seq := 0
	for ctx.Err() == nil {
		time.Sleep(time.Duration(3+rng.Intn(15)) * time.Millisecond)
		in := kvIn{Key: k.keys[rng.Intn(len(k.keys))]}
		switch x := rng.Intn(100); {
		case x < 40:
			in.Op = "get"
		case x < 60:
			in.Op = "put"
		case x < 70:
			in.Op = "putIfAbsent"
		default:
			in.Op = "cas"
			in.Expect = known[in.Key]
			switch y := rng.Intn(10); {
			case in.Expect == 0 || y == 0:
				in.Expect = uint64(1 + rng.Intn(50)) // most likely stale
			case y == 1 && in.Expect > 1:
				in.Expect--
			}
		}
		if in.Op != "get" {
			seq++
			in.Value = fmt.Sprintf("c%d-%d", c.ID, seq)
		}
		if out, ok := k.do(ctx, env, c, in); ok && out.Version != 0 {
			known[in.Key] = out.Version
		}
	}
}

// do runs and records one op. ok reports a definite answer.
func (k *kvWL) do(ctx context.Context, env *Env, c *client.Client, in kvIn) (kvOut, bool) {
	op := map[string]any{"op": in.Op, "ns": k.ns, "key": in.Key}
	if in.Op != "get" {
		op["value"] = in.Value
		op["forever"] = true
	}
	if in.Op == "cas" {
		op["expect"] = in.Expect
	}
	p := env.Rec.Begin(c.ID, kvKind, in)
	r, st, err := c.Do(ctx, "POST", "/api/v1/kv", map[string]any{"operations": []any{op}}, nil)
	if st != history.OK {
		p.End(st, nil, err)
		return kvOut{}, false
	}
	if r.Status != 200 {
		// 4xx: refused before anything happened (429 = the read rate).
		p.End(history.Fail, nil, fmt.Errorf("status %d: %s", r.Status, bytes.TrimSpace(r.Body)))
		return kvOut{}, false
	}
	out, err := parseKVAnswer(r.Body)
	if err != nil {
		p.End(history.Unknown, nil, fmt.Errorf("%s%v", kvMalformed, err))
		return kvOut{}, false
	}
	p.End(history.OK, out, nil)
	return out, true
}

// kvMalformed starts the error of an op whose 200 answer made no sense.
const kvMalformed = "malformed answer: "

func parseKVAnswer(body []byte) (kvOut, error) {
	var ans struct {
		Results []struct {
			Found   bool            `json:"found"`
			Applied bool            `json:"applied"`
			Value   json.RawMessage `json:"value"`
			Version uint64          `json:"version"`
			Reason  string          `json:"reason"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return kvOut{}, fmt.Errorf("%v: %s", err, body)
	}
	if len(ans.Results) != 1 {
		return kvOut{}, fmt.Errorf("%d results for one op: %s", len(ans.Results), body)
	}
	res := ans.Results[0]
	out := kvOut{Found: res.Found, Applied: res.Applied, Version: res.Version, Reason: res.Reason}
	var s string
	if len(res.Value) > 0 && json.Unmarshal(res.Value, &s) == nil {
		out.Value = &s
	}
	return out, nil
}

// Finish reads every key once more after the faults healed: the final
// reads reveal what the unknown writes did.
func (k *kvWL) Finish(ctx context.Context, env *Env) error {
	c := env.Client()
	for _, key := range k.keys {
		err := retryDefinite(ctx, func() (bool, error) {
			_, ok := k.do(ctx, env, c, kvIn{Key: key, Op: "get"})
			return ok, nil
		})
		if err != nil {
			return fmt.Errorf("final read of %s: %w", key, err)
		}
	}
	return nil
}

func (k *kvWL) Check(env *Env) Result {
	ops := env.Rec.Ops()
	start := time.Now()
	res := checkKV(ops, k.checkTimeout)
	if env.Logf != nil {
		n := map[string]int{}
		fails := 0
		for _, op := range ops {
			if op.Kind == kvKind {
				var in kvIn
				json.Unmarshal(op.Input, &in)
				n[string(op.Status)+" "+in.Op]++
				if op.Status == history.Fail && fails < 3 {
					fails++
					env.Logf("kv: failed %s: %s", in.Op, op.Err)
				}
			}
		}
		env.Logf("kv: %d ops %v; linearizable=%s after %v", res.Ops, n, fmtLin(res.Linearizable), time.Since(start).Round(time.Millisecond))
	}
	return res
}

func fmtLin(b *bool) string {
	if b == nil {
		return "unknown"
	}
	return fmt.Sprint(*b)
}

// The model.

// kvState is one register. Version 0 with Exists means unknown (a write
// whose answer was lost replaced it); the version is then above Floor.
type kvState struct {
	Exists  bool
	Value   string
	Version uint64
	Floor   uint64
}

// kvCall is a porcupine input; kvRet a porcupine output.
type kvCall struct {
	kvIn
}

type kvRet struct {
	kvOut
	Unknown bool // the write's outcome is unknown: it may or may not have happened
}

// atLeast is a strict lower bound for any version minted after s.
func (s kvState) atLeast() uint64 {
	if s.Version != 0 {
		return s.Version
	}
	return s.Floor
}

// couldBe reports whether s's version could be v.
func (s kvState) couldBe(v uint64) bool {
	if !s.Exists || v == 0 {
		return false
	}
	if s.Version != 0 {
		return s.Version == v
	}
	return v > s.Floor
}

// seen checks that s holds value and version as a read or a refusal
// reported them, and returns s with the version learnt.
func (s kvState) seen(value *string, version uint64) (kvState, bool) {
	if value == nil || !s.Exists || s.Value != *value || !s.couldBe(version) {
		return s, false
	}
	s.Version, s.Floor = version, 0
	return s, true
}

func kvStep(st, input, output any) []any {
	s := st.(kvState)
	in := input.(kvCall)
	out := output.(kvRet)
	written := func(version, floor uint64) kvState {
		return kvState{Exists: true, Value: in.Value, Version: version, Floor: floor}
	}
	one := func(s kvState, ok bool) []any {
		if !ok {
			return nil
		}
		return []any{s}
	}
	if out.Unknown {
		switch in.Op {
		case "put":
			return []any{s, written(0, s.atLeast())}
		case "putIfAbsent":
			if !s.Exists {
				return []any{s, written(0, 0)}
			}
		case "cas":
			if s.couldBe(in.Expect) {
				return []any{s, written(0, in.Expect)}
			}
		}
		return []any{s} // refused, or never happened
	}
	switch in.Op {
	case "get":
		if !out.Found {
			return one(s, !s.Exists)
		}
		return one(s.seen(out.Value, out.Version))
	case "put":
		return one(written(out.Version, 0), out.Applied && out.Version > s.atLeast() && valueIs(out.Value, in.Value))
	case "putIfAbsent":
		if out.Applied {
			return one(written(out.Version, 0), !s.Exists && out.Version > s.atLeast() && valueIs(out.Value, in.Value))
		}
		if out.Reason != "exists" {
			return nil
		}
		return one(s.seen(out.Value, out.Version))
	case "cas":
		if out.Applied {
			return one(written(out.Version, 0), s.couldBe(in.Expect) && out.Version > in.Expect && valueIs(out.Value, in.Value))
		}
		switch out.Reason {
		case "absent":
			return one(s, !s.Exists)
		case "version":
			if out.Version == in.Expect {
				return nil
			}
			return one(s.seen(out.Value, out.Version))
		}
	}
	return nil
}

// valueIs: an applied write's result carries the value it wrote.
func valueIs(got *string, want string) bool { return got != nil && *got == want }

func kvModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range h {
				key := op.Input.(kvCall).Key
				if _, ok := byKey[key]; !ok {
					keys = append(keys, key)
				}
				byKey[key] = append(byKey[key], op)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, key := range keys {
				out = append(out, byKey[key])
			}
			return out
		},
		Init:  func() []any { return []any{kvState{}} },
		Step:  kvStep,
		Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
		Hash: func(st any) uint64 {
			s := st.(kvState)
			h := fnv.New64a()
			fmt.Fprintf(h, "%v|%s|%d|%d", s.Exists, s.Value, s.Version, s.Floor)
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(kvCall), output.(kvRet)
			call := fmt.Sprintf("%s(%s)", in.Op, in.Key)
			switch in.Op {
			case "put", "putIfAbsent":
				call = fmt.Sprintf("%s(%s, %s)", in.Op, in.Key, in.Value)
			case "cas":
				call = fmt.Sprintf("cas(%s, %s, expect %d)", in.Key, in.Value, in.Expect)
			}
			return call + " → " + describeKVRet(in, out)
		},
		DescribeState: func(st any) string {
			s := st.(kvState)
			switch {
			case !s.Exists:
				return "absent"
			case s.Version == 0:
				return fmt.Sprintf("%s @ >%d", s.Value, s.Floor)
			}
			return fmt.Sprintf("%s @ %d", s.Value, s.Version)
		},
	}
	return nm.ToModel()
}

func describeKVRet(in kvCall, out kvRet) string {
	val := "∅"
	if out.Value != nil {
		val = *out.Value
	}
	switch {
	case out.Unknown:
		return "unknown"
	case in.Op == "get" && !out.Found:
		return "not found"
	case in.Op == "get":
		return fmt.Sprintf("%s @ %d", val, out.Version)
	case out.Applied:
		return fmt.Sprintf("applied @ %d", out.Version)
	}
	return fmt.Sprintf("refused %s (%s @ %d)", out.Reason, val, out.Version)
}

// kvOperations turns the recorded kv ops into porcupine operations: failed
// ops and unknown reads are dropped; an unknown write returns at the end of
// time, unless a definite op observed its (unique) value, in which case it
// took effect before that op returned, so its return is that op's return.
// That bound changes no verdict and keeps the search small.
func kvOperations(ops []history.Op) []porcupine.Operation {
	type rec struct {
		op  history.Op
		in  kvIn
		out kvOut
	}
	var recs []rec
	var end int64
	observed := map[string]int64{} // key/value → earliest return of a definite op that saw it
	for _, op := range ops {
		if op.Kind != kvKind {
			continue
		}
		end = max(end, op.Return, op.Call)
		var r rec
		r.op = op
		if json.Unmarshal(op.Input, &r.in) != nil {
			continue
		}
		switch op.Status {
		case history.OK:
			if json.Unmarshal(op.Output, &r.out) != nil {
				continue
			}
			if r.out.Value != nil && (r.in.Op == "get" || !r.out.Applied) {
				id := r.in.Key + "\x00" + *r.out.Value
				if t, ok := observed[id]; !ok || op.Return < t {
					observed[id] = op.Return
				}
			}
		case history.Unknown:
			if r.in.Op == "get" {
				continue
			}
		default:
			continue
		}
		recs = append(recs, r)
	}
	clients := map[int]int{}
	for _, r := range recs {
		clients[r.op.Client] = 0
	}
	ids := make([]int, 0, len(clients))
	for id := range clients {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for i, id := range ids {
		clients[id] = i
	}
	out := make([]porcupine.Operation, 0, len(recs))
	for _, r := range recs {
		o := porcupine.Operation{ClientId: clients[r.op.Client], Input: kvCall{r.in}, Call: r.op.Call,
			Output: kvRet{kvOut: r.out}, Return: r.op.Return}
		if r.op.Status == history.Unknown {
			o.Output = kvRet{Unknown: true}
			o.Return = end + 1
			if t, ok := observed[r.in.Key+"\x00"+r.in.Value]; ok && t >= r.op.Call {
				o.Return = t
			}
		}
		out = append(out, o)
	}
	return out
}

// checkKV checks a history of kv ops for linearizability.
func checkKV(ops []history.Op, timeout time.Duration) Result {
	var res Result
	for _, op := range ops {
		if op.Kind != kvKind {
			continue
		}
		res.Ops++
		if strings.HasPrefix(op.Err, kvMalformed) {
			res.violate("kv op answered 200 with a %s", op.Err)
		}
	}
	hist := kvOperations(ops)
	if len(hist) == 0 {
		res.violate("no kv op got a definite answer")
		return res
	}
	// One porcupine search per key, all within the timeout, so that a
	// violation names its key.
	model := kvModel()
	deadline := time.Now().Add(timeout)
	var illegal, unknown []string
	var bad []porcupine.Operation
	for _, part := range model.Partition(hist) {
		key := part[0].Input.(kvCall).Key
		left := time.Until(deadline)
		if left <= 0 {
			unknown = append(unknown, key)
			continue
		}
		switch porcupine.CheckOperationsTimeout(model, part, left) {
		case porcupine.Ok:
		case porcupine.Illegal:
			illegal = append(illegal, key)
			bad = append(bad, part...)
			res.violate("key %s: the kv history is not linearizable (%d ops on it; see kv.html)", key, len(part))
		default:
			unknown = append(unknown, key)
		}
	}
	switch {
	case len(illegal) > 0:
		lin := false
		res.Linearizable = &lin
		// The verbose search again, on the failing keys only, for the
		// visualization (it found the violation once already).
		_, info := porcupine.CheckOperationsVerbose(model, bad, max(time.Until(deadline), 10*time.Second))
		var buf bytes.Buffer
		if err := porcupine.Visualize(model, info, &buf); err == nil {
			res.Files = map[string][]byte{"kv.html": buf.Bytes()}
		}
	case len(unknown) > 0:
		// Neither verdict: Linearizable stays nil, and the run must not
		// pass as if it had been checked.
	default:
		lin := true
		res.Linearizable = &lin
	}
	if len(unknown) > 0 {
		res.violate("linearizability UNKNOWN on keys %v: porcupine gave up (the budget is %v for %d ops)", unknown, timeout, len(hist))
	}
	return res
}

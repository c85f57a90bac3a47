package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/queen-node/queen-node/jepsen/client"
	"github.com/queen-node/queen-node/jepsen/history"
)

// locksWL: workers take a lock (limit 1) and a semaphore (limit 2) through
// POST /api/v1/locks, hold the permit for a while (sometimes past its
// lifetime, sometimes renewing it), commit a guarded transaction (the
// permit's guard, an incr of the lock's counter and a put that records the
// commit's time), and release, while faults happen. An observer reads both
// locks now and then.
//
// The checker works in the broker's own time and tokens only (the stamps
// apply judged by, which the answers report: since, renewedAt, expiresAt,
// releasedAt), never in the clients' clocks, so clock faults on the nodes
// do not confuse it. A token is the version of a permit's row: its write
// time and expiry are fixed while the row has that version. A tenure is one
// holder's hold of one slot: the tokens with one since (a renew keeps it).
//
//   - No two holders of one slot at once: a tenure starts no earlier than
//     the end of every earlier tenure of the slot (its release, else the
//     latest expiry any answer showed for it). A tenure with a release of
//     unknown outcome has no known end and is skipped as the earlier one.
//   - Later tenures have higher tokens.
//   - No committed transaction carried a stale guard: its guard's token was
//     not superseded on the slot (no token between it and the commit's
//     index, the version the commit's KV writes got), its permit had not
//     expired by the commit's time, and had not been released before it.
//   - The counters: each counts exactly the guarded commits (at least the
//     ones that answered success, at most those plus the unknown ones).
//
// Every observation of a token must agree on its since, write time and
// expiry (one row version, one set of times).
type locksWL struct {
	ns      string
	names   []string
	limits  map[string]int
	workers int
	ttl     int
	mu      sync.Mutex
	counter map[string]int64 // name → the final counter value; missing = unread
}

func newLocks() *locksWL { return &locksWL{workers: 6, ttl: 2} }

func (l *locksWL) Name() string { return "locks" }

// History kinds.
const (
	lockAcquireKind = "lock-acquire"
	lockRenewKind   = "lock-renew"
	lockReleaseKind = "lock-release"
	lockGetKind     = "lock-get"
	lockTxnKind     = "lock-txn"
	lockCounterKind = "lock-counter"
)

// lockStampTTL is the TTL of the put that records a guarded commit's time:
// its expiresAt minus this is the commit's entry time (to the millisecond).
const lockStampTTL = 600

// lockIn is what a lock op asked for.
type lockIn struct {
	Name  string `json:"name"`
	Owner string `json:"owner,omitempty"`
	Limit int    `json:"limit,omitempty"`
	Slot  int    `json:"slot"`
	Token uint64 `json:"token,omitempty"`
}

// lockHolderOut is a holder in an answer.
type lockHolderOut struct {
	Slot      int     `json:"slot"`
	Owner     *string `json:"owner"`
	Token     uint64  `json:"token"`
	Since     string  `json:"since"`
	RenewedAt string  `json:"renewedAt"`
	ExpiresAt string  `json:"expiresAt"`
}

// lockOut is one result of POST /api/v1/locks.
type lockOut struct {
	Op         string          `json:"op"`
	Name       string          `json:"name"`
	Acquired   *bool           `json:"acquired,omitempty"`
	Renewed    *bool           `json:"renewed,omitempty"`
	Released   *bool           `json:"released,omitempty"`
	Held       *bool           `json:"held,omitempty"`
	Already    bool            `json:"already,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Slot       int             `json:"slot"`
	Token      uint64          `json:"token,omitempty"`
	Owner      *string         `json:"owner,omitempty"`
	Since      string          `json:"since,omitempty"`
	ExpiresAt  string          `json:"expiresAt,omitempty"`
	RenewedAt  string          `json:"renewedAt,omitempty"`
	ReleasedAt string          `json:"releasedAt,omitempty"`
	Holders    []lockHolderOut `json:"holders,omitempty"`
}

func (o *lockOut) ok() bool {
	for _, b := range []*bool{o.Acquired, o.Renewed, o.Released} {
		if b != nil {
			return *b
		}
	}
	return false
}

// lockTxnOut is a guarded commit's answer, reduced.
type lockTxnOut struct {
	Success bool   `json:"success"`
	Reason  string `json:"reason,omitempty"`
	Index   uint64 `json:"index,omitempty"`   // the version the commit's KV writes got
	StampAt string `json:"stampAt,omitempty"` // the stamp put's expiresAt
	Status  int    `json:"status,omitempty"`  // HTTP status when not 200
	Body    string `json:"body,omitempty"`    // the body when not understood
}

func (l *locksWL) Setup(ctx context.Context, env *Env) error {
	base := fmt.Sprintf("jl%d-%d", env.Seed, time.Now().Unix()%100000)
	l.ns = "jepsen-locks-" + base
	l.names = []string{base + "-lock", base + "-sem"}
	l.limits = map[string]int{l.names[0]: 1, l.names[1]: 2}
	l.counter = map[string]int64{}
	return nil
}

func (l *locksWL) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	for i := 0; i < l.workers; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); l.work(ctx, env, i) }(i)
	}
	wg.Add(1)
	go func() { defer wg.Done(); l.observe(ctx, env) }()
	wg.Wait()
}

// call sends one lock op and records it.
func (l *locksWL) call(ctx context.Context, env *Env, c *client.Client, kind string, in lockIn, op map[string]any) (*lockOut, history.Status) {
	p := env.Rec.Begin(c.ID, kind, in)
	r, st, err := c.Do(ctx, "POST", "/api/v1/locks", map[string]any{"operations": []any{op}}, nil)
	if st != history.OK {
		p.End(st, nil, err)
		return nil, st
	}
	var out struct {
		Results []lockOut `json:"results"`
	}
	if r.Status != 200 || json.Unmarshal(r.Body, &out) != nil || len(out.Results) != 1 {
		p.End(history.Fail, nil, fmt.Errorf("status %d: %s", r.Status, r.Body))
		return nil, history.Fail
	}
	p.End(history.OK, out.Results[0], nil)
	return &out.Results[0], history.OK
}

// work is one worker's loop on one lock: acquire (retrying an unknown
// outcome with the same owner, which converges), hold, maybe renew, commit
// with the guard, release.
func (l *locksWL) work(ctx context.Context, env *Env, i int) {
	c := env.Client()
	rng := env.Rand(500 + i)
	name := l.names[i%len(l.names)]
	limit := l.limits[name]
	owner := fmt.Sprintf("w%d", i)
	for ctx.Err() == nil {
		a, st := l.call(ctx, env, c, lockAcquireKind, lockIn{Name: name, Owner: owner, Limit: limit},
			map[string]any{"op": "acquire", "name": name, "owner": owner, "limit": limit, "ttlSeconds": l.ttl})
		if st != history.OK || !a.ok() {
			pause(ctx, time.Duration(50+rng.Intn(200))*time.Millisecond)
			continue
		}
		slot, token := a.Slot, a.Token
		// Hold: usually within the lifetime, now and then past it.
		hold := time.Duration(rng.Intn(1200)) * time.Millisecond
		if rng.Intn(6) == 0 {
			hold = time.Duration(l.ttl)*time.Second + time.Duration(rng.Intn(800))*time.Millisecond
		}
		pause(ctx, hold)
		if rng.Intn(2) == 0 {
			for try := 0; try < 5 && ctx.Err() == nil; try++ {
				r, st := l.call(ctx, env, c, lockRenewKind, lockIn{Name: name, Owner: owner, Slot: slot, Token: token},
					map[string]any{"op": "renew", "name": name, "owner": owner, "slot": slot, "token": token, "ttlSeconds": l.ttl})
				if st == history.OK {
					if r.ok() {
						token = r.Token
					}
					break
				}
			}
			pause(ctx, time.Duration(rng.Intn(600))*time.Millisecond)
		}
		l.commit(ctx, env, c, name, owner, slot, token)
		if rng.Intn(5) == 0 {
			continue // walk away: the permit runs out by itself
		}
		for try := 0; try < 5 && ctx.Err() == nil; try++ {
			if _, st := l.call(ctx, env, c, lockReleaseKind, lockIn{Name: name, Slot: slot, Token: token},
				map[string]any{"op": "release", "name": name, "slot": slot, "token": token}); st == history.OK {
				break
			}
		}
		pause(ctx, time.Duration(rng.Intn(200))*time.Millisecond)
	}
}

// commit runs the guarded transaction: the guard, the lock's counter, and a
// put whose expiry tells the commit's time. Never retried (an incr is not
// idempotent): an unknown outcome stays unknown.
func (l *locksWL) commit(ctx context.Context, env *Env, c *client.Client, name, owner string, slot int, token uint64) {
	guard := map[string]any{"op": "check", "ns": "queen-locks", "key": fmt.Sprintf("%s#%d", name, slot), "expect": token, "required": true}
	body := map[string]any{"kv": []any{guard,
		map[string]any{"op": "incr", "ns": l.ns, "key": "count-" + name, "forever": true},
		map[string]any{"op": "put", "ns": l.ns, "key": "stamp-" + owner, "value": map[string]any{"token": token}, "ttlSeconds": lockStampTTL},
	}}
	p := env.Rec.Begin(c.ID, lockTxnKind, lockIn{Name: name, Owner: owner, Slot: slot, Token: token})
	r, st, err := c.Do(ctx, "POST", "/api/v1/transaction", body, nil)
	if st != history.OK {
		p.End(st, nil, err)
		return
	}
	var raw struct {
		Success bool   `json:"success"`
		Reason  string `json:"reason"`
		Results []struct {
			Op        string `json:"op"`
			Version   uint64 `json:"version"`
			ExpiresAt string `json:"expiresAt"`
		} `json:"results"`
	}
	out := lockTxnOut{}
	if r.Status != 200 || json.Unmarshal(r.Body, &raw) != nil {
		out.Status, out.Body = r.Status, string(r.Body)
		p.End(history.OK, out, nil)
		return
	}
	out.Success, out.Reason = raw.Success, raw.Reason
	for _, res := range raw.Results {
		if res.Op == "put" {
			out.Index, out.StampAt = res.Version, res.ExpiresAt
		}
	}
	p.End(history.OK, out, nil)
}

// observe reads both locks now and then: more holders to check.
func (l *locksWL) observe(ctx context.Context, env *Env) {
	c := env.Client()
	for ctx.Err() == nil {
		for _, name := range l.names {
			l.call(ctx, env, c, lockGetKind, lockIn{Name: name}, map[string]any{"op": "get", "name": name})
		}
		pause(ctx, 150*time.Millisecond)
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Finish reads the counters.
func (l *locksWL) Finish(ctx context.Context, env *Env) error {
	c := env.Client()
	for _, name := range l.names {
		key := "count-" + name
		err := retryDefinite(ctx, func() (bool, error) {
			p := env.Rec.Begin(c.ID, lockCounterKind, name)
			r, st, err := c.Do(ctx, "POST", "/api/v1/kv", map[string]any{"operations": []any{map[string]any{"op": "get", "ns": l.ns, "key": key}}}, nil)
			if st != history.OK || r.Status != 200 {
				p.End(history.Fail, nil, err)
				return false, err
			}
			var out struct {
				Results []struct {
					Found bool  `json:"found"`
					Value int64 `json:"value"`
				} `json:"results"`
			}
			if json.Unmarshal(r.Body, &out) != nil || len(out.Results) != 1 {
				p.End(history.Fail, nil, fmt.Errorf("%s", r.Body))
				return false, fmt.Errorf("%s", r.Body)
			}
			p.End(history.OK, out.Results[0].Value, nil)
			l.mu.Lock()
			l.counter[name] = out.Results[0].Value
			l.mu.Unlock()
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (l *locksWL) Check(env *Env) Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ops []history.Op
	for _, op := range env.Rec.Ops() {
		if strings.HasPrefix(op.Kind, "lock-") {
			ops = append(ops, op)
		}
	}
	env.Logf("locks: %s", lockStats(ops))
	return checkLocks(ops, l.counter)
}

// lockStats says what the run did: how much the checker had to look at.
func lockStats(ops []history.Op) string {
	n := map[string]int{}
	for _, op := range ops {
		key := op.Kind + " " + string(op.Status)
		if op.Status == history.OK {
			switch op.Kind {
			case lockTxnKind:
				var out lockTxnOut
				json.Unmarshal(op.Output, &out)
				key = lockTxnKind + map[bool]string{true: " committed", false: " refused"}[out.Success]
			case lockAcquireKind, lockRenewKind, lockReleaseKind:
				var out lockOut
				json.Unmarshal(op.Output, &out)
				key = op.Kind + map[bool]string{true: " granted", false: " refused"}[out.ok()]
				if out.Already {
					key = op.Kind + " already"
				}
			}
		}
		n[key]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, n[k])
	}
	return strings.Join(parts, " ")
}

// ---------------------------------------------------------------- checker

type slotKey struct {
	name string
	slot int
}

// tokenFacts is what the answers showed about one row version.
type tokenFacts struct {
	owner          string
	since, written int64 // µs; written 0 = not shown
	expires        int64
	releasedAt     int64 // µs of an ok release of this token; 0 = none seen
	maybeReleased  bool  // a release of it had an unknown outcome
	firstSeenAt    string
}

func brokerTime(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return t.UnixMicro(), true
}

// checkLocks checks a locks history (see locksWL). counter holds the final
// counter values by lock name.
func checkLocks(ops []history.Op, counter map[string]int64) Result {
	var res Result
	res.Ops = len(ops)
	tokens := map[slotKey]map[uint64]*tokenFacts{}
	fact := func(k slotKey, token uint64) *tokenFacts {
		m := tokens[k]
		if m == nil {
			m = map[uint64]*tokenFacts{}
			tokens[k] = m
		}
		f := m[token]
		if f == nil {
			f = &tokenFacts{}
			m[token] = f
		}
		return f
	}
	// see records one observation of a row version, and checks it agrees
	// with the others.
	see := func(where string, k slotKey, token uint64, owner *string, since, written, expires string) {
		f := fact(k, token)
		s, ok1 := brokerTime(since)
		e, ok2 := brokerTime(expires)
		if !ok1 || !ok2 {
			res.violate("%s: %s#%d token %d with unreadable times since=%q expiresAt=%q", where, k.name, k.slot, token, since, expires)
			return
		}
		w, hasW := brokerTime(written)
		o := ""
		if owner != nil {
			o = *owner
		}
		if f.firstSeenAt == "" {
			f.owner, f.since, f.expires, f.firstSeenAt = o, s, e, where
		} else if f.owner != o || f.since != s || f.expires != e {
			res.violate("%s#%d token %d: %s shows owner %q since %d expires %d, %s showed owner %q since %d expires %d",
				k.name, k.slot, token, where, o, s, e, f.firstSeenAt, f.owner, f.since, f.expires)
		}
		if hasW {
			if f.written != 0 && f.written != w {
				res.violate("%s#%d token %d: written at %d and at %d", k.name, k.slot, token, f.written, w)
			}
			f.written = w
		}
		if s > e || (hasW && (w < s || w >= e)) {
			res.violate("%s: %s#%d token %d: since %s, written %s, expires %s out of order", where, k.name, k.slot, token, since, written, expires)
		}
	}
	var txns []history.Op
	okCommits, unknownCommits := map[string]int64{}, map[string]int64{}
	for _, op := range ops {
		var in lockIn
		json.Unmarshal(op.Input, &in)
		where := fmt.Sprintf("%s by client %d at %d", op.Kind, op.Client, op.Call)
		switch op.Kind {
		case lockTxnKind:
			switch op.Status {
			case history.OK:
				var out lockTxnOut
				json.Unmarshal(op.Output, &out)
				switch {
				case out.Success:
					okCommits[in.Name]++
					txns = append(txns, op)
				case out.Status != 0 || out.Reason != "kv_precondition":
					res.violate("%s: a guarded commit answered neither success nor kv_precondition: %s", where, op.Output)
				}
			case history.Unknown:
				unknownCommits[in.Name]++
			}
			continue
		case lockReleaseKind:
			if op.Status == history.Unknown {
				fact(slotKey{in.Name, in.Slot}, in.Token).maybeReleased = true
			}
		}
		if op.Status != history.OK || len(op.Output) == 0 {
			continue
		}
		var out lockOut
		if json.Unmarshal(op.Output, &out) != nil {
			continue
		}
		k := slotKey{out.Name, out.Slot}
		switch {
		case out.Op == "acquire" && out.ok():
			written := out.Since
			if out.Already {
				written = ""
			}
			see(where, k, out.Token, out.Owner, out.Since, written, out.ExpiresAt)
		case out.Op == "renew" && out.ok():
			see(where, k, out.Token, out.Owner, out.Since, out.RenewedAt, out.ExpiresAt)
		case out.Op == "release" && out.ok():
			at, ok := brokerTime(out.ReleasedAt)
			if !ok {
				res.violate("%s: releasedAt %q", where, out.ReleasedAt)
				break
			}
			f := fact(slotKey{in.Name, in.Slot}, in.Token)
			if f.releasedAt != 0 {
				res.violate("%s: %s#%d token %d released twice", where, in.Name, in.Slot, in.Token)
			}
			f.releasedAt = at
		}
		for _, h := range out.Holders {
			see(where+" (holders)", slotKey{out.Name, h.Slot}, h.Token, h.Owner, h.Since, h.RenewedAt, h.ExpiresAt)
		}
	}

	// Tenures per slot, in token order.
	type tenure struct {
		owner            string
		start, end       int64
		minTok, maxTok   uint64
		released, unsure bool
	}
	keys := make([]slotKey, 0, len(tokens))
	for k := range tokens {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].name < keys[j].name || keys[i].name == keys[j].name && keys[i].slot < keys[j].slot
	})
	for _, k := range keys {
		bySince := map[int64]*tenure{}
		var order []*tenure
		toks := make([]uint64, 0, len(tokens[k]))
		for t := range tokens[k] {
			toks = append(toks, t)
		}
		sort.Slice(toks, func(i, j int) bool { return toks[i] < toks[j] })
		for _, t := range toks {
			f := tokens[k][t]
			if f.firstSeenAt == "" { // only a release of unknown outcome named it
				continue
			}
			tn := bySince[f.since]
			if tn == nil {
				tn = &tenure{owner: f.owner, start: f.since, minTok: t}
				bySince[f.since] = tn
				order = append(order, tn)
			}
			tn.maxTok = t
			if !tn.released {
				tn.end = max(tn.end, f.expires)
			}
			if f.releasedAt != 0 {
				tn.released, tn.end = true, f.releasedAt
			}
			if f.maybeReleased && f.releasedAt == 0 {
				tn.unsure = true
			}
		}
		// A later tenure starts later and has higher tokens (tokens are
		// entry indexes, times strictly increase with them).
		var prev *tenure
		for _, tn := range order {
			if prev != nil && tn.start <= prev.start {
				res.violate("%s#%d: the tenure of %q with tokens from %d starts at %d, not after the tenure of %q (tokens to %d) started at %d",
					k.name, k.slot, tn.owner, tn.minTok, tn.start, prev.owner, prev.maxTok, prev.start)
			}
			prev = tn
		}
		// No two holders at once: a tenure starts no earlier than every
		// earlier tenure with a known end ended.
		var ended *tenure
		for _, tn := range order {
			if ended != nil && tn.start < ended.end {
				res.violate("%s#%d held twice at once by the broker's time: %q (tokens %d-%d, since %s, until %s%s) and %q from %s (token %d)",
					k.name, k.slot, ended.owner, ended.minTok, ended.maxTok, usTime(ended.start), usTime(ended.end),
					map[bool]string{true: ", released", false: ", expiry"}[ended.released], tn.owner, usTime(tn.start), tn.minTok)
			}
			if !tn.unsure && (ended == nil || tn.end > ended.end) {
				ended = tn
			}
		}
	}

	// No committed transaction carried a stale guard.
	for _, op := range txns {
		var in lockIn
		var out lockTxnOut
		json.Unmarshal(op.Input, &in)
		json.Unmarshal(op.Output, &out)
		k := slotKey{in.Name, in.Slot}
		where := fmt.Sprintf("a guarded commit by client %d at %d (%s#%d, token %d, committed at index %d)", op.Client, op.Call, in.Name, in.Slot, in.Token, out.Index)
		f := tokens[k][in.Token]
		if f == nil || f.firstSeenAt == "" {
			res.violate("%s: its token was never granted in an answer", where)
			continue
		}
		if out.Index <= in.Token {
			res.violate("%s: committed at an index not after its token", where)
		}
		for t, g := range tokens[k] {
			if t > in.Token && t < out.Index && g.firstSeenAt != "" {
				res.violate("%s: its token was superseded by token %d (%q) before the commit", where, t, g.owner)
				break
			}
		}
		stamp, ok := brokerTime(out.StampAt)
		if !ok {
			res.violate("%s: no commit time (stamp %q)", where, out.StampAt)
			continue
		}
		committed := stamp - lockStampTTL*1e6 // to the millisecond, never later than the commit
		if committed >= f.expires {
			res.violate("%s: committed at %s, after its permit expired at %s", where, usTime(committed), usTime(f.expires))
		}
		if f.releasedAt != 0 && committed >= f.releasedAt {
			res.violate("%s: committed at %s, after its permit was released at %s", where, usTime(committed), usTime(f.releasedAt))
		}
	}

	// The counters count the guarded commits.
	names := make([]string, 0, len(counter))
	for n := range counter {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v, lo, hi := counter[n], okCommits[n], okCommits[n]+unknownCommits[n]
		switch {
		case v < lo:
			res.Lost += int(lo - v)
			res.violate("%s: the counter is %d after %d guarded commits that answered success", n, v, lo)
		case v > hi:
			res.Duplicated += int(v - hi)
			res.violate("%s: the counter is %d, but at most %d guarded commits can have happened", n, v, hi)
		}
	}
	return res
}

func usTime(us int64) string { return time.UnixMicro(us).UTC().Format("15:04:05.000000") }

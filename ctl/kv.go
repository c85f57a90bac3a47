package ctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// KV reads (spec §4.7): one key, and the keys under a prefix.

func init() {
	register(
		&command{path: "kv get", args: "<namespace> <key>", nargs: exactly(2),
			summary: "read one KV entry (exit 1 when there is none)",
			setup:   func(*flag.FlagSet) runFunc { return runKVGet }},
		&command{path: "kv list", args: "<namespace> --prefix P [--limit N] [--after K]", nargs: exactly(1),
			summary: "list the KV entries whose keys start with a prefix, in key order",
			setup:   setupKVList},
	)
}

type kvEntry struct {
	Key       string          `json:"key"`
	Found     *bool           `json:"found"`
	Value     json.RawMessage `json:"value"`
	Version   uint64          `json:"version"`
	ExpiresAt *string         `json:"expiresAt"`
	UpdatedAt *string         `json:"updatedAt"`
}

// kvKeyPath escapes each segment of a key, so that a key with slashes is
// the route's {key...}; ok=false for a key the path cannot carry as it is
// (an empty, "." or ".." segment, which a path is cleaned of).
func kvKeyPath(ns, key string) (string, bool) {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", false
		}
		segs[i] = esc(s)
	}
	return "/api/v1/kv/" + esc(ns) + "/" + strings.Join(segs, "/"), true
}

// kvGet reads one entry: GET /api/v1/kv/:ns/*key, or for a key the path
// cannot carry, a get op of POST /api/v1/kv (its result).
func (e *env) kvGet(ns, key string) ([]byte, error) {
	if path, ok := kvKeyPath(ns, key); ok {
		return e.api.get(e.ctx, path, nil, nil)
	}
	var res struct{ Results []json.RawMessage }
	raw, err := e.api.do(e.ctx, http.MethodPost, "/api/v1/kv", nil,
		map[string]any{"operations": []any{map[string]any{"op": "get", "ns": ns, "key": key}}}, &res)
	if err != nil {
		return nil, err
	}
	if len(res.Results) != 1 {
		return nil, fmt.Errorf("kv get: the node answered %s", strings.TrimSpace(string(raw)))
	}
	return res.Results[0], nil
}

func runKVGet(e *env, args []string) error {
	raw, err := e.kvGet(args[0], args[1])
	if err != nil {
		return err
	}
	var r kvEntry
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("kv get: %w", err)
	}
	found := r.Found != nil && *r.Found
	switch {
	case e.json():
		if err := e.printRaw(raw); err != nil {
			return err
		}
	case found:
		now := time.Now()
		expires := "never"
		if r.ExpiresAt != nil {
			expires = *r.ExpiresAt + " (" + ago(r.ExpiresAt, now) + ")"
		}
		if err := fields(e.out, "namespace", args[0], "key", r.Key, "version", strconv.FormatUint(r.Version, 10),
			"updated", str(r.UpdatedAt)+" ("+ago(r.UpdatedAt, now)+")", "expires", expires); err != nil {
			return err
		}
		fmt.Fprintln(e.out, "value:")
		if err := e.printRaw(r.Value); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("kv: no entry %s in namespace %s", args[1], args[0])
	}
	return nil
}

func setupKVList(fs *flag.FlagSet) runFunc {
	prefix := fs.String("prefix", "", "the keys' prefix (required)")
	limit := fs.Int("limit", 100, "at most this many (the API allows 1000)")
	after := fs.String("after", "", "start after this key (the nextAfter of the previous page)")
	keysOnly := fs.Bool("keys-only", false, "keys without their values")
	return func(e *env, args []string) error {
		if *prefix == "" {
			return usagef("kv list: --prefix is required")
		}
		op := map[string]any{"op": "getPrefix", "ns": args[0], "prefix": *prefix, "limit": *limit}
		if *after != "" {
			op["after"] = *after
		}
		if *keysOnly {
			op["keysOnly"] = true
		}
		var res struct {
			OK      bool
			Reason  string
			Results []struct {
				Rows      []kvEntry
				Truncated bool
				NextAfter *string
			}
		}
		// A batch of reads only: a linearizable read, nothing written.
		raw, err := e.api.do(e.ctx, http.MethodPost, "/api/v1/kv", nil, map[string]any{"operations": []any{op}}, &res)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		if !res.OK || len(res.Results) != 1 {
			return fmt.Errorf("kv list: the node answered %s", strings.TrimSpace(string(raw)))
		}
		r := res.Results[0]
		now := time.Now()
		t := newTable(e.out, "KEY", "VERSION", "UPDATED", "EXPIRES", "VALUE")
		for _, row := range r.Rows {
			expires := "never"
			if row.ExpiresAt != nil {
				expires = ago(row.ExpiresAt, now)
			}
			t.row(row.Key, strconv.FormatUint(row.Version, 10), ago(row.UpdatedAt, now), expires, compact(row.Value, 60))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if r.Truncated && r.NextAfter != nil {
			e.note("%d entries; more after them: --after %q", len(r.Rows), *r.NextAfter)
		} else {
			e.note("%d entries", len(r.Rows))
		}
		return nil
	}
}

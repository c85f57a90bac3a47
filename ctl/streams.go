package ctl

import (
	"flag"
	"net/http"
	"time"
)

// Stream queries (spec §4.16): the operator's list, and deleting a query
// with its state (GET and DELETE /streams/v1/queries, admin).

func init() {
	register(
		&command{path: "streams", args: "", nargs: exactly(0),
			summary: "list the stream queries the brokers keep state for: source, sink, config hash",
			setup:   setupStreamsList},
		&command{path: "streams delete", args: "<name> [--yes]", nargs: exactly(1),
			summary: "delete a stream query and its state for good; asks first unless --yes",
			setup:   setupStreamsDelete},
	)
}

type streamQuery struct {
	QueryID     string  `json:"query_id"`
	Name        string  `json:"name"`
	SourceQueue string  `json:"source_queue"`
	SinkQueue   *string `json:"sink_queue"`
	ConfigHash  string  `json:"config_hash"`
	UpdatedAt   *string `json:"updated_at"`
}

func setupStreamsList(*flag.FlagSet) runFunc {
	return func(e *env, _ []string) error {
		var out struct {
			Queries []streamQuery `json:"queries"`
		}
		raw, err := e.api.get(e.ctx, "/streams/v1/queries", nil, &out)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		now := time.Now()
		t := newTable(e.out, "NAME", "QUERY ID", "SOURCE", "SINK", "CONFIG HASH", "UPDATED")
		for _, q := range out.Queries {
			sink := ""
			if q.SinkQueue != nil {
				sink = *q.SinkQueue
			}
			t.row(q.Name, q.QueryID, q.SourceQueue, sink, clip(q.ConfigHash, 16), ago(q.UpdatedAt, now))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(out.Queries) == 0 {
			e.note("no stream queries")
		}
		return nil
	}
}

func setupStreamsDelete(fs *flag.FlagSet) runFunc {
	yes := fs.Bool("yes", false, "do not ask")
	return func(e *env, args []string) error {
		name := args[0]
		if err := e.confirm(*yes, "delete stream query %q and its state for good?", name); err != nil {
			return err
		}
		raw, err := e.api.do(e.ctx, http.MethodDelete, "/streams/v1/queries/"+esc(name), nil, nil, nil)
		if err != nil {
			return err
		}
		if e.json() {
			return e.printRaw(raw)
		}
		e.note("deleted stream query %s (its state is removed in the background)", name)
		return nil
	}
}

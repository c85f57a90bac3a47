package httpapi

import (
	"encoding/json"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// kvResultOut shapes one KV result (spec §4.7).
func kvResultOut(r *command.KVResult) map[string]any {
	out := map[string]any{}
	switch r.Kind {
	case command.KVOp_GET:
		out["found"] = r.Found
		out["key"] = r.Key
		if r.Found {
			out["value"] = json.RawMessage(r.Value)
			out["version"] = r.Version
			out["expiresAt"] = expiresOut(r.ExpiresUs)
			out["updatedAt"] = isoMillis(r.UpdatedUs)
		}
	case command.KVOp_GET_MANY, command.KVOp_GET_PREFIX:
		rows := make([]map[string]any, 0, len(r.Rows))
		for _, row := range r.Rows {
			m := map[string]any{"key": row.Key, "version": row.Version,
				"expiresAt": expiresOut(row.ExpiresUs), "updatedAt": isoMillis(row.UpdatedUs)}
			if row.Value != nil {
				m["value"] = json.RawMessage(row.Value)
			}
			rows = append(rows, m)
		}
		out["rows"] = rows
		out["truncated"] = r.Truncated
		if r.Kind == command.KVOp_GET_MANY {
			missing := r.Missing
			if missing == nil {
				missing = []string{}
			}
			out["missing"] = missing
		} else if r.NextAfter != "" {
			out["nextAfter"] = r.NextAfter
		} else {
			out["nextAfter"] = nil
		}
	default:
		out["applied"] = r.Applied
		out["op"] = request.KVOpName(r.Kind)
		out["key"] = r.Key
		if r.HasValue {
			out["value"] = json.RawMessage(r.Value)
		} else {
			out["value"] = nil
		}
		out["version"] = r.Version
		if r.Reason != command.KVResult_APPLIED {
			out["reason"] = r.Reason.Text()
		}
		if r.HasValue && r.Applied {
			out["expiresAt"] = expiresOut(r.ExpiresUs)
		}
	}
	return out
}

func expiresOut(us int64) *string {
	if us == 0 {
		return nil
	}
	s := isoMillis(us)
	return &s
}

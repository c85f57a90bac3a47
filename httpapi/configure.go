package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// decodeOptions reads the options object by the spec's names (spec §4.1);
// unknown options are ignored, null is "not named".
func decodeOptions(raw object) (*command.QueueOptions, error) {
	opts := &command.QueueOptions{}
	for name, v := range raw {
		isBool, known := request.OptionKind(name)
		if !known || !present(v) {
			continue
		}
		if isBool {
			b, ok := boolean(v)
			if !ok {
				return nil, request.Bad("options." + name + " must be a boolean")
			}
			request.SetOption(opts, name, b)
			continue
		}
		n, ok := integer(v)
		if !ok {
			return nil, request.Bad("options." + name + " must be an integer")
		}
		request.SetOption(opts, name, n)
	}
	return opts, nil
}

func (a *API) configure(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var in request.Configure
	var ok bool
	if in.Queue, ok = str(o["queue"]); !ok {
		writeError(w, request.Bad("queue is required"))
		return
	}
	for _, m := range []struct {
		name string
		dst  **string
	}{{"namespace", &in.Namespace}, {"task", &in.Task}} {
		if raw := o[m.name]; present(raw) {
			s, ok := str(raw)
			if !ok {
				writeError(w, request.Bad(m.name+" must be a string or null"))
				return
			}
			*m.dst = &s
		}
	}
	if raw := o["options"]; present(raw) {
		ro, ok := asObject(raw)
		if !ok {
			writeError(w, request.Bad("options must be an object"))
			return
		}
		if in.Options, err = decodeOptions(ro); err != nil {
			writeError(w, err)
			return
		}
	}
	cfg, err := request.ConfigureQueue(in)
	if err != nil {
		writeError(w, err)
		return
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_Configure{Configure: cfg}})
	if !ok {
		return
	}
	cr := res.(*command.ConfigureResult)
	writeJSON(w, http.StatusOK, map[string]any{
		"configured": true, "queueId": uuidString(cr.QueueId), "partitionId": uuidString(cr.PartitionId),
		"queue": cr.Queue, "namespace": cr.Namespace, "task": cr.Task, "options": optionsOut(cr.Options),
	})
}

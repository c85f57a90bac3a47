package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/request"
)

// GET/POST /api/v1/system/kv-timers: the operator switches (addendum §4.4).
// They are replicated state: a POST is one entry, seen by every node.

func switchesOut(s *command.SwitchesResult) map[string]any {
	return map[string]any{
		"kvEnabled": s.KvEnabled, "timersScheduleEnabled": s.TimersScheduleEnabled,
		"timersFireEnabled": s.TimersFireEnabled, "quotaTenants": 0, "quotaAgeMs": 0, "quotaHot": 0,
		"kv": map[string]any{"enabled": s.KvEnabled}, "timers": map[string]any{"enabled": s.TimersScheduleEnabled && s.TimersFireEnabled},
	}
}

func (a *API) getSwitches(w http.ResponseWriter, r *http.Request) {
	s, err := a.readSwitches(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, switchesOut(s))
}

func (a *API) setSwitches(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var kv, schedule, fire *bool
	for _, m := range []struct {
		name string
		dst  **bool
	}{{"kv", &kv}, {"timersSchedule", &schedule}, {"timersFire", &fire}} {
		raw, has := o[m.name]
		if !has {
			continue
		}
		b, ok := boolean(raw)
		if !ok {
			writeError(w, request.Bad(m.name+" must be a boolean"))
			return
		}
		*m.dst = &b
	}
	in, err := request.SetSwitches(kv, schedule, fire)
	if err != nil {
		writeError(w, err)
		return
	}
	if res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_SetSwitches{SetSwitches: in}}); ok {
		writeJSON(w, http.StatusOK, switchesOut(res.(*command.SwitchesResult)))
	}
}

package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/fsm/fsmpb"
)

// GET/POST /api/v1/system/kv-timers: the operator switches (addendum §4.4).
// They are replicated state: a POST is one entry, seen by every node.

func switchesOut(s *fsmpb.SwitchesResult) map[string]any {
	return map[string]any{
		"kvEnabled": s.KvEnabled, "timersScheduleEnabled": s.TimersScheduleEnabled,
		"timersFireEnabled": s.TimersFireEnabled, "quotaTenants": 0, "quotaAgeMs": 0, "quotaHot": 0,
		"kv": map[string]any{"enabled": s.KvEnabled}, "timers": map[string]any{"enabled": s.TimersScheduleEnabled && s.TimersFireEnabled},
	}
}

func (a *API) getSwitches(w http.ResponseWriter, r *http.Request) {
	var s *fsmpb.SwitchesResult
	if err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error { s = rd.Switches(); return nil }); err != nil {
		writeBackendError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, switchesOut(s))
}

func (a *API) setSwitches(w http.ResponseWriter, r *http.Request) {
	o, err := a.readObject(r)
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	in := &fsmpb.SetSwitches{}
	set := 0
	for name, dst := range map[string]**bool{"kv": &in.KvEnabled, "timersSchedule": &in.TimersScheduleEnabled, "timersFire": &in.TimersFireEnabled} {
		raw, has := o[name]
		if !has {
			continue
		}
		b, ok := boolean(raw)
		if !ok {
			writeError(w, http.StatusBadRequest, name+" must be a boolean")
			return
		}
		*dst = &b
		set++
	}
	if set == 0 {
		writeError(w, http.StatusBadRequest, "name at least one of kv, timersSchedule, timersFire (booleans)")
		return
	}
	ctx, cancel := a.writeCtx(r)
	defer cancel()
	res, err := a.b.Apply(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetSwitches{SetSwitches: in}})
	if err != nil {
		writeBackendError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, switchesOut(res.(*fsmpb.SwitchesResult)))
}

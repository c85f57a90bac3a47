package httpapi

import (
	"net/http"

	"github.com/queen-node/queen-node/command"
	"github.com/queen-node/queen-node/fsm"
	"github.com/queen-node/queen-node/request"
)

// Maintenance (spec §4.14): push and pop maintenance are operator switches
// in the log, like the KV and timer switches. While push maintenance is on,
// pushes are held in the replicated push buffer; turning it off appends
// them, in order, in bounded drain entries.

func maintenanceOut(s *command.SwitchesResult) map[string]any {
	return map[string]any{
		"maintenanceMode": s.PushMaintenance, "popMaintenanceMode": s.PopMaintenance,
		"bufferedMessages": s.Buffered, "bufferHealthy": true,
		"bufferStats": map[string]any{"buffered": s.Buffered, "draining": !s.PushMaintenance && s.Buffered > 0},
	}
}

func (a *API) readSwitches(r *http.Request) (*command.SwitchesResult, error) {
	var s *command.SwitchesResult
	err := a.b.Read(r.Context(), readLevel(r), func(rd *fsm.Reader) error { s = rd.Switches(); return nil })
	return s, err
}

func (a *API) getMaintenance(w http.ResponseWriter, r *http.Request) {
	s, err := a.readSwitches(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, maintenanceOut(s))
}

func (a *API) getPopMaintenance(w http.ResponseWriter, r *http.Request) {
	s, err := a.readSwitches(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"popMaintenanceMode": s.PopMaintenance})
}

func (a *API) setMaintenance(w http.ResponseWriter, r *http.Request) {
	s, ok := a.proposeMaintenance(w, r, false)
	if !ok {
		return
	}
	msg := "Maintenance mode enabled: pushes are buffered until it ends"
	if !s.PushMaintenance {
		s.Buffered = a.b.DrainPushBuffer(r.Context(), a.cfg.RequestTimeout)
		msg = "Maintenance mode disabled: buffered pushes appended"
		if s.Buffered > 0 {
			msg = "Maintenance mode disabled: buffered pushes are being appended"
		}
	}
	out := maintenanceOut(s)
	delete(out, "popMaintenanceMode")
	delete(out, "bufferStats")
	out["message"] = msg
	writeJSON(w, http.StatusOK, out)
}

func (a *API) setPopMaintenance(w http.ResponseWriter, r *http.Request) {
	s, ok := a.proposeMaintenance(w, r, true)
	if !ok {
		return
	}
	msg := "Pop maintenance mode disabled"
	if s.PopMaintenance {
		msg = "Pop maintenance mode enabled: every pop answers empty"
	}
	writeJSON(w, http.StatusOK, map[string]any{"popMaintenanceMode": s.PopMaintenance, "message": msg})
}

func (a *API) proposeMaintenance(w http.ResponseWriter, r *http.Request, pop bool) (*command.SwitchesResult, bool) {
	o, err := a.readObject(r)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	raw, given := o["enabled"]
	enabled, isBool := boolean(raw)
	in, err := request.Maintenance(pop, enabled, given && isBool)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	res, ok := a.propose(w, r, nil, &command.Command{Body: &command.Command_SetSwitches{SetSwitches: in}})
	if !ok {
		return nil, false
	}
	return res.(*command.SwitchesResult), true
}

package main

import "testing"

func TestCheckPush(t *testing.T) {
	ok := `[{"index":0,"status":"queued"},{"index":1,"status":"queued"}]`
	spaced := `[{"index":0, "status": "queued"}]`
	dup := `[{"index":0,"status":"queued"},{"index":1,"status":"duplicate"}]`
	cases := []struct {
		name      string
		status    int
		body      string
		n         int
		good, bad int
	}{
		{"all queued", 201, ok, 2, 2, 0},
		{"spacing falls back to decode", 201, spaced, 1, 1, 0},
		{"one duplicate", 201, dup, 2, 1, 1},
		{"fewer verdicts than items", 201, ok, 3, 0, 1},
		{"wrong status", 200, ok, 2, 0, 1},
		{"server error", 500, `{"error":"x"}`, 2, 0, 1},
		{"not JSON", 201, `oops`, 1, 0, 1},
	}
	for _, c := range cases {
		v := checkPush(c.status, []byte(c.body), c.n)
		if v.good != c.good || v.bad != c.bad || (v.bad > 0) != (v.kind != "") {
			t.Errorf("%s: got %+v, want good=%d bad=%d", c.name, v, c.good, c.bad)
		}
	}
}

func TestCheckAck(t *testing.T) {
	ok := `[{"index":0,"success":true,"error":null},{"index":1,"success":true,"error":null}]`
	lost := `[{"index":0,"success":true,"error":null},{"index":1,"success":false,"error":"Invalid or expired lease"}]`
	cases := []struct {
		name      string
		status    int
		body      string
		n         int
		good, bad int
	}{
		{"all acked", 200, ok, 2, 2, 0},
		{"one refused", 200, lost, 2, 1, 1},
		{"count mismatch", 200, ok, 1, 0, 1},
		{"bad request", 400, `{"error":"x"}`, 2, 0, 1},
	}
	for _, c := range cases {
		v := checkAck(c.status, []byte(c.body), c.n)
		if v.good != c.good || v.bad != c.bad || (v.bad > 0) != (v.kind != "") {
			t.Errorf("%s: got %+v, want good=%d bad=%d", c.name, v, c.good, c.bad)
		}
	}
}

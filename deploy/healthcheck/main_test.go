package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestTarget(t *testing.T) {
	for _, c := range []struct{ arg, env, want string }{
		{"", "", "127.0.0.1:6632"},
		{"", "0.0.0.0:6632", "127.0.0.1:6632"},
		{"", "[::]:7000", "127.0.0.1:7000"},
		{"", ":7001", "127.0.0.1:7001"},
		{"", "127.0.0.1:16632", "127.0.0.1:16632"},
		{"127.0.0.1:9", "0.0.0.0:6632", "127.0.0.1:9"},
		{"queen-1:6632", "", "queen-1:6632"},
	} {
		if got := target(c.arg, c.env); got != c.want {
			t.Errorf("target(%q, %q) = %q, want %q", c.arg, c.env, got, c.want)
		}
	}
}

func server(t *testing.T, code int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
		w.Write([]byte(`{"status":"x"}`))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://") // httptest listens on 127.0.0.1
}

func TestCheck(t *testing.T) {
	if err := check(server(t, http.StatusOK), time.Second); err != nil {
		t.Fatalf("200: %v", err)
	}
	err := check(server(t, http.StatusServiceUnavailable), time.Second)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503: got %v, want an error naming 503", err)
	}
	if err := check(server(t, http.StatusNotFound), time.Second); err == nil {
		t.Fatal("404: want an error")
	}
}

func TestCheckRefusedAndSilent(t *testing.T) {
	// A port nothing listens on: take one and close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := check(addr, time.Second); err == nil {
		t.Fatal("closed port: want an error")
	}

	// A listener that accepts and never answers: the deadline must fire.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(2 * time.Second)
		}
	}()
	start := time.Now()
	if err := check(ln.Addr().String(), 200*time.Millisecond); err == nil {
		t.Fatal("silent server: want an error")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("silent server: took %v, want the 200ms deadline", d)
	}
}

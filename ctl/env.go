package ctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"golang.org/x/term"

	queen "github.com/queen-node/queen-node/client"
)

// env is what a command runs with: the context (cancelled by Ctrl-C), the
// API of the node --url names, the output mode and the writers.
type env struct {
	ctx    context.Context
	g      globals
	api    *api
	hc     *http.Client
	out    io.Writer
	errw   io.Writer
	tty    bool // stderr is a terminal: progress is a bar, not lines
	client *queen.Client
}

func newEnv(ctx context.Context, g globals, stdout, stderr io.Writer) (*env, error) {
	hc, err := httpClient(g)
	if err != nil {
		return nil, err
	}
	e := &env{ctx: ctx, g: g, hc: hc, out: stdout, errw: stderr,
		api: &api{base: strings.TrimRight(g.url, "/"), hc: hc, token: strings.TrimSpace(g.token), tenant: g.tenant}}
	if f, ok := stderr.(*os.File); ok {
		e.tty = term.IsTerminal(int(f.Fd()))
	}
	return e, nil
}

func (e *env) close() {
	if e.client != nil {
		e.client.Close()
	}
	e.hc.CloseIdleConnections()
}

// queen is the Go client on the same transport and token.
func (e *env) queen() (*queen.Client, error) {
	if e.client != nil {
		return e.client, nil
	}
	opts := []queen.Option{queen.WithHTTPClient(e.hc)}
	if e.api.tenant != "" {
		opts = append(opts, queen.WithTenant(e.api.tenant))
	}
	if e.api.token != "" {
		opts = append(opts, queen.WithToken(e.api.token))
	}
	c, err := queen.New(e.api.base, opts...)
	if err != nil {
		return nil, err
	}
	e.client = c
	return c, nil
}

func (e *env) json() bool { return e.g.output == "json" }

// printRaw prints the API's JSON answer, indented, as it came.
func (e *env) printRaw(b []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(b), "", "  "); err != nil {
		return fmt.Errorf("the answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := e.out.Write(buf.Bytes())
	return err
}

// printJSON prints a value ctl composed (of the API's answers).
func (e *env) printJSON(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := e.out.Write(buf.Bytes())
	return err
}

// say writes a line to stdout in table mode (json mode prints JSON only).
func (e *env) say(format string, args ...any) {
	if !e.json() {
		fmt.Fprintf(e.out, format+"\n", args...)
	}
}

// note writes a line to stderr (progress, notices).
func (e *env) note(format string, args ...any) {
	fmt.Fprintf(e.errw, format+"\n", args...)
}

// confirm asks a yes/no question on stderr and reads the answer from
// stdin, unless yes (--yes) answered it already.
func (e *env) confirm(yes bool, format string, args ...any) error {
	if yes {
		return nil
	}
	fmt.Fprintf(e.errw, format+" [y/N] ", args...)
	line, _ := bufio.NewReader(stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	fmt.Fprintln(e.errw)
	return errAborted
}

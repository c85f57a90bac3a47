package cluster

import (
	"context"
	stdlog "log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newStdLogger bridges a standard-library logger (memberlist's) to slog.
func newStdLogger(l *slog.Logger, name string) *stdlog.Logger {
	return stdlog.New(slogWriter{l.With("component", name)}, "", 0)
}

// hclog bridge: Raft logs through our slog handler, at warn and above by
// default so that a healthy node stays quiet.
func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name: name, Level: hclog.Warn, Output: slogWriter{l.With("component", name)},
		DisableTime: true,
	})
}

type slogWriter struct{ l *slog.Logger }

// Write logs one line of hclog or standard-library output at the level its
// "[LEVEL]" prefix names.
func (w slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[ERROR]": slog.LevelError, "[ERR]": slog.LevelError,
		"[WARN]": slog.LevelWarn, "[INFO]": slog.LevelInfo, "[DEBUG]": slog.LevelDebug, "[TRACE]": slog.LevelDebug - 4} {
		if strings.HasPrefix(msg, prefix) {
			level, msg = l, strings.TrimSpace(strings.TrimPrefix(msg, prefix))
			break
		}
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}

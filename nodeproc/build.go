package nodeproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

// mainPackage is the queen-node command, by import path so that a build
// works from any directory inside the module.
const mainPackage = "github.com/queen-node/queen-node/cmd/queen-node"

// Build compiles queen-node (cmd/queen-node of the module the current
// directory is in) into dir and returns the binary's path. It takes at most
// five minutes.
func Build(ctx context.Context, dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "queen-node")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, mainPackage)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("nodeproc: go build %s: %v\n%s", mainPackage, err, buf.String())
	}
	return out, nil
}

// Binary is the queen-node binary to run: bin when given, else $QN_BIN when
// set (e.g. a build of an older commit), else a fresh Build into dir.
func Binary(ctx context.Context, bin, dir string) (string, error) {
	if bin == "" {
		bin = os.Getenv("QN_BIN")
	}
	if bin == "" {
		return Build(ctx, dir)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return "", fmt.Errorf("nodeproc: binary: %w", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("nodeproc: binary %s is not an executable file", bin)
	}
	return filepath.Abs(bin)
}

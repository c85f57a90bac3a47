package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"
)

// -profile DIR: while a phase of scaleout runs, every node's CPU profile
// (the node's --pprof, which -profile turns on) is taken over the phase and
// written to DIR/<run>-<phase>-<node>.pprof, to read with go tool pprof;
// the load generator's own is DIR/<run>-<phase>-load.pprof. With -trace, an
// execution trace of each node, taken from the middle of the phase, is
// DIR/<run>-<phase>-<node>.trace (go tool trace).

// profileNodes starts one CPU profile of secs seconds per node and returns
// a wait that writes them; with no dir it does nothing.
func profileNodes(ctx context.Context, dir, prefix string, nodes, urls []string, d, traceFor time.Duration) (wait func() error) {
	if dir == "" {
		return func() error { return nil }
	}
	secs := max(int(d/time.Second)-1, 1)
	var wg sync.WaitGroup
	errs := make([]error, 2*len(urls)+1)
	err := os.MkdirAll(dir, 0o755)
	var self *os.File
	if err == nil {
		self, err = os.Create(filepath.Join(dir, prefix+"-load.pprof"))
	}
	if err == nil {
		if err = pprof.StartCPUProfile(self); err != nil {
			self.Close()
		}
	}
	if err != nil {
		return func() error { return err }
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-ctx.Done():
		}
		pprof.StopCPUProfile()
		errs[2*len(urls)] = self.Close()
	}()
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", u, secs), filepath.Join(dir, fmt.Sprintf("%s-%s.pprof", prefix, nodes[i])))
		}()
		if traceFor <= 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-time.After((d - traceFor) / 2):
			case <-ctx.Done():
				return
			}
			errs[len(urls)+i] = fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/trace?seconds=%g", u, traceFor.Seconds()), filepath.Join(dir, fmt.Sprintf("%s-%s.trace", prefix, nodes[i])))
		}()
	}
	return func() error {
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// fetchProfile writes what the node's pprof endpoint at url answers to path.
func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s (was the node started with --pprof?)", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

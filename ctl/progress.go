package ctl

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress reports a long operation on stderr: a bar
// (github.com/schollz/progressbar) when stderr is a terminal, otherwise a
// plain line at the start, every --progress-interval while the count
// moves, and at the end, so that logs of tests and CI read well.
type progress struct {
	what  string // "replay", "purge", "drain"
	unit  string // "dead letters", "messages"
	w     io.Writer
	bar   *progressbar.ProgressBar // nil: plain lines
	start time.Time

	mu      sync.Mutex
	done    int64
	max     int64 // 0 = unknown
	printed int64 // the count of the last plain line

	stop chan struct{}
	wg   sync.WaitGroup
}

// progress starts a report of an operation over max items (0 = unknown).
func (e *env) progress(what, unit string, max int64) *progress {
	p := &progress{what: what, unit: unit, w: e.errw, start: time.Now(), max: max, printed: -1, stop: make(chan struct{})}
	if e.tty {
		n := max
		if n <= 0 {
			n = -1 // a spinner
		}
		p.bar = progressbar.NewOptions64(n,
			progressbar.OptionSetWriter(e.errw),
			progressbar.OptionSetDescription(what),
			progressbar.OptionSetItsString(unit),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(e.errw) }),
		)
		return p
	}
	p.line()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(e.g.progressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.mu.Lock()
				moved := p.done != p.printed
				p.mu.Unlock()
				if moved {
					p.line()
				}
			}
		}
	}()
	return p
}

// add counts n more items done.
func (p *progress) add(n int64) {
	p.mu.Lock()
	p.set(p.done + n)
	p.mu.Unlock()
}

// setDone sets the count (a purge reads it from the remaining total).
func (p *progress) setDone(n int64) {
	p.mu.Lock()
	p.set(n)
	p.mu.Unlock()
}

// grow raises the total (more items appeared while it ran).
func (p *progress) grow(max int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if max > p.max {
		p.max = max
		if p.bar != nil {
			p.bar.ChangeMax64(max)
		}
	}
}

// set is called with mu held.
func (p *progress) set(n int64) {
	p.done = n
	if p.max > 0 && n > p.max {
		p.max = n
		if p.bar != nil {
			p.bar.ChangeMax64(n)
		}
	}
	if p.bar != nil {
		_ = p.bar.Set64(n)
	}
}

// line prints the plain progress line.
func (p *progress) line() {
	p.mu.Lock()
	done, max := p.done, p.max
	p.printed = done
	p.mu.Unlock()
	el := time.Since(p.start)
	rate := ""
	if s := el.Seconds(); s >= 1 && done > 0 {
		rate = fmt.Sprintf(", %.0f/s", float64(done)/s)
	}
	if max > 0 {
		fmt.Fprintf(p.w, "%s: %d/%d %s (%d%%)%s\n", p.what, done, max, p.unit, done*100/max, rate)
		return
	}
	fmt.Fprintf(p.w, "%s: %d %s%s\n", p.what, done, p.unit, rate)
}

// finish ends the report with a last line.
func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Exit()
	} else {
		close(p.stop)
		p.wg.Wait()
		p.mu.Lock()
		moved := p.done != p.printed
		p.mu.Unlock()
		if moved {
			p.line()
		}
	}
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	fmt.Fprintf(p.w, "%s: %d %s in %s\n", p.what, done, p.unit, time.Since(p.start).Round(time.Millisecond))
}

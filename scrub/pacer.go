package scrub

import (
	"context"
	"io"

	"golang.org/x/time/rate"
)

// burst is the most a single read may ask of the limiter.
const burst = 4 << 20

// Pacer holds every background reader of a node's files to one byte rate
// (--scrub-rate-mb): the message scrub and the state checks' digests share
// it, so together they read no more than the flag says.
type Pacer struct{ limit *rate.Limiter }

// NewPacer paces readers to bytesPerSecond (> 0).
func NewPacer(bytesPerSecond float64) *Pacer {
	return &Pacer{limit: rate.NewLimiter(rate.Limit(bytesPerSecond), burst)}
}

// Wait returns once n more bytes may be read, or with ctx's error.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, burst)
		if err := p.limit.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Writer is a sink that waits for the pace of every byte written to it:
// what a digest of a state file writes through. Once ctx ends it waits no
// more (the digest finishes at once; the caller drops it).
func (p *Pacer) Writer(ctx context.Context) io.Writer { return pacedWriter{p, ctx} }

type pacedWriter struct {
	p   *Pacer
	ctx context.Context
}

func (w pacedWriter) Write(b []byte) (int, error) {
	if w.ctx.Err() == nil {
		_ = w.p.Wait(w.ctx, len(b))
	}
	return len(b), nil
}

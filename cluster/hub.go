package cluster

import "sync"

// hub tells watchers of a queue that an applied batch changed it (Watch:
// the gRPC Consume stream's lease tracker waits on it). Each queue has a
// channel that is closed (and replaced) when an applied batch changed that
// queue; "any" is closed on every change. Parked long-poll pops are woken
// by parking (parking.go), which wakes as many as a change can feed.
type hub struct {
	mu     sync.Mutex
	queues map[string]chan struct{}
	any    chan struct{}
}

func newHub() *hub {
	return &hub{queues: make(map[string]chan struct{}), any: make(chan struct{})}
}

// watch returns a channel closed at the next change of queue ("" = any).
// Take it before looking at the state, so a change in between is not missed.
func (h *hub) watch(queue string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if queue == "" {
		return h.any
	}
	ch, ok := h.queues[queue]
	if !ok {
		ch = make(chan struct{})
		h.queues[queue] = ch
	}
	return ch
}

// notify wakes the watchers of the given queues; "*" wakes every watcher.
func (h *hub) notify(queues map[string]struct{}) {
	if len(queues) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, all := queues["*"]; all {
		for q, ch := range h.queues {
			close(ch)
			delete(h.queues, q)
		}
	} else {
		for q := range queues {
			if ch, ok := h.queues[q]; ok {
				close(ch)
				delete(h.queues, q)
			}
		}
	}
	close(h.any)
	h.any = make(chan struct{})
}
